"""The all-gather and reduce-scatter benches end to end through the bench runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench.ccl.algorithms import grid_all_gather
from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))
METRIC = {"all-gather": "allgather_ns", "reduce-scatter": "reducescatter_ns"}


@pytest.mark.parametrize("name", list(METRIC))
@pytest.mark.parametrize(("topo", "kind"), [("topology", "tcm"), ("topology", "hbm"),
                                            ("6sip_2x3_torus_2d", "sram")])
def test_the_bench_verifies_its_result_and_reports_its_latency(monkeypatch, name, topo, kind):
    monkeypatch.setenv("CCL_BYTES", "1024")
    monkeypatch.setenv("CCL_BUFFER", kind)
    r = run_bench(discover().resolve(name), load_topology(TOPOLOGIES / f"{topo}.yaml"), data=True)
    assert r.ok, r.error
    assert r.metrics[METRIC[name]] > 0 and r.op_counts["ipcq_copy"] > 0


def test_latency_grows_with_the_block(monkeypatch):
    graph = load_topology(TOPOLOGIES / "6sip_2x3_ring_1d.yaml")
    spans = []
    for nbytes in (256, 16384):
        monkeypatch.setenv("CCL_BYTES", str(nbytes))
        spans.append(run_bench(discover().resolve("all-gather"), graph).metrics["allgather_ns"])
    assert spans[0] < spans[1]


def test_a_wrong_gather_is_caught(monkeypatch):
    def own_block_only(tl, t, out, sip_rank, wrap_rows, wrap_cols, sip_topo_w, sip_topo_h):
        rows = t.shape[0]
        tl.store(tl.ref(out)[sip_rank * rows:(sip_rank + 1) * rows, :], tl.load(t))

    monkeypatch.setattr(grid_all_gather, "grid_all_gather", own_block_only)
    r = run_bench(discover().resolve("all-gather"), load_topology(TOPOLOGIES / "topology.yaml"), data=True)
    assert not r.ok and "rank 0 does not hold every rank's block in rank order" in r.error


def test_a_block_that_is_not_whole_rows_is_refused(monkeypatch):
    monkeypatch.setenv("CCL_BYTES", "1000")
    r = run_bench(discover().resolve("reduce-scatter"), load_topology(TOPOLOGIES / "topology.yaml"))
    assert not r.ok and "BYTES=1000 must be a multiple of 128" in r.error
