"""Simulation budgets: the most events, simulated time and wall-clock time a run may take; the errors that say so.

A kernel that loops forever must end in a clear error, not in a full disk of
op log, an out-of-memory kill or a hang. Four budgets guard a run, all in
one :class:`Limits` object that goes from the caller (``kernbench run``'s
options, ``session(...)``, ``run_bench(limits=)``) to the engine unchanged:

- ``max_events``: SimPy events the engine schedules (``GraphEngine.events``,
  what ``kernbench run --json`` reports as ``events``);
- ``max_sim_ns``: the simulated clock;
- ``max_records``: records in the op log, the memory a run keeps (about
  170 bytes a record, ``benchmarks/bench_oplog.py``): a kernel looping on a
  ``tl`` call adds one per iteration;
- ``timeout_s``: wall-clock seconds, for a kernel spinning in pure Python
  without ever calling ``tl`` (no event is processed, so only a clock can
  stop it). ``kernbench run`` defaults to 600 s (counted from when the
  options were read, before the topology is compiled: ``Limits.started``),
  a ``session()`` block to :data:`DEFAULT_SESSION_TIMEOUT_S` (an hour); a
  bare ``RuntimeContext`` and ``Limits()`` have none.

The engine enforces all four itself (:func:`check_budget`). The event,
simulated-time and record budgets, and the wall clock, are checked every
:data:`CHECK_EVERY` events, between chunks of SimPy steps, so they add no
work per event (``benchmarks/bench_fabric.py``). While the engine runs with
a wall-clock limit on the main thread of a POSIX process it also arms a
``SIGALRM`` (:func:`arm_alarm`), which interrupts even a kernel's
pure-Python loop; arming and disarming costs a few microseconds per call
that runs the engine, nothing per event. Host code between such calls is
not interrupted, but its time counts: the next call that runs the engine
stops at once. :func:`watchdog` bounds a block of host code as well.

Every budget ends the run with
:class:`~kernbench.sim.errors.SimulationLimitError` (:func:`limit_error`),
which names the PE, the kernel and the last op. A run that stopped stays
stopped (``GraphEngine.halted`` says why): catching the error does not
resume it, the runtime refuses further work in that session, and closing
the session frees its memory without simulating anything (so the limit is
not raised again). A run whose queue empties with requests still waiting
ends in :class:`~kernbench.sim.errors.DeadlockError` (:func:`deadlock_error`).

The defaults are far above any shipped bench or study: the largest study
point uses 11.6 million events, 8.8 ms of simulated time and 0.8 million op
records (``python benchmarks/bench_budgets.py``, ADR 0027). The record
budget keeps a runaway op log under 2 GB.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kernbench.sim.errors import BudgetError, DeadlockError, SimulationLimitError

#: Default budgets of every engine (events, simulated ns, op records); no wall-clock limit unless asked for.
DEFAULT_MAX_EVENTS = 200_000_000
DEFAULT_MAX_SIM_NS = 1e10
DEFAULT_MAX_RECORDS = 10_000_000
#: The wall-clock limit of a ``session()`` block when none is given (s): an hour, far beyond any shipped bench or
#: study point (the slowest takes minutes), yet a kernel spinning in pure Python (``while True: pass``) no longer
#: hangs a script forever. ``timeout_s=None`` switches it off. A bare ``RuntimeContext`` has none unless built with
#: ``limits=Limits(timeout_s=...)``.
DEFAULT_SESSION_TIMEOUT_S = 3600.0
#: The shortest and longest wall-clock timeout (s): below a millisecond the alarm fires before the run starts;
#: past a year ``setitimer`` overflows the platform's time_t.
MIN_TIMEOUT_S = 0.001
MAX_TIMEOUT_S = 365 * 24 * 3600.0
#: The engine checks its budgets once per this many SimPy steps.
CHECK_EVERY = 4096


@dataclass(frozen=True)
class Limits:
    """The budgets of one run; ``None`` switches one off."""

    max_events: int | None = DEFAULT_MAX_EVENTS
    max_sim_ns: float | None = DEFAULT_MAX_SIM_NS
    timeout_s: float | None = None
    max_records: int | None = DEFAULT_MAX_RECORDS
    #: ``time.monotonic()`` when the wall clock started (``None``: when the engine is built). ``kernbench run`` sets
    #: it when it reads its options, so ``--timeout`` covers compilation and every ``--device`` run.
    started: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("max_events", "max_sim_ns", "timeout_s", "max_records"):
            value = getattr(self, name)
            if value is None:
                continue
            integral = name in ("max_events", "max_records")
            if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)) or \
                    not math.isfinite(value) or value <= 0:
                kind = "a positive integer" if integral else "a positive number"
                raise BudgetError(f"{name} = {value!r} is invalid; expected {kind} (or None for no limit)")
        if self.timeout_s is not None and not MIN_TIMEOUT_S <= self.timeout_s <= MAX_TIMEOUT_S:
            raise BudgetError(f"timeout_s = {self.timeout_s!r} is invalid; {timeout_range()}")


    def deadline(self) -> float | None:
        """The ``time.monotonic()`` past which the run must stop (``None``: no wall-clock limit); a clock that has
        not started starts now."""
        if self.timeout_s is None:
            return None
        return (time.monotonic() if self.started is None else self.started) + self.timeout_s


def timeout_range() -> str:
    """What a wall-clock timeout may be, in words (for errors)."""
    return f"expected from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:,.0f} seconds (a year), or no limit"


class WallClockExpired(BaseException):  # an interrupt, not an error: it must pass `except Exception`
    """Raised by the :func:`watchdog` signal handler wherever the main thread is; carries the frame it hit."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


