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
