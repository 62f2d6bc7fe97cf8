"""How ranks meet in a collective: aligned launches, teardown by every rank, layout agreement, table hygiene."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401
from kernbench.ccl import CollectiveError, NeighbourError, install
from kernbench.ccl.neighbours import cube_ring
from kernbench.runtime import DPPolicy, RuntimeApiError, RuntimeContext
from kernbench.topology import load_topology
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))
SHARDS = DPPolicy(cube="row_wise", num_pes=1)


@pytest.fixture(scope="module")
def torus():
    return load_topology(TOPOLOGIES / "6sip_2x3_torus_2d.yaml")


def test_ranks_launch_a_collective_together_even_if_their_deployments_finish_apart(torus):
    """Rank r deploys r extra tensors first; the all-reduce still starts at one moment on every SIP."""
    torch = RuntimeContext(torus)

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        for _ in range(rank):
            torch.zeros((16, 64), "float16", SHARDS)
        torch.distributed.all_reduce(torch.zeros((16, 64), "float16", SHARDS))

    torch.multiprocessing.spawn(worker, nprocs=6)
    starts = {round(min(r.exec_start_ns for r in res.reports.values()), 6) for _, res in torch.distributed.results}
    assert len(starts) == 1


def test_every_rank_may_destroy_the_group(torus):
    torch = RuntimeContext(torus)

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        torch.distributed.all_reduce(torch.zeros((16, 8), "float16", SHARDS))
        torch.distributed.destroy_process_group()

    torch.multiprocessing.spawn(worker, nprocs=6)
    assert not torch.distributed.is_initialized()
    assert torch.engine.components["sip0.cube5.pe0.pe_ipcq"].links == {}


def test_ranks_must_reduce_the_same_layout(torus):
    torch = RuntimeContext(torus)

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        policy = DPPolicy(num_cubes=1, num_pes=1, cube_start=3 if rank == 2 else 0)
        torch.distributed.all_reduce(torch.zeros((1, 8), "float16", policy))

    with pytest.raises(CollectiveError, match="every rank must reduce the same layout"):
        torch.multiprocessing.spawn(worker, nprocs=6)


def test_a_rank_that_skips_the_collective_is_named(torus):
    torch = RuntimeContext(torus)

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        if rank != 4:
            torch.distributed.all_reduce(torch.zeros((16, 8), "float16", SHARDS))

    with pytest.raises(RuntimeApiError, match=r"rank\(s\) \[4\] returned without calling it"):
        torch.multiprocessing.spawn(worker, nprocs=6)


def test_install_refuses_asymmetric_tables_and_pes_that_already_have_one(torus):
    torch = RuntimeContext(torus)
    with pytest.raises(NeighbourError, match="not symmetric"):
        install(torch, {(0, 0, 0): {"E": (0, 1, 0)}}, "tcm")
    torch.distributed.init_process_group(backend="ahbm")
    with pytest.raises(NeighbourError, match="already has a neighbour table installed"):
        torch.install_ipcq(cube_ring(torus.spec, 0, 4), "tcm")
    torch.distributed.destroy_process_group()
    inst = torch.install_ipcq(cube_ring(torus.spec, 0, 4), "tcm")  # now it fits
    assert inst.active


def test_results_stay_exact_after_the_protocol_changes(torus):
    torch = RuntimeContext(torus, data=True)
    out = {}

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm", buffer_kind="hbm")
        t = torch.from_numpy(np.full((16, 32), rank + 1, np.float16), SHARDS)
        torch.distributed.all_reduce(t)
        out[rank] = torch.to_numpy(t)

    torch.multiprocessing.spawn(worker, nprocs=6)
    assert all((v == 16 * sum(range(1, 7))).all() for v in out.values())
