"""Sessions after a run stopped, and kernels that are not kernels (round 2 of issue 12).

A caught ``SimulationLimitError`` used to be raised again when the ``with session(...)`` block ended (closing
drove the engine past the same budget); ``SystemExit`` and ``KeyboardInterrupt`` raised in a kernel escaped
``torch.wait`` and wedged the session; generator and ``async def`` kernels "ran" in 0 ns; host calls such as
``torch.from_numpy`` made from inside a kernel drove the simulator re-entrantly. Each now ends in one clear error,
and the next session is untouched.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from kernbench.components import KernelError
from kernbench.runtime import DPPolicy, RuntimeApiError, RuntimeContext, session
from kernbench.sim import MessageError, SimulationLimitError
from kernbench.sim.limits import watchdog
from kernbench.topology import compile_spec, spec_from_dict

ONE = DPPolicy(num_cubes=1, num_pes=1)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _copy(tl, src, dst):
    tl.store(dst, tl.load(src))


def _spin(tl, x):
    while True:
        tl.cycles(1)


def _spin_long(tl, x):
    while True:
        tl.cycles(10 ** 6)


def _workload(graph) -> tuple[float, int, np.ndarray]:
    """A normal copy in a new session: its clock, events and result."""
    with session(graph, data=True) as torch:
        a = torch.from_numpy(np.arange(8 * 64, dtype=np.float16).reshape(8, 64), ONE)
        b = torch.zeros((8, 64), "float16", ONE)
        torch.wait(torch.launch("copy", _copy, a, b))
        return torch.now_ns, torch.engine.events, torch.peek(b)


@pytest.fixture(scope="module")
def baseline(graph):
    return _workload(graph)


@pytest.mark.parametrize(("budget", "kernel", "stopped"), [
    ({"max_events": 20_000}, _spin, r"the run processed 20,00\d events, more than max_events = 20,000"),
    ({"max_records": 3_000, "max_events": None}, _spin, r"the op log holds 3,\d{3} records, more than max_records = "
                                                        r"3,000"),
    ({"max_sim_ns": 5e7}, _spin_long, r"the simulated clock reached [\d,.]+ ns, beyond max_sim_ns = 50,000,000"),
])
def test_a_caught_limit_error_is_not_raised_again_when_the_block_ends(graph, baseline, budget, kernel, stopped):
    with session(graph, data=True, **budget) as torch:
        x = torch.zeros((4, 64), "float16", ONE)
        with pytest.raises(SimulationLimitError):
            torch.wait(torch.launch("spin", kernel, x))
        assert re.fullmatch(stopped, torch.engine.halted), torch.engine.halted
        now, events = torch.now_ns, torch.engine.events
        with pytest.raises(RuntimeApiError) as info:
            torch.zeros((4, 64), "float16", ONE)
        assert str(info.value) == (f"zeros: {torch.name} has stopped ({torch.engine.halted}); its simulation "
                                   f"cannot go on, so open a new session for more work")
        np.testing.assert_array_equal(torch.peek(x), np.zeros((4, 64), np.float16))  # reading simulates nothing
    # The block ended without raising, simulating nothing more, and freed everything.
    assert torch.closed and torch.now_ns == now and torch.engine.events == events and not torch._tensors
    assert x.freed and x.lease.gone == "was freed when its session closed"
    now_ns, events, values = _workload(graph)
    assert (now_ns, events) == baseline[:2]
    np.testing.assert_array_equal(values, baseline[2])


def _spin_python(tl, x):
    while True:
        pass


def test_a_wall_clock_limit_can_be_caught_inside_the_block_too(graph, baseline):
    """The alarm lands in the kernel's pure-Python loop; the error reaches ``torch.wait`` (it only surfaced at the
    end of the block before, so it could not be caught inside it) and is not raised again by the block's end."""
    with session(graph, data=True) as torch:
        x = torch.zeros((4, 64), "float16", ONE)
        handle = torch.launch("spin", _spin_python, x)
        # What session(timeout_s=0.2) arms for its whole block, here around the wait alone (so a slow, loaded
        # machine cannot spend the 0.2 s on the deployment instead).
        with watchdog(torch.engine, 0.2), pytest.raises(SimulationLimitError) as info:
            torch.wait(handle)
        assert str(info.value).startswith("simulation stopped: the run took more than the wall-clock timeout of "
                                          "0.2 s; ")
        assert torch.engine.halted == "the run took more than the wall-clock timeout of 0.2 s"
    assert torch.closed and x.freed
    now_ns, events, values = _workload(graph)
    assert (now_ns, events) == baseline[:2]
    np.testing.assert_array_equal(values, baseline[2])


def test_free_in_a_stopped_session_gives_memory_back_without_simulating(graph):
    with session(graph, max_events=20_000) as torch:
        x = torch.zeros((4, 64), "float16", ONE)
        with pytest.raises(SimulationLimitError):
            torch.wait(torch.launch("spin", _spin, x))
        events = torch.engine.events
        torch.free(x)
        assert x.freed and torch.engine.events == events and x.lease.gone == "was freed"
        with pytest.raises(RuntimeApiError, match=re.escape(f"launch 'spin': {torch.name} has stopped (the run "
                                                            f"processed 20,00")):
            torch.launch("spin", _spin, x)


