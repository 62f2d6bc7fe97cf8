"""The simulated-time budget holds at the end of a run too: a run whose last event lands past ``max_sim_ns`` raises
SimulationLimitError, even when no periodic budget check (every CHECK_EVERY steps) ever saw the clock past it."""

from __future__ import annotations

import pytest

from kernbench.sim import ComponentRegistry, GraphEngine, Limits, MemoryWriteMsg, SimulationLimitError
from kernbench.sim.limits import CHECK_EVERY
from kernbench.topology import PhysAddr

SRAM0 = PhysAddr(0, 0, "sram", 0)


def _engine(graph, impls, max_sim_ns: float | None) -> GraphEngine:
    return GraphEngine(graph, ComponentRegistry(impls), limits=Limits(max_sim_ns=max_sim_ns))


def _clock_message(reached: str, budget: str) -> str:
    return f"the simulated clock reached {reached} ns, beyond max_sim_ns = {budget};"


@pytest.mark.parametrize(("budget", "over"), [(999.0, True), (999.999, True), (1000.0, False), (1000.5, False)])
def test_a_single_event_past_the_budget_ends_the_run(small_graph, test_impls, budget, over):
    # One event at t = 1000 ns and nothing else: the only check that can see it is the one after the last event.
    eng = _engine(small_graph, test_impls, budget)
    fired: list[float] = []
    eng.at(1000.0, lambda _: fired.append(eng.now))
    if over:
        with pytest.raises(SimulationLimitError) as info:
            eng.run()
        msg = str(info.value)
        assert msg.startswith("simulation stopped: " + _clock_message("1,000.0", f"{budget:,.0f}"))
        assert "no op logged yet; no kernel was running" in msg and "(--max-sim-ns NS / max_sim_ns=)" in msg
    else:  # exactly the budget (or under it) is allowed
        eng.run()
    assert fired == [1000.0] and eng.events == 1


def test_many_events_within_the_budget_then_a_last_one_past_it(small_graph, test_impls):
    # CHECK_EVERY + 500 events at 0.1 ns steps up to 459.5 ns pass the periodic check (which runs after the first
    # CHECK_EVERY of them); only the final event, at 500 ns, crosses the 480 ns budget.
    n = CHECK_EVERY + 500
    eng = _engine(small_graph, test_impls, 480.0)
    times: list[float] = []
    for i in range(n):
        eng.at(i * 0.1, lambda _: times.append(eng.now))
    eng.at(500.0, lambda _: times.append(eng.now))
    with pytest.raises(SimulationLimitError, match=_clock_message("500.0", "480")):
        eng.run()
    assert len(times) == n + 1 and max(times[:-1]) < 480.0 < times[-1] == 500.0


def _write_end(graph, impls) -> float:
    """When one 4 KiB write to SRAM completes with no budget at all."""
    eng = _engine(graph, impls, None)
    req = eng.submit(MemoryWriteMsg(SRAM0, 4096))
    eng.run()
    assert eng.events < CHECK_EVERY  # the whole run fits in one chunk: no periodic check ever runs
    return req.t_end


@pytest.mark.parametrize("how", ["run", "wait"])
def test_a_transfer_whose_completion_crosses_the_budget(small_graph, test_impls, how):
    end = _write_end(small_graph, test_impls)
    eng = _engine(small_graph, test_impls, end * (1 - 1e-9))  # the completion is the only event past the budget
    req = eng.submit(MemoryWriteMsg(SRAM0, 4096))
    with pytest.raises(SimulationLimitError) as info:
        eng.run() if how == "run" else eng.wait(req)
    assert _clock_message(f"{end:,.1f}", f"{end * (1 - 1e-9):,.0f}") in str(info.value)
    assert "last op 'h2d_write' on tray.host_cpu" in str(info.value)
    assert req.t_end == end  # it did complete: the budget is checked after the event, as documented


@pytest.mark.parametrize("how", ["run", "wait"])
def test_a_transfer_ending_exactly_at_the_budget_completes(small_graph, test_impls, how):
    end = _write_end(small_graph, test_impls)
    eng = _engine(small_graph, test_impls, end)
    req = eng.submit(MemoryWriteMsg(SRAM0, 4096))
    eng.run() if how == "run" else eng.wait(req)
    assert req.t_end == end and eng.now == end
