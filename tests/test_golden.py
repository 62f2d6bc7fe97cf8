"""Every bench's op log, clock, link counters, memory and summary match the committed golden digests.

A failure here means the simulator's output moved. If a model change moved it
on purpose, regenerate with ``nox -s golden -- --update`` and name the model
change in the commit message; a refactor must move nothing.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from kernbench.sim.memory_store import MemoryStore
from kernbench.sim.oplog import OpRecord

if "oplog_digest" in sys.modules:  # loaded by another test module: one copy, so its functions pickle by name
    golden = sys.modules["oplog_digest"]
else:
    _SPEC = importlib.util.spec_from_file_location("oplog_digest",
                                                   Path(__file__).parent / "golden" / "oplog_digest.py")
    golden = importlib.util.module_from_spec(_SPEC)
    sys.modules["oplog_digest"] = golden  # dataclasses and worker processes look the module up by name
    _SPEC.loader.exec_module(golden)


def test_every_registered_bench_has_committed_digests():
    committed = golden.load()
    for name in golden.registered_benches():
        ids = [c.id for c in golden.cases([name])]
        missing = [i for i in ids if i not in committed]
        assert not missing, f"bench {name!r} has no golden digest for {missing}; run nox -s golden -- --update"


def _check(selected, jobs: int = 2) -> None:
    got = golden.compute(selected, jobs=jobs)
    want = {k: v for k, v in golden.load().items() if k in got}
    diff = golden.differences(want, got)
    assert not diff, ("simulator output moved; if a model change did it on purpose, run "
                      "`nox -s golden -- --update` and name the change in the commit:\n" + "\n".join(diff))
    assert all(d["ok"] for d in got.values())


#: The default session's set: every case on the default topology, and the multi-SIP benches on the 6-SIP torus.
QUICK_CASES = golden.quick_cases(golden.registered_benches())


@pytest.mark.parametrize("case", QUICK_CASES, ids=lambda c: c.id)
def test_golden_digests_match(case):
    """One case of the quick set a test, run in this process, so that the test session's workers (pytest-xdist)
    share the cases out."""
    _check([case], jobs=1)


#: Cases run again on the pure-Python calendar (``KERNBENCH_ACCEL=0``) where kernbench-accel is installed, so both
#: calendars meet the same digests (ADR 0046): contended all-to-all, the multi-SIP all-reduce, a GQA decode and MoE.
PURE_PYTHON_CASES = [c for c in QUICK_CASES if c.id in {
    "topology/all-to-all/timing", "6sip_2x3_torus_2d/ccl-allreduce/timing", "topology/gqa-decode/timing",
    "topology/moe/timing", "topology/matmul-composite[MATMUL_VARIANT=load_load]/timing"}]


@pytest.mark.parametrize("case", PURE_PYTHON_CASES, ids=lambda c: c.id)
def test_golden_digests_match_on_the_pure_python_calendar(case, monkeypatch):
    monkeypatch.setenv("KERNBENCH_ACCEL", "0")
    _check([case], jobs=1)


def test_the_quick_set_names_every_pure_python_case():
    assert len(PURE_PYTHON_CASES) == 5


@pytest.mark.skipif(not os.environ.get("KERNBENCH_REQUIRE_ACCEL"), reason="only where the compiled calendar must be")
def test_the_compiled_calendar_is_what_the_golden_cases_run_on():
    """In CI (KERNBENCH_REQUIRE_ACCEL) the digests above are met by the compiled calendar, not by its fallback."""
    from kernbench.sim.accel import compiled_calendar

    assert compiled_calendar() is not None


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


def test_page_digest_sees_an_address_but_not_the_bytes():
    def store(addr: int, value: int) -> MemoryStore:
        m = MemoryStore()
        m.write(addr, np.full(8, value, np.uint8))
        return m

    base = golden.digest_pages(store(0x1000, 7))
    assert golden.digest_pages(store(0x1000, 8)) == base  # values are the sketches' job
    assert golden.digest_pages(store(0x20000, 7)) != base
    assert golden.digest_pages(None) is None


# ------------------------------------------------------------------------------ numeric sketches (ADR 0029)
fingerprint = golden.fingerprint


def _ulp_noise(x: np.ndarray, seed: int = 1) -> np.ndarray:
    """Every element moved to a neighbouring float of its dtype, up or down at random: what another CPU's BLAS
    does to a result at worst, element by element."""
    up = np.random.default_rng(seed).random(x.shape) < 0.5
    return np.where(up, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)).astype(x.dtype)


@pytest.fixture(params=["float16", "float32"])
def tensor(request) -> np.ndarray:
    return (np.random.default_rng(7).standard_normal((64, 96)) * 3).astype(request.param)


def test_a_sketch_is_exact_on_the_same_values(tensor):
    assert fingerprint.compare(fingerprint.sketch(tensor), fingerprint.sketch(tensor.copy())) is None
    assert fingerprint.spread(fingerprint.sketch(tensor), fingerprint.sketch(tensor.copy())) == 0.0


def test_a_sketch_passes_every_element_one_ulp_away(tensor):
    want = fingerprint.sketch(tensor)
    noisy = _ulp_noise(tensor)
    assert (noisy != tensor).all()  # every element moved: an exact hash would fail here
    assert fingerprint.compare(want, fingerprint.sketch(noisy)) is None
    # ... and so does a whole tensor rounded the same way (the worst case: no cancellation between elements)
    assert fingerprint.compare(want, fingerprint.sketch(np.nextafter(tensor, np.inf * np.sign(tensor)))) is None


@pytest.mark.parametrize("change", ["scale 1%", "one row zeroed", "two rows swapped", "a sign flipped in one row",
                                    "one element x10", "a NaN", "transposed", "another dtype"])
def test_a_sketch_fails_a_real_numeric_change(tensor, change):
    x = tensor.copy()
    big = int(np.argmax(np.abs(x)))
    if change == "scale 1%":
        x = (x.astype(np.float64) * 1.01).astype(x.dtype)
    elif change == "one row zeroed":  # a causal mask one row off
        x[17] = 0
    elif change == "two rows swapped":
        x[[3, 40]] = x[[40, 3]]
    elif change == "a sign flipped in one row":
        x[5] = -x[5]
    elif change == "one element x10":
        x.reshape(-1)[big] *= 10
    elif change == "a NaN":
        x[0, 0] = np.nan
    elif change == "transposed":
        x = x.T.copy()
    else:
        x = x.astype(np.float64)
    assert fingerprint.compare(fingerprint.sketch(tensor), fingerprint.sketch(x)) is not None


def test_a_sketch_hashes_integer_tensors_exactly():
    x = np.arange(100, dtype=np.int32)
    y = x.copy()
    y[99] += 1
    assert fingerprint.compare(fingerprint.sketch(x), fingerprint.sketch(x.copy())) is None
    assert fingerprint.compare(fingerprint.sketch(x), fingerprint.sketch(y)) is not None


def test_the_tolerance_is_a_few_units_of_the_dtype():
    """A systematic error of one unit passes; of twice the tolerance fails (float32 and float16 alike)."""
    for dtype, units in (("float16", 4), ("float32", 64)):
        eps = float(np.finfo(dtype).eps)
        assert fingerprint.RTOL[dtype] == units * eps
        x = np.linspace(1.0, 2.0, 1000)
        want = fingerprint.sketch(x.astype(dtype))
        assert fingerprint.compare(want, fingerprint.sketch((x * (1 + eps)).astype(dtype))) is None
        assert fingerprint.compare(want, fingerprint.sketch((x * (1 + 2 * units * eps)).astype(dtype))) is not None


#: Two data-mode cases whose results go through numpy's GEMM (BLAS) and exp kernels.
_PORTABLE_CASES = ("topology/matmul-composite/data", "topology/gqa-decode-single-pe[GQA_VARIANT=opt2]/data")


def _run_with_writes(case_id: str, change) -> tuple[dict, str]:
    """Run one golden case with every float array the simulator computes passed through ``change`` on its way
    into device memory; return its digests and an exact hash of the bytes it left in memory."""
    import hashlib

    from kernbench.sim.engine import GraphEngine

    case = next(c for c in golden.cases(golden.registered_benches()) if c.id == case_id)
    write, bytes_seen = MemoryStore.write, []

    def changed(store, addr, data):
        if isinstance(data, np.ndarray) and data.dtype.kind == "f":
            data = change(data)
        return write(store, addr, data)

    init = GraphEngine.__init__

    def remember(engine, *args, **kwargs):
        init(engine, *args, **kwargs)
        bytes_seen.append(engine)

    MemoryStore.write, GraphEngine.__init__ = changed, remember
    try:
        digests = golden.run_case(case)
    finally:
        MemoryStore.write, GraphEngine.__init__ = write, init
    h = hashlib.sha256()
    for base, raw in bytes_seen[-1].memory.pages():
        h.update(base.to_bytes(8, "little") + raw)
    return digests, h.hexdigest()


@pytest.mark.parametrize("case_id", _PORTABLE_CASES)
def test_another_cpus_rounding_passes_and_a_real_numeric_change_fails(case_id):
    """ADR 0029: results one unit in the last place away (what another BLAS gives) pass the golden check although
    their bytes differ; a 1 % error in what the simulator computes fails it, on the values alone."""
    want = {case_id: golden.load()[case_id]}
    clean, clean_bytes = _run_with_writes(case_id, lambda a: a)
    assert golden.differences(want, {case_id: clean}) == []
    counter = iter(range(1 << 30))
    noisy, noisy_bytes = _run_with_writes(case_id, lambda a: _ulp_noise(a, next(counter)))
    assert noisy_bytes != clean_bytes
    assert golden.differences(want, {case_id: noisy}) == []
    wrong, _ = _run_with_writes(case_id, lambda a: (a * 1.01).astype(a.dtype))
    diff = golden.differences(want, {case_id: wrong})
    assert len(diff) == 1 and "values (tensor" in diff[0] and "oplog" not in diff[0], diff


@pytest.mark.parametrize("case_id", ["topology/matmul-composite/timing", "topology/ccl-allreduce/data"])
def test_committed_cases_record_a_real_run(case_id):
    entry = golden.load()[case_id]
    assert entry["ok"] and entry["records"] > 0 and entry["events"] > 0
    assert float.fromhex(entry["clock"]) >= entry["latency_ns"] > 0


#: What a data-mode run must share with its timing-mode twin (everything but the bytes in memory):
#: docs/design.md invariant I4, ADR 0007 and 0027.
_TIMING_FIELDS = ("ok", "latency_ns", "records", "oplog", "events", "clock", "links", "summary", "launches",
                  "commands")
_DATA_FIELDS = ("pages", "tensors", "values")


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
        assert all(data[f] is not None and timing[f] is None for f in _DATA_FIELDS)


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
