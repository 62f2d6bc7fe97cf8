"""Every bench's op log, clock, link counters, memory and summary match the committed golden digests.

A failure here means the simulator's output moved. If a model change moved it
on purpose, regenerate with ``nox -s golden -- --update`` and name the model
change in the commit message; a refactor must move nothing.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from kernbench.sim.memory_store import MemoryStore
from kernbench.sim.oplog import OpRecord

_SPEC = importlib.util.spec_from_file_location("oplog_digest", Path(__file__).parent / "golden" / "oplog_digest.py")
golden = importlib.util.module_from_spec(_SPEC)
sys.modules["oplog_digest"] = golden  # dataclasses and worker processes look the module up by name
_SPEC.loader.exec_module(golden)


def test_every_registered_bench_has_committed_digests():
    committed = golden.load()
    for name in golden.registered_benches():
        ids = [c.id for c in golden.cases([name])]
        missing = [i for i in ids if i not in committed]
        assert not missing, f"bench {name!r} has no golden digest for {missing}; run nox -s golden -- --update"


def _check(selected) -> None:
    got = golden.compute(selected, jobs=2)
    want = {k: v for k, v in golden.load().items() if k in got}
    diff = golden.differences(want, got)
    assert not diff, ("simulator output moved; if a model change did it on purpose, run "
                      "`nox -s golden -- --update` and name the change in the commit:\n" + "\n".join(diff))
    assert all(d["ok"] for d in got.values())


def test_golden_digests_match():
    """Every case on the default topology, and the multi-SIP benches on the 6-SIP torus."""
    _check(golden.quick_cases(golden.registered_benches()))


@pytest.mark.slow
def test_every_golden_digest_matches():
    """The whole matrix, as `nox -s golden` checks it."""
    _check(golden.cases(golden.registered_benches()))


def test_the_quick_set_covers_every_bench_and_both_topologies():
    quick = golden.quick_cases(golden.registered_benches())
    assert {c.bench for c in quick} == set(golden.registered_benches())
    assert {c.bench for c in quick if c.topology == golden.SIX_SIP} == golden.MULTI_SIP


def _records():
    return [OpRecord(0.0, 12.5, "sip0.cube0.pe0.pe_dma", "memory", "dma_read", {"nbytes": 256, "scale": 0.125}),
            OpRecord(12.5, 40.0, "sip0.cube0.pe0.pe_gemm", "compute", "gemm", {"tile": 3})]


def test_record_digest_sees_one_ulp_an_order_swap_and_a_parameter():
    base = golden.digest_records(_records())
    nudged = _records()
    nudged[1].t_end = math.nextafter(40.0, 41.0)
    swapped = _records()[::-1]
    param = _records()
    param[0].params["scale"] = 0.25
    renamed = _records()
    renamed[1].op_name = "GEMM"
    digests = {golden.digest_records(r) for r in (nudged, swapped, param, renamed)}
    assert base not in digests and len(digests) == 4


def test_memory_digest_sees_one_byte_and_its_address():
    def store(addr: int, value: int) -> MemoryStore:
        m = MemoryStore()
        m.write(addr, np.full(8, value, np.uint8))
        return m

    base = golden.digest_memory(store(0x1000, 7))
    assert golden.digest_memory(store(0x1000, 7)) == base
    assert golden.digest_memory(store(0x1000, 8)) != base
    assert golden.digest_memory(store(0x20000, 7)) != base
    assert golden.digest_memory(None) is None


@pytest.mark.parametrize("case_id", ["topology/matmul-composite/timing", "topology/ccl-allreduce/data"])
def test_committed_cases_record_a_real_run(case_id):
    entry = golden.load()[case_id]
    assert entry["ok"] and entry["records"] > 0 and entry["events"] > 0
    assert float.fromhex(entry["clock"]) >= entry["latency_ns"] > 0


#: What a data-mode run must share with its timing-mode twin (everything but the bytes in memory): DESIGN
#: invariant 4, ADR 0007 and 0027.
_TIMING_FIELDS = ("ok", "latency_ns", "records", "oplog", "events", "clock", "links", "summary", "launches",
                  "commands")


def test_data_mode_never_changes_timing_for_any_registered_bench():
    # test_golden_digests_match proves these digests are what the code produces; here every data case must
    # equal its timing case field for field. Verification read-backs (torch.peek) take no simulated time.
    committed = golden.load()
    for case in golden.cases(golden.registered_benches()):
        if not case.data:
            continue
        data = committed[case.id]
        timing = committed[case.id.removesuffix("/data") + "/timing"]
        moved = [f for f in _TIMING_FIELDS if data[f] != timing[f]]
        assert not moved, f"{case.id}: data mode changes {moved}"
        assert data["memory"] is not None and timing["memory"] is None


@pytest.mark.slow
def test_data_mode_never_changes_the_reported_results_of_any_bench():
    """Every registered bench at its defaults, directly: latency_ns, op_counts, engines, stages, metrics."""
    from kernbench.runtime.bench import discover, run_bench
    from kernbench.topology import builtin

    graph = builtin()
    for info in discover().benches:
        timing, data = (run_bench(info, graph, 0, data=d).to_json() for d in (False, True))
        assert timing["ok"] and data["ok"], (info.name, timing["error"], data["error"])
        for key in ("latency_ns", "op_counts", "engines", "stages", "metrics", "pe_exec_start_ns", "events"):
            assert timing[key] == data[key], (info.name, key)
