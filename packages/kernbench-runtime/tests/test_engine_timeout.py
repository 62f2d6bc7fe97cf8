"""The engine enforces ``Limits.timeout_s`` itself (ADR 0032): no ``watchdog`` around the run is needed."""

from __future__ import annotations

import signal
import time

import pytest

from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.sim import Limits, SimulationLimitError
from kernbench.topology import compile_spec, spec_from_dict

ONE = DPPolicy(num_cubes=1, num_pes=1)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def spin_python(tl, x):
    while True:
        pass


def test_a_bare_context_with_a_wall_clock_limit_stops_a_spinning_kernel(graph):
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGALRM, mine)
    try:
        ctx = RuntimeContext(graph, limits=Limits(timeout_s=0.5))
        x = ctx.zeros((4, 64), "float16", ONE)
        t0 = time.monotonic()
        with pytest.raises(SimulationLimitError, match=r"the run took more than the wall-clock timeout of 0\.5 s; "
                                                       r".*Python was executing .* in spin_python;"):
            ctx.wait(ctx.launch("spin", spin_python, x))
        assert time.monotonic() - t0 < 10
        assert ctx.engine.halted == "the run took more than the wall-clock timeout of 0.5 s"
        # the engine's alarm is gone once it stops running: the previous handler is back, no timer is left
        assert signal.getsignal(signal.SIGALRM) is mine and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, old)


def test_the_clock_runs_from_limits_started(graph):
    """A clock started earlier (``kernbench run`` starts it before compiling) has less left: a run that starts
    past its deadline stops at its first check."""
    ctx = RuntimeContext(graph, limits=Limits(timeout_s=1.0, started=time.monotonic() - 5.0))
    with pytest.raises(SimulationLimitError, match=r"wall-clock timeout of 1 s"):
        ctx.zeros((4, 64), "float16", ONE)


def test_no_wall_clock_limit_arms_no_alarm(graph):
    ctx = RuntimeContext(graph)
    assert ctx.engine.deadline is None and ctx.engine.timeout_s is None
    ctx.zeros((4, 64), "float16", ONE)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
