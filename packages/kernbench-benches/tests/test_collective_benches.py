"""The collective benches end to end through the bench runner, in data mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))


@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
def test_ccl_allreduce_verifies_its_sum_and_reports_its_latency(monkeypatch, kind):
    monkeypatch.setenv("CCL_BYTES", "1024")
    monkeypatch.setenv("CCL_BUFFER", kind)
    r = run_bench(discover().resolve("ccl-allreduce"), load_topology(TOPOLOGIES / "topology.yaml"), data=True)
    assert r.ok, r.error
    assert r.metrics["allreduce_ns"] > 0
    assert r.op_counts["ipcq_copy"] > 0


def test_ccl_allreduce_rejects_an_odd_byte_count(monkeypatch):
    monkeypatch.setenv("CCL_BYTES", "1023")
    r = run_bench(discover().resolve("ccl-allreduce"), load_topology(TOPOLOGIES / "topology.yaml"))
    assert not r.ok and "must be even" in r.error


def test_tp_mlp_matches_numpy(monkeypatch):
    r = run_bench(discover().resolve("tp-mlp"), load_topology(TOPOLOGIES / "6sip_2x3_ring_1d.yaml"), data=True)
    assert r.ok, r.error
    assert r.metrics["allreduce_ns"] > 0 and r.op_counts["gemm"] > 0
