"""Simulation budgets (issue 12): a runaway run ends in SimulationLimitError naming the PE, the kernel and the last
op, whether it loops on tl calls, on simulated time, or in pure Python."""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest

from kernbench.runtime import DPPolicy, RuntimeContext, session
from kernbench.runtime.bench import BenchInfo, run_bench
from kernbench.sim import BudgetError, Limits, SimulationLimitError
from kernbench.sim.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_RECORDS, DEFAULT_MAX_SIM_NS, watchdog
from kernbench.topology import compile_spec, spec_from_dict

ONE = DPPolicy(num_cubes=1, num_pes=1)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def spin_cycles(tl, x):
    while True:
        tl.cycles(1)


def spin_long_cycles(tl, x):
    while True:
        tl.cycles(10 ** 6)


def spin_python(tl, x):
    while True:
        pass


def spin_python_swallowing(tl, x):
    while True:
        try:
            while True:
                pass
        except Exception:  # a kernel that swallows everything is still stopped
            pass


def _run(graph, kernel, **limits) -> str:
    with pytest.raises(SimulationLimitError) as info, session(graph, **limits) as torch:
        x = torch.zeros((4, 64), "float16", ONE)
        torch.wait(torch.launch("spin", kernel, x))
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_event_budget_stops_a_kernel_looping_on_tl_calls(graph):
    msg = _run(graph, spin_cycles, max_events=20_000)
    assert re.match(r"simulation stopped: the run processed 20,00\d events, more than max_events = 20,000; "
                    r"last op 'dispatch' on sip0\.cube0\.pe0\.pe_cpu at [\d,.]+ ns; sip0\.cube0\.pe0 runs kernel "
                    r"'spin' \(last waiting for CyclesCmd\); if the run is meant to be this long raise the budget "
                    r"\(--max-events N / max_events=\), else look for a loop that never ends$", msg), msg


def test_op_log_budget_bounds_the_memory_of_a_runaway(graph):
    msg = _run(graph, spin_cycles, max_records=5_000, max_events=None)
    assert re.search(r"the op log holds 5,\d{3} records, more than max_records = 5,000; last op 'dispatch' on "
                     r"sip0\.cube0\.pe0\.pe_cpu", msg), msg
    assert "(--max-records N / max_records=)" in msg


def test_simulated_time_budget(graph):
    msg = _run(graph, spin_long_cycles, max_sim_ns=5e7)
    assert "the simulated clock reached" in msg and "beyond max_sim_ns = 50,000,000" in msg
    assert "sip0.cube0.pe0 runs kernel 'spin'" in msg and "(--max-sim-ns NS / max_sim_ns=)" in msg


@pytest.mark.parametrize("kernel", [spin_python, spin_python_swallowing])
def test_wall_clock_watchdog_stops_pure_python_spinning(graph, kernel):
    t0 = time.perf_counter()
    msg = _run(graph, kernel, timeout_s=0.5)
    assert time.perf_counter() - t0 < 10
    assert "the run took more than the wall-clock timeout of 0.5 s" in msg
    assert "sip0.cube0.pe0 runs kernel 'spin'" in msg
    assert f"Python was executing {__file__}:" in msg and f"in {kernel.__name__};" in msg
    assert "(--timeout SECONDS / timeout_s=)" in msg


def test_watchdog_restores_the_previous_alarm_handler(graph):
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGALRM, mine)
    try:
        ctx = RuntimeContext(graph)
        with watchdog(ctx.engine, 5.0):
            assert ctx.engine.deadline is not None
        assert signal.getsignal(signal.SIGALRM) is mine and ctx.engine.deadline is None
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, old)


def test_a_nested_watchdog_restores_the_enclosing_one(graph):
    ctx = RuntimeContext(graph)
    with watchdog(ctx.engine, 30.0):
        outer = ctx.engine.deadline
        with watchdog(ctx.engine, 10.0):
            assert ctx.engine.deadline < outer
        assert ctx.engine.deadline == outer and ctx.engine.timeout_s == 30.0
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30.0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and ctx.engine.deadline is None


def test_wall_clock_budget_off_the_main_thread_is_checked_between_events(graph):
    # No SIGALRM outside the main thread: the engine's own deadline check stops an event-heavy runaway.
    out: dict = {}

    def body():
        try:
            _run(graph, spin_cycles, timeout_s=0.5, max_events=None)
        except BaseException as exc:  # pragma: no cover - reported below
            out["exc"] = exc
        out["done"] = True

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(60)
    assert out.get("done") and "exc" not in out, out


def test_session_after_a_limit_is_closed_without_resuming_the_run(graph):
    with pytest.raises(SimulationLimitError), session(graph, max_events=5_000) as torch:
        x = torch.zeros((4, 64), "float16", ONE)
        torch.wait(torch.launch("spin", spin_cycles, x))
    assert torch.closed and x.freed
    events = torch.engine.events
    assert events < 5_000 + 4096  # the close did not run the runaway kernel any further


def test_run_bench_reports_the_limit_as_a_failed_run(graph):
    def bench_fn(torch):
        x = torch.zeros((4, 64), "float16", ONE)
        torch.launch("spin", spin_cycles, x)

    info = BenchInfo("spin-forever", "a kernel that never ends", bench_fn, __name__)
    result = run_bench(info, graph, limits=Limits(max_events=10_000))
    assert not result.ok and result.error_code == "SimulationLimitError"
    assert "more than max_events = 10,000" in result.error and isinstance(result.exception, SimulationLimitError)


def test_defaults_and_validation():
    assert Limits() == Limits(DEFAULT_MAX_EVENTS, DEFAULT_MAX_SIM_NS, None)
    assert (DEFAULT_MAX_EVENTS, DEFAULT_MAX_SIM_NS, DEFAULT_MAX_RECORDS) == (200_000_000, 1e10, 10_000_000)
    for bad in ({"max_events": 0}, {"max_events": 1.5}, {"max_events": True}, {"max_sim_ns": -1.0},
                {"max_sim_ns": float("nan")}, {"timeout_s": 0}, {"timeout_s": "5"}, {"max_records": -5},
                {"max_records": 2.0}):
        with pytest.raises(BudgetError, match=f"{next(iter(bad))} = .* is invalid; expected a positive"):
            Limits(**bad)
    Limits(None, None, None, None)


def test_a_normal_run_is_untouched_by_the_budgets(graph):
    results = []
    for limits in (Limits(None, None, None), Limits()):
        ctx = RuntimeContext(graph, limits=limits)
        ctx.zeros((64, 64), "float16", DPPolicy(num_cubes=2, num_pes=2))
        results.append((ctx.now_ns, ctx.engine.events, len(ctx.oplog)))
    assert results[0] == results[1]