def _frame_text(frame: Any) -> str:
    """``file.py:12 in fn``: where a frame is executing."""
    if frame is None:
        return "an unknown place"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


# --------------------------------------------------------------------------- the engine's checks and errors

def check_budget(engine: Any) -> None:
    """:class:`SimulationLimitError` when ``engine``'s run has used up its events, simulated time, op-log records
    or wall-clock time (the engine calls this between chunks of events)."""
    if engine.events > engine.max_events:
        raise limit_error(engine, f"the run processed {engine.events:,} events, more than max_events = "
                                  f"{engine.limits.max_events:,}", "--max-events N / max_events=")
    if engine.now > engine.max_sim_ns:
        raise limit_error(engine, f"the simulated clock reached {engine.now:,.1f} ns, beyond max_sim_ns = "
                                  f"{engine.limits.max_sim_ns:,.0f}", "--max-sim-ns NS / max_sim_ns=")
    if len(engine.oplog) > engine.max_records:
        raise limit_error(engine, f"the op log holds {len(engine.oplog):,} records, more than max_records = "
                                  f"{engine.limits.max_records:,}", "--max-records N / max_records=")
    if engine.deadline is not None and time.monotonic() > engine.deadline:
        raise timeout_error(engine)


def timeout_error(engine: Any, where: str | None = None) -> SimulationLimitError:
    """The :class:`SimulationLimitError` of a run past its wall-clock limit (``where``: the code the alarm hit)."""
    return limit_error(engine, f"the run took more than the wall-clock timeout of {engine.timeout_s:g} s",
                       "--timeout SECONDS / timeout_s=", where=where)


def limit_error(engine: Any, what: str, knob: str, where: str | None = None) -> SimulationLimitError:
    """A :class:`SimulationLimitError` for ``what``, naming the last op, the PE and kernel it belongs to, where
    Python was executing (``where``, for the wall-clock alarm) and the ``knob`` that raises the budget. Marks
    the engine halted: whoever catches the error, the run is not driven again."""
    engine.oplog.settle()  # the alarm may have stopped the run inside OpLog.record
    last = engine.oplog.last()
    running = [b for c in engine.components.created().values() if (b := c.activity()) is not None]
    if last is not None:
        op = f"last op {last.op_name!r} on {last.component_id} at {last.t_start:,.1f} ns"
        mine = [b for b in running if b.startswith(last.component_id.rsplit(".", 1)[0] + " ")]
        running = mine or running
    else:
        op = "no op logged yet"
    kernel = f"; {running[0]}" + (f" (and {len(running) - 1} more PE(s))" if len(running) > 1 else "") \
        if running else "; no kernel was running"
    at = f"; Python was executing {where}" if where else ""
    engine.halted = what
    return SimulationLimitError(f"simulation stopped: {what}; {op}{kernel}{at}; if the run is meant to be "
                                f"this long raise the budget ({knob}), else look for a loop that never ends")


def deadlock_error(engine: Any, pending: Mapping[int, Any], what: str) -> DeadlockError:
    """A :class:`DeadlockError` naming every stuck request of ``pending`` and every component that reports itself
    blocked."""
    stuck = "; ".join(f"corr {r.corr_id} {type(r.msg).__name__} from {r.source}" for r in pending.values())
    blocked = [b for c in engine.components.created().values() if (b := c.blocked()) is not None]
    detail = f"; blocked: {'; '.join(blocked)}" if blocked else ""
    return DeadlockError(f"{what}: {len(pending)} request(s) never completed: {stuck}{detail}")


