"""The ahbm all-reduce end to end: exact sums for every SIP count, SIP topology, buffer kind and size; latency.

Expected values are computed independently with numpy: every shard of every
rank must equal the elementwise sum of all shards of all ranks. Inputs are
small integers so f16 sums are exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401
from kernbench.ccl import collective_span_ns
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology import compile_spec, load_topology, spec_from_dict
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))
SHARDS = DPPolicy(cube="row_wise", num_pes=1)
_GRAPHS: dict = {}


def graph(name: str):
    if name not in _GRAPHS:
        if name == "1sip":
            _GRAPHS[name] = compile_spec(spec_from_dict({"system": {"sips": {"count": 1, "grid": [1, 1]}}}))
        else:
            _GRAPHS[name] = load_topology(TOPOLOGIES / f"{name}.yaml")
    return _GRAPHS[name]


def values(rank: int, rows: int, n: int) -> np.ndarray:
    return ((np.arange(rows * n).reshape(rows, n) * 7 + 5 * rank) % 9).astype(np.float16)


def allreduce(topo: str, kind: str, nbytes: int, data: bool = True, policy: DPPolicy = SHARDS):
    """Run one all-reduce on every SIP; returns ({rank: result array}, latency ns, expected array)."""
    g = graph(topo)
    torch = RuntimeContext(g, data=data)
    world = g.spec.system.sips.count
    rows = g.spec.cubes_per_sip if policy is SHARDS else 1
    n = nbytes // 2
    out = {}

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm", buffer_kind=kind)
        t = torch.from_numpy(values(rank, rows, n), policy)
        torch.distributed.all_reduce(t)
        out[rank] = torch.to_numpy(t) if data else None

    torch.multiprocessing.spawn(worker, nprocs=world)
    total = sum(values(r, rows, n).astype(np.float64).sum(axis=0) for r in range(world))
    return out, collective_span_ns([res for _, res in torch.distributed.results]), total


def _check(out, total, world):
    assert sorted(out) == list(range(world))
    for rank, got in out.items():
        assert (got.astype(np.float64) == total).all(), f"rank {rank} does not hold the exact sum"


@pytest.mark.parametrize("topo", ["1sip", "topology", "6sip_2x3_ring_1d", "6sip_2x3_torus_2d",
                                  "6sip_2x3_mesh_2d_no_wrap"])
@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("nbytes", [16, 98304])
def test_every_shard_of_every_rank_holds_the_exact_sum(topo, kind, nbytes):
    out, _, total = allreduce(topo, kind, nbytes)
    _check(out, total, graph(topo).spec.system.sips.count)


@pytest.mark.slow
@pytest.mark.parametrize("topo", ["topology", "6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"])
@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("nbytes", [256, 4096, 16384, 65536])
def test_exact_sum_across_the_size_sweep(topo, kind, nbytes):
    out, _, total = allreduce(topo, kind, nbytes)
    _check(out, total, graph(topo).spec.system.sips.count)


@pytest.mark.parametrize("topo", ["topology", "6sip_2x3_torus_2d"])
def test_a_single_cube_tensor_reduces_across_ranks_only(topo):
    out, _, total = allreduce(topo, "tcm", 512, policy=DPPolicy(num_cubes=1, num_pes=1))
    _check(out, total, graph(topo).spec.system.sips.count)


SWEEP = (256, 16384, 98304)


@pytest.fixture(scope="module")
def latencies():
    return {(topo, n): allreduce(topo, "tcm", n, data=False)[1]
            for topo in ("6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap") for n in SWEEP}


@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"])
def test_latency_grows_with_payload(latencies, topo):
    series = [latencies[(topo, n)] for n in SWEEP]
    assert series == sorted(series) and series[0] < series[-1]


def test_the_torus_is_fastest_at_96_kib(latencies):
    torus = latencies[("6sip_2x3_torus_2d", 98304)]
    assert torus < latencies[("6sip_2x3_ring_1d", 98304)]
    assert torus < latencies[("6sip_2x3_mesh_2d_no_wrap", 98304)]


def test_buffer_kinds_give_distinct_latencies_at_64_kib_on_the_torus():
    times = {kind: allreduce("6sip_2x3_torus_2d", kind, 65536, data=False)[1] for kind in ("tcm", "sram", "hbm")}
    assert len({round(t, 3) for t in times.values()}) == 3
    assert times["tcm"] == min(times.values())
