"""Megatron-style tensor parallelism: the parallel MLP equals the dense one (numpy), on every rank."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401
from kernbench.layers.tp import TP_POLICY, ColumnParallelLinear, ParallelMLP, TensorParallelError
from kernbench.runtime import RuntimeContext
from kernbench.topology import load_topology
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))


@pytest.mark.parametrize("topo", ["topology", "6sip_2x3_torus_2d"])
def test_parallel_mlp_matches_numpy_on_every_rank(topo):
    graph = load_topology(TOPOLOGIES / f"{topo}.yaml")
    torch = RuntimeContext(graph, data=True)
    world = graph.spec.system.sips.count
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((32, 64)) * 0.5).astype(np.float16)
    w1 = (rng.standard_normal((64, 96)) * 0.2).astype(np.float16)
    w2 = (rng.standard_normal((96, 48)) * 0.2).astype(np.float16)
    out, hidden = {}, {}

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        mlp = ParallelMLP(torch, w1, w2, activation="relu")
        xt = torch.from_numpy(x, TP_POLICY)
        y = mlp.fc1(xt)
        hidden[rank] = torch.to_numpy(y)
        out[rank] = torch.to_numpy(mlp.fc2(y))

    torch.multiprocessing.spawn(worker, nprocs=world)
    h = np.maximum(x.astype(np.float32) @ w1.astype(np.float32), 0)
    want = h @ w2.astype(np.float32)
    cols = 96 // world
    for rank in range(world):
        # each rank's hidden slice is its column block of relu(X W1); the outputs are the full product
        np.testing.assert_allclose(hidden[rank].astype(np.float32), h[:, rank * cols:(rank + 1) * cols],
                                   rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(out[rank].astype(np.float32), want, rtol=2e-2, atol=2e-2)
    assert len(torch.distributed.results) == world  # exactly one all-reduce per rank


def test_a_weight_that_does_not_split_over_the_ranks_is_rejected():
    graph = load_topology(TOPOLOGIES / "6sip_2x3_torus_2d.yaml")
    torch = RuntimeContext(graph)
    errors = []

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        try:
            ColumnParallelLinear(torch, np.zeros((8, 10), np.float16))
        except TensorParallelError as exc:
            errors.append(str(exc))

    torch.multiprocessing.spawn(worker, nprocs=6)
    assert len(errors) == 6 and "10 does not split over 6 ranks" in errors[0]
