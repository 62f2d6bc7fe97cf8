"""The engine schedules into SimPy's internals on its hottest path; these tests pin what it relies on.

If a SimPy release moves ``Environment._queue``, ``_eid`` or ``_now``, or changes how a heap entry is
ordered, these fail first and say so, before any timing goes subtly wrong.
"""

from __future__ import annotations

import simpy
from simpy.events import NORMAL

from kernbench.sim import ComponentError
from kernbench.sim.engine import _check_simpy_internals


def test_environment_keeps_the_heap_and_counters_the_engine_pushes_into():
    env = simpy.Environment()
    assert isinstance(env._queue, list)
    assert next(env._eid) < next(env._eid)  # an increasing counter
    assert env._now == env.now == 0
    assert NORMAL == 1  # the priority the engine uses for its pre-triggered events


def test_a_pushed_event_fires_at_its_time_in_fifo_order_with_simpy_timeouts(make_engine):
    eng = make_engine()
    order = []
    eng.at(5.0, lambda v: order.append((eng.now, v)), "pushed-first")
    eng.env.timeout(5.0).callbacks.append(lambda ev: order.append((eng.now, "timeout")))
    eng.at(5.0, lambda v: order.append((eng.now, v)), "pushed-last")
    eng.at(2.5, lambda v: order.append((eng.now, v)), "earlier")
    eng.run()
    assert order == [(2.5, "earlier"), (5.0, "pushed-first"), (5.0, "timeout"), (5.0, "pushed-last")]
    assert eng.events == 3


def test_an_environment_without_the_internals_is_refused_with_the_fix():
    class Changed:
        _queue = ()
        _eid = None

    try:
        _check_simpy_internals(Changed())
    except ComponentError as exc:
        assert "simpy>=4.1,<4.2" in str(exc)
    else:
        raise AssertionError("an Environment without _queue/_eid must be refused")
