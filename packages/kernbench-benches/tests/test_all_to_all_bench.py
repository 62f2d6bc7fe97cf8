"""The all-to-all bench end to end through the bench runner, and its split patterns."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from kernbench.benches.ccl_all_to_all import PATTERNS, split_table
from kernbench.ccl.algorithms import grid_all_to_all_pairwise
from kernbench.ccl.launch_spec import SplitTable
from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))


def run(topo: str, data: bool = True, **params: str):
    return run_bench(discover().resolve("all-to-all"), load_topology(TOPOLOGIES / f"{topo}.yaml"), data=data,
                     params=params)


@pytest.mark.parametrize(("topo", "params"), [
    ("topology", {}),
    ("topology", {"ALGORITHM": "grid_all_to_all_hierarchical", "SPLITS": "sparse", "BUFFER": "hbm"}),
    ("6sip_2x3_torus_2d", {"CUBES": "one", "SPLITS": "sparse", "BUFFER": "sram"}),
    ("6sip_2x3_torus_2d", {"CUBES": "one", "ALGORITHM": "grid_all_to_all_hierarchical"}),
])
def test_the_bench_verifies_its_result_and_reports_its_latency(topo, params):
    r = run(topo, **params)
    assert r.ok, r.error
    assert r.metrics["alltoall_ns"] > 0 and r.op_counts["ipcq_copy"] > 0


def test_latency_grows_with_the_payload():
    spans = [run("6sip_2x3_ring_1d", data=False, CUBES="one", BYTES=str(n)).metrics["alltoall_ns"]
             for n in (1024, 65536)]
    assert spans[0] < spans[1]


def test_a_wrong_exchange_is_caught(monkeypatch):
    class Swapped(SplitTable):  # sends rank 0's block where rank 1's belongs and the other way round
        def sent_before(self, i, j):
            return SplitTable.sent_before(self, i, {0: 1, 1: 0}.get(j, j))

    real = grid_all_to_all_pairwise.plan.__wrapped__
    monkeypatch.setattr(grid_all_to_all_pairwise, "plan", lambda t, *a: real(Swapped(**{
        f.name: getattr(t, f.name) for f in dataclasses.fields(t)}), *a))
    r = run("topology", SPLITS="even", ALGORITHM="grid_all_to_all_pairwise")
    assert not r.ok and re.search(r"rank [01] does not hold the rows every rank sent it, in rank order", r.error)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_rank_splits_all_its_rows(pattern):
    table = split_table(6, 100, pattern)
    assert (table.sum(axis=1) == 100).all() and (table >= 0).all()
    assert (np.diag(table) > 0).all()
    if pattern == "even":
        assert set(table.ravel().tolist()) == {16, 17}
    else:
        assert len(set(table.ravel().tolist())) > 3  # uneven
    assert ((table == 0).any()) == (pattern == "sparse")  # only sparse has zero-size splits


def test_sizes_it_cannot_run_are_refused():
    r = run("topology", BYTES="1000")
    assert not r.ok and "BYTES=1000 must be a multiple of 128" in r.error
    r = run("6sip_2x3_torus_2d", BYTES="1024")
    assert not r.ok and "CUBES=all needs at least 16 (one per cube): raise BYTES" in r.error