def test_the_wall_clock_alarm_stays_quiet_once_the_run_has_stopped(graph):
    ctx = RuntimeContext(graph)
    with watchdog(ctx.engine, 0.05):
        ctx.engine.limit_error("the run processed 9 events, more than max_events = 8", "--max-events N")
        time.sleep(0.3)  # the first alarm (after 0.05 s) would raise here if the run had not stopped
    assert ctx.engine.halted == "the run processed 9 events, more than max_events = 8"


def test_a_kernel_raising_system_exit_fails_its_launch_and_the_session_goes_on(graph):
    def leave(tl, x):
        tl.load(x)
        raise SystemExit(3)

    with session(graph, data=True) as torch:
        x = torch.from_numpy(np.ones((8, 64), np.float16), ONE)
        y = torch.zeros((8, 64), "float16", ONE)
        with pytest.raises(KernelError) as info:
            torch.wait(torch.launch("leave", leave, x))
        assert str(info.value) == ("kernel 'leave' failed on sip0.cube0.pe0: RuntimeApiError: the kernel raised "
                                   "SystemExit(3); a kernel cannot end the program: return from it, or raise an "
                                   "exception to fail the launch")
        assert torch.engine.halted is None
        torch.wait(torch.launch("copy", _copy, x, y))
        np.testing.assert_array_equal(torch.peek(y), np.ones((8, 64), np.float16))


def _interrupt(tl, x):
    tl.load(x)
    raise KeyboardInterrupt


def test_keyboard_interrupt_in_a_kernel_interrupts_and_the_session_refuses_more_work(graph, baseline):
    with session(graph) as torch:
        x = torch.zeros((8, 64), "float16", ONE)
        with pytest.raises(KeyboardInterrupt):
            torch.wait(torch.launch("interrupt", _interrupt, x))
        assert re.fullmatch(r"KeyboardInterrupt interrupted the simulation at [\d,.]+ ns", torch.engine.halted)
        with pytest.raises(RuntimeApiError) as info:
            torch.wait_all()
        assert str(info.value) == (f"wait_all: {torch.name} has stopped ({torch.engine.halted}); its simulation "
                                   f"cannot go on, so open a new session for more work")
    assert torch.closed and x.freed
    # Not caught: it leaves the `with` block as it was raised, and the session is closed all the same.
    with pytest.raises(KeyboardInterrupt), session(graph) as torch:
        torch.wait(torch.launch("interrupt", _interrupt, torch.zeros((8, 64), "float16", ONE)))
    assert torch.closed and not torch._tensors
    now_ns, events, _ = _workload(graph)
    assert (now_ns, events) == baseline[:2]


def test_host_calls_inside_a_kernel_are_refused(graph):
    with session(graph, data=True) as torch:
        def deploy_inside(tl, x):
            torch.from_numpy(np.ones(4, np.float32))

        x = torch.zeros((8, 64), "float16", ONE)
        tensors, submitted = list(torch._tensors), torch.engine.submitted
        with pytest.raises(KernelError) as info:
            torch.wait(torch.launch("deploy", deploy_inside, x))
        assert str(info.value) == ("kernel 'deploy' failed on sip0.cube0.pe0: RuntimeApiError: from_numpy: called "
                                   "inside kernel 'deploy', which runs on a simulated PE; host calls (torch.*) cannot "
                                   "run in a kernel: do them before the launch and pass the tensors as arguments")
        assert torch._tensors == tensors and torch.engine.submitted == submitted + 1  # the launch alone
        y = torch.from_numpy(np.ones((8, 64), np.float16), ONE)  # outside the kernel it works
        torch.wait(torch.launch("copy", _copy, y, x))
        np.testing.assert_array_equal(torch.peek(x), np.ones((8, 64), np.float16))


def _generator_kernel(tl, x):
    yield tl.load(x)


async def _async_kernel(tl, x):
    tl.load(x)


@pytest.mark.parametrize(("kernel", "message"), [
    (_generator_kernel, "kernel launch 'k': _generator_kernel is a generator function (its body contains yield), "
                        "so calling it would run nothing; write the kernel as a plain def without yield"),
    (_async_kernel, "kernel launch 'k': _async_kernel is an async def function, so calling it would only create a "
                    "coroutine and run nothing; write the kernel as a plain def (tl calls wait for the simulator by "
                    "themselves)"),
])
def test_generator_and_async_kernels_are_refused_at_launch(graph, kernel, message):
    with session(graph) as torch:
        x = torch.zeros((8, 64), "float16", ONE)
        submitted, now = torch.engine.submitted, torch.now_ns
        with pytest.raises(MessageError) as info:
            torch.launch("k", kernel, x)
        assert str(info.value) == message
        assert torch.engine.submitted == submitted and torch.now_ns == now and not torch._launches


def test_a_kernel_that_returns_a_generator_fails_its_launch(graph):
    with session(graph) as torch:
        x = torch.zeros((8, 64), "float16", ONE)
        with pytest.raises(KernelError) as info:
            torch.wait(torch.launch("k", lambda tl, x: _generator_kernel(tl, x), x))
        assert str(info.value) == ("kernel 'k' failed on sip0.cube0.pe0: RuntimeApiError: the kernel returned a "
                                   "generator instead of running its body; a kernel is a plain function whose tl "
                                   "calls run as it is called (no yield, no async)")
