"""The op log after the wall-clock alarm stopped a run inside ``OpLog.record``: one column a record longer."""

from __future__ import annotations

from types import SimpleNamespace

from kernbench.sim.limits import limit_error
from kernbench.sim.oplog import OpLog


def _log() -> OpLog:
    log = OpLog()
    log.record(0.0, 5.0, "sip0.cube0.pe0.pe_dma", "memory", "dma_read", {"nbytes": 64})
    log.record(2.0, 9.0, "sip0.cube0.pe0.pe_gemm", "compute", "gemm", {"m": 8})
    return log


def test_a_record_cut_short_by_the_alarm_is_dropped_and_the_rest_read_as_before():
    log = _log()
    log._t0.append(11.0)  # the alarm fired after the first append of a third record
    log._t1.append(12.0)
    log.settle()
    assert len(log) == 2
    assert log.last().op_name == "gemm"
    assert [r.op_name for r in log.records] == ["dma_read", "gemm"]
    log.settle()  # a whole log is left as it is
    assert len(log) == 2


def test_the_limit_error_reads_a_settled_log():
    log = _log()
    log._t0.append(11.0)
    engine = SimpleNamespace(oplog=log, components=SimpleNamespace(created=dict), halted=None)
    err = limit_error(engine, "the run took more than the wall-clock timeout of 1.5 s", "--timeout SECONDS")
    assert "last op 'gemm' on sip0.cube0.pe0.pe_gemm at 2.0 ns" in str(err)
    assert engine.halted and len(log) == 2


def test_slices_of_the_records_are_the_records_one_by_one():
    """Any slice of ``records`` (contiguous ones take a faster path) holds exactly the records its indices name,
    in the sorted order, with their parameters."""
    from kernbench.sim.oplog import OpLog

    log = OpLog()
    for i in (3, 1, 2, 0, 4, 2):  # out of order, with a tie: the view sorts stably by t_start
        log.record(float(i), float(i) + 0.5, f"c{i}", "memory", "op", {"i": i, "n": 10 * i})
    recs = log.records
    one_by_one = [recs[k] for k in range(len(recs))]
    assert [r.t_start for r in one_by_one] == [0.0, 1.0, 2.0, 2.0, 3.0, 4.0]
    for sl in (slice(None), slice(2, 5), slice(-3, None), slice(4, 2), slice(None, None, 2), slice(5, 0, -2),
               slice(1, 100)):
        assert recs[sl] == one_by_one[sl], sl
    assert recs[1:3][1].params == {"i": 2, "n": 20}


def _shuffled_log() -> OpLog:
    log = OpLog()
    names = ("dma_read", "gemm", "ipcq_send", "dispatch")
    for i, t in enumerate((5.0, 1.0, 3.0, 3.0, 0.0, 7.0, 2.0, 6.0, 4.0)):  # out of order, with a tie
        log.record(t, t + 0.25 * i, f"sip0.cube0.pe{i % 3}.pe_dma", "memory", names[i % 4], {"i": i})
    return log


def test_since_is_the_slice_of_the_records_without_making_them():
    """``records.since(k)`` is ``records[k:]`` as a view: the same records in the same (sorted) order, its length,
    its indexing from either end, its own slices and ``since`` of it; past the end it is empty."""
    log = _shuffled_log()
    recs = log.records
    everything = list(recs)
    for k in (0, 1, 4, 8, 9, 20):
        view = recs.since(k)
        assert list(view) == everything[k:] and len(view) == len(everything[k:])
        assert view[1:3] == everything[k:][1:3] and view[::2] == everything[k:][::2]
        if len(view):
            assert view[0] == everything[k] and view[-1] == everything[-1]
        assert list(view.since(2)) == everything[k + 2:]
    import pytest

    with pytest.raises(IndexError):
        recs.since(8)[1]


def test_timings_are_the_records_times_and_sites_in_order():
    log = _shuffled_log()
    want = [(r.t_start, r.t_end, (r.component_id, r.op_kind, r.op_name)) for r in log.records]
    assert list(log.records.timings()) == want
    assert list(log.records.since(3).timings()) == want[3:]


def test_named_keeps_the_order_and_the_parameters_of_the_records_it_picks():
    log = _shuffled_log()
    everything = list(log.records)
    assert log.records.named("ipcq_send", "dispatch") == [r for r in everything
                                                          if r.op_name in ("ipcq_send", "dispatch")]
    assert log.records.since(4).named("gemm") == [r for r in everything[4:] if r.op_name == "gemm"]
    assert [r.params["i"] for r in log.records.named("gemm")] == [r.params["i"] for r in everything
                                                                   if r.op_name == "gemm"]
    assert log.records.named("no such op") == []
