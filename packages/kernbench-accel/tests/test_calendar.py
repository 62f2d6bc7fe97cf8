"""kernbench.accel._calendar on its own: the order it runs entries in, the steps it takes, what bind() refuses.

No other kernbench package is needed: the environment is a minimal stand-in with SimPy's ``_queue`` (a heapq list
of ``(t, priority, id, event)``), ``_eid`` and ``step``. That the packet hop computes exactly what the engine's
Python hop computes is tested in kernbench-sim (``tests/test_accel_calendar.py``), against the engine itself.
"""

from __future__ import annotations

import itertools
import random
from heapq import heappop, heappush

import pytest

from kernbench.accel._calendar import Calendar, bind


class EmptySchedule(Exception):
    """What SimPy's step raises when its queue is empty."""


class FakeEnv:
    """SimPy's internals the calendar reads: a heap of (t, priority, id, callback) and the event-id counter."""

    def __init__(self) -> None:
        self._now = 0
        self._queue: list = []
        self._eid = itertools.count()

    def step(self) -> None:
        if not self._queue:
            raise EmptySchedule
        self._now, _, _, callback = heappop(self._queue)
        callback()


class Engine:
    """Holds the events counter the calendar adds its own pushes to."""

    def __init__(self) -> None:
        self.events = 0

    def hop(self, value) -> None:  # never reached: no packet is bound
        raise AssertionError("hop called")

    def arrive(self, value) -> None:
        raise AssertionError("arrive called")


def _calendar(env: FakeEnv) -> Calendar:
    engine = Engine()
    return Calendar(engine, env, engine.hop, engine.arrive, False)


def test_entries_run_in_time_priority_id_order_merged_with_the_simpy_queue():
    rng = random.Random(7)
    env = FakeEnv()
    cal = _calendar(env)
    ran = []
    keys = []
    for _ in range(400):
        t = rng.choice([0, 1, 1.5, 2, 3.25, rng.uniform(0, 5)])
        prio = rng.choice([0, 1, 1, 1])
        eid = next(env._eid)
        keys.append((t, prio, eid))
        if rng.random() < 0.5:
            cal.push((t, prio, eid, ran.append, (t, prio, eid)))
        else:
            heappush(env._queue, (t, prio, eid, lambda k=(t, prio, eid): ran.append(k)))
    assert len(cal) + len(env._queue) == 400
    cal.run(400)
    assert ran == sorted(keys)
    assert len(cal) == 0 and not env._queue


def test_the_clock_is_the_entrys_own_time_object():
    env = FakeEnv()
    cal = _calendar(env)
    seen = []
    cal.push((3, 1, next(env._eid), lambda _: seen.append(env._now), None))
    cal.push((4.5, 1, next(env._eid), lambda _: seen.append(env._now), None))
    cal.run(2)
    assert seen == [3, 4.5] and type(seen[0]) is int and type(seen[1]) is float


def test_run_takes_exactly_n_steps_and_lets_simpy_errors_through():
    env = FakeEnv()
    cal = _calendar(env)
    ran = []
    for i in range(5):
        cal.push((float(i), 1, next(env._eid), ran.append, i))
    cal.run(3)
    assert ran == [0, 1, 2] and len(cal) == 2
    cal.run(2)
    with pytest.raises(EmptySchedule):  # both queues empty: SimPy's step raises
        cal.run(1)
    assert ran == [0, 1, 2, 3, 4]


def test_an_error_in_a_callback_stops_the_run_there():
    env = FakeEnv()
    cal = _calendar(env)
    ran = []

    def boom(_):
        raise KeyError("boom")

    cal.push((1.0, 1, next(env._eid), ran.append, 1))
    cal.push((2.0, 1, next(env._eid), boom, None))
    cal.push((3.0, 1, next(env._eid), ran.append, 3))
    with pytest.raises(KeyError, match="boom"):
        cal.run(10)
    assert ran == [1] and len(cal) == 1


def test_push_refuses_what_is_not_an_entry():
    cal = _calendar(FakeEnv())
    with pytest.raises(TypeError, match="calendar entry"):
        cal.push((1.0, 1, 2, print))


def test_bind_refuses_classes_without_the_fabric_slots():
    class NoSlots:
        pass

    class Slots:
        __slots__ = ("route",)

    with pytest.raises(TypeError, match="is not a __slots__ member"):
        bind(NoSlots, NoSlots, NoSlots, NoSlots)
    with pytest.raises(TypeError, match=r"Slots\.transfer is not a __slots__ member"):
        bind(Slots, Slots, Slots, Slots)
