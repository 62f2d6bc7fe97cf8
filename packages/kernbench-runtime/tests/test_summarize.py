"""``summarize``: the bench summary of an op log, from its view (times and sites only) or from a list of records.

The summary's figures are worked out by hand from a small log, and the two ways in give the same figures: an
op-log view is read through ``timings()`` without making record objects, a list of records (what a caller that
kept them passes) field by field.
"""

from __future__ import annotations

from kernbench.runtime.bench import summarize
from kernbench.sim.oplog import OpLog

PE0, PE1 = "sip0.cube0.pe0", "sip0.cube1.pe3"


def _log() -> OpLog:
    log = OpLog()
    rows = [  # (t_start, t_end, component, kind, op)
        (10.0, 30.0, f"{PE0}.pe_cpu", "control", "kernel"),
        (5.0, 6.0, f"{PE0}.pe_cpu", "control", "dispatch"),  # a PE_CPU op other than kernel: no engine
        (12.0, 20.0, f"{PE0}.pe_dma", "memory", "dma_read"),
        (14.0, 15.5, f"{PE0}.pe_fetch_store", "memory", "fetch"),
        (15.5, 19.0, f"{PE0}.pe_gemm", "compute", "gemm"),
        (19.0, 20.0, f"{PE0}.pe_fetch_store", "memory", "store"),
        (20.0, 26.0, f"{PE0}.pe_dma", "memory", "dma_write"),
        (11.0, 40.0, f"{PE1}.pe_cpu", "control", "kernel"),
        (21.0, 23.0, f"{PE1}.pe_math", "compute", "exp"),
        (22.0, 24.0, f"{PE1}.pe_ipcq", "control", "ipcq_copy"),
        (22.5, 23.0, f"{PE1}.pe_ipcq", "control", "ipcq_send"),
        (1.0, 2.0, "sip0.cube0.hbm_ctrl.pe0", "memory", "hbm_read"),
    ]
    for t0, t1, c, k, op in rows:
        log.record(t0, t1, c, k, op, {"n": 1})
    return log


def test_the_summary_of_a_small_log_by_hand():
    s = summarize("x", 0, _log().records)
    assert s.latency_ns == 40.0 - 1.0  # every record counts towards the span, the HBM read first
    assert s.op_counts == {"gemm": 1, "math": 1, "dma_read": 1, "dma_write": 1, "ipcq_copy": 1}
    assert s.engines["pe_dma"] == {"occupancy_ns": 8.0 + 6.0, "wall_ns": 26.0 - 12.0, "count": 2}
    assert s.engines["pe_cpu"] == {"occupancy_ns": 20.0 + 29.0, "wall_ns": 40.0 - 10.0, "count": 2}
    assert s.engines["pe_fetch_store"]["occupancy_ns"] == 1.5 + 1.0
    assert s.stages["FETCH"] == {"occupancy_ns": 1.5, "wall_ns": 1.5, "count": 1}
    assert s.stages["STORE"] == {"occupancy_ns": 1.0, "wall_ns": 1.0, "count": 1}
    assert s.stages["GEMM"]["count"] == 1 and s.stages["MATH"]["count"] == 1
    assert s.pe_exec_start_ns == {PE0: 10.0, PE1: 11.0}


def test_a_view_and_a_list_of_the_same_records_summarise_alike():
    log = _log()
    from_view = summarize("x", 0, log.records)
    from_list = summarize("x", 0, list(log.records))
    assert from_view.to_json() == from_list.to_json()
    since = summarize("x", 0, log.records.since(5))
    assert since.to_json() == summarize("x", 0, list(log.records)[5:]).to_json()