#: What :func:`arm_alarm` saved: the previous handler, the previous timer and when it was armed.
Alarm = tuple[Any, tuple[float, float], float]


def arm_alarm(engine: Any) -> Alarm | None:
    """Arm ``SIGALRM`` for what is left of ``engine.deadline`` while the engine runs (``None`` off the main thread
    or without ``setitimer``: the checks between event chunks remain). Its handler raises
    :class:`WallClockExpired` wherever Python is (a kernel's pure-Python loop included), and again every second
    until the run has unwound, unless the run has already stopped. Undo with :func:`disarm_alarm`."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return None
    now = time.monotonic()

    def expire(signum: int, frame: Any) -> None:
        if engine.halted is None:
            raise WallClockExpired(_frame_text(frame))

    previous = signal.signal(signal.SIGALRM, expire)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, max(engine.deadline - now, MIN_TIMEOUT_S), 1.0)
    return previous, previous_timer, now


def disarm_alarm(alarm: Alarm) -> None:
    """Undo :func:`arm_alarm`: restore the previous handler and whatever remains of the previous timer (an
    enclosing :func:`watchdog`'s, say; one that came due meanwhile fires at once)."""
    previous, previous_timer, armed_at = alarm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    if previous_timer[0] > 0:
        left = previous_timer[0] - (time.monotonic() - armed_at)
        signal.setitimer(signal.ITIMER_REAL, max(left, MIN_TIMEOUT_S), previous_timer[1])


@contextmanager
def watchdog(engine: Any, timeout_s: float | None) -> Iterator[None]:
    """Stop the run after ``timeout_s`` wall-clock seconds with a ``SimulationLimitError``, host code included.

    Not needed for the simulation itself: an engine built with
    ``Limits(timeout_s=...)`` enforces its limit whenever it runs. This bounds a
    whole block instead, the host code between runs too. Sets
    ``engine.deadline`` (checked between event chunks) and, on the main
    thread of a POSIX process, arms ``SIGALRM``: its handler raises
    :class:`WallClockExpired` (a ``BaseException``, so a kernel's or the
    PE_CPU's ``except Exception`` cannot swallow it) in whatever code is
    running, every second until the run has unwound or has stopped at a
    budget (``engine.halted``). One that lands inside a simulation step
    becomes the ``SimulationLimitError`` right there (so the call that drove
    the engine raises it, and it can be caught); one that lands in host code
    becomes it when the block ends. ``None`` does nothing.
    """
    if timeout_s is None:
        yield
        return
    outer = (engine.deadline, engine.timeout_s)
    started = getattr(getattr(engine, "limits", None), "started", None)
    now = time.monotonic()
    engine.deadline = (now if started is None else started) + timeout_s
    alarm_s = max(engine.deadline - now, MIN_TIMEOUT_S)  # what is left of a clock started earlier
    engine.timeout_s = timeout_s
    use_signal = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous, previous_timer = None, (0.0, 0.0)
    state = {"armed": True}

    def expire(signum: int, frame: Any) -> None:
        # Once the run has stopped (a budget ran out and its error was raised, perhaps caught), the rest of the
        # block is not the run any more: the alarm stays quiet instead of raising the same limit again.
        if state["armed"] and getattr(engine, "halted", None) is None:
            raise WallClockExpired(_frame_text(frame))

    try:  # armed inside the try: an alarm that fires at once still becomes the limit error below
        if use_signal:
            previous = signal.signal(signal.SIGALRM, expire)
            previous_timer = signal.setitimer(signal.ITIMER_REAL, alarm_s, 1.0)
        yield
    except WallClockExpired as exc:
        state["armed"] = False
        raise limit_error(engine, f"the run took more than the wall-clock timeout of {timeout_s:g} s",
                          "--timeout SECONDS / timeout_s=", where=exc.where) from None
    finally:
        state["armed"] = False
        engine.deadline, engine.timeout_s = outer
        if use_signal:  # restore whatever alarm was armed before (an enclosing watchdog's, say)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
            if previous_timer[0] > 0:
                signal.setitimer(signal.ITIMER_REAL, *previous_timer)


__all__ = [
    "CHECK_EVERY",
    "DEFAULT_MAX_EVENTS",
    "DEFAULT_MAX_RECORDS",
    "DEFAULT_MAX_SIM_NS",
    "DEFAULT_SESSION_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "MIN_TIMEOUT_S",
    "Limits",
    "WallClockExpired",
    "arm_alarm",
    "check_budget",
    "deadlock_error",
    "disarm_alarm",
    "limit_error",
    "timeout_error",
    "timeout_range",
    "watchdog",
]
