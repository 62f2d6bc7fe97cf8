"""Data mode never changes timing: every partitioning and mode gives the same window, op counts, engine
occupancy, messages and placement with real numbers on or off (and twice in a row)."""

from __future__ import annotations

import pytest

from kernbench.layers.attention import PARTITIONS, gqa_decode, gqa_prefill
from kernbench.layers.attention.benchkit import inputs
from kernbench.runtime import RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _timing_view(r) -> tuple:
    return r.latency_ns, r.op_counts, r.engines, r.ipcq_messages, r.kv_bytes_per_cube, r.pes_active


CALLS = [(f"decode-{p}", lambda t, p=p: gqa_decode(t, *inputs(2, 8, 2, 1, 150, 64, seed=30), partition=p, pes=3,
                                                    cubes=1 if p == "single_pe" else 2)) for p in PARTITIONS]
CALLS += [("decode-opt1", lambda t: gqa_decode(t, *inputs(1, 8, 1, 1, 150, 64, seed=31), partition="cube_sp_pe_sp",
                                               pes=2, cubes=2, variant="opt1")),
          ("decode-opt3", lambda t: gqa_decode(t, *inputs(1, 8, 1, 1, 150, 64, seed=31), partition="cube_sp_pe_sp",
                                               pes=2, cubes=2, variant="opt3")),
          ("prefill-short", lambda t: gqa_prefill(t, *inputs(2, 8, 2, 40, 90, 64, seed=32), mode="short", pes=3,
                                                  cubes=2)),
          ("prefill-ring", lambda t: gqa_prefill(t, *inputs(2, 8, 2, 40, 90, 64, seed=32), mode="ring", pes=2,
                                                 cubes=2))]


@pytest.mark.parametrize("call", [c for _, c in CALLS], ids=[n for n, _ in CALLS])
def test_timing_and_data_mode_agree(graph, call):
    timing = call(RuntimeContext(graph))
    data = call(RuntimeContext(graph, data=True))
    again = call(RuntimeContext(graph))
    assert timing.out is None and data.out is not None
    assert _timing_view(timing) == _timing_view(data) == _timing_view(again)
    assert [lr.pe_exec_ns for lr in timing.launch] == [lr.pe_exec_ns for lr in data.launch]


def test_the_window_excludes_deployment_and_read_back(graph):
    """The window is the launches' first PE start to last PE end: it starts after the tensors are deployed and
    ends before the output is read back (which only data mode does)."""
    torch = RuntimeContext(graph, data=True)
    r = gqa_decode(torch, *inputs(1, 8, 1, 1, 150, 64, seed=33), partition="cube_sp_pe_sp", pes=2, cubes=2)
    starts = [rep.exec_start_ns for lr in r.launch for rep in lr.reports.values()]
    ends = [rep.exec_start_ns + rep.exec_ns for lr in r.launch for rep in lr.reports.values()]
    assert r.latency_ns == pytest.approx(max(ends) - min(starts))
    assert min(starts) > 0 and torch.now_ns > max(ends)


@pytest.mark.parametrize("call", [c for n, c in CALLS if n in ("decode-cube_sp_pe_sp", "decode-short", "prefill-ring")],
                         ids=["decode-cube_sp_pe_sp", "decode-short", "prefill-ring"])
def test_a_call_on_another_sip_runs_there_and_agrees(graph, call):
    """The same call on SIP 1 of the two-SIP topology: its PEs are SIP 1's, its links too, and it times the same."""
    here, there = call(RuntimeContext(graph, data=True)), call(RuntimeContext(graph, data=True, device=1))
    assert all(pe.startswith("sip1.") for lr in there.launch for pe in lr.reports)
    assert (there.out == here.out).all() and _timing_view(there) == _timing_view(here)
