"""Progress on stderr for long work: a live line on a terminal, plain rate-limited lines anywhere else.

On a terminal, :class:`Progress` shows a live status line (simulated time,
events, events per second) once a run has taken longer than ``after_s``, and
erases it at the end. When stderr is not a terminal (``kernbench run ... 2>
log``, a pipe, CI), it writes plain lines instead, at most one every
:data:`LINE_EVERY_S` seconds (the first one after that long, so short runs
stay silent) and a last one when a run that printed any ends.
:class:`LineTicker` is that rate limit, for any long job; :func:`announce`
writes one line at once, for a stage starting or ending (figures being
drawn, latexmk running). A background thread samples the engine (its clock
and event counter are plain numbers, read without locks); the simulation
itself does no extra work.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

#: Seconds between two progress lines on a stream that is not a terminal.
LINE_EVERY_S = 5.0


def _fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.1f} ns"


def describe(label: str, sim_ns: float, events: int, wall_s: float) -> str:
    """The progress text: label, simulated time, events, events per second of wall time."""
    rate = events / wall_s if wall_s > 0 else 0.0
    return f"{label}: simulated {_fmt_ns(sim_ns)}, {events:,} events, {rate:,.0f} events/s"


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (a stream without ``isatty`` is not)."""
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


def announce(text: str, stream=None) -> None:
    """Write one progress line at once (a stage starting or finishing) to ``stream`` (default: stderr)."""
    out = stream if stream is not None else sys.stderr
    out.write(text + "\n")
    out.flush()


class LineTicker:
    """Plain progress lines at a modest rate: :meth:`tick` writes its text only when ``every_s`` seconds of
    ``clock`` have passed since the ticker started or since its last line; :meth:`stage` writes at once (and
    restarts the wait, so a periodic line never follows a stage line immediately)."""

    def __init__(self, stream=None, every_s: float = LINE_EVERY_S, clock: Callable[[], float] = time.perf_counter
                 ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.clock = clock
        self.last = clock()
        self.lines = 0

    def tick(self, text: str | Callable[[], str]) -> bool:
        """Write ``text`` (or what it returns, computed only when due) if a line is due; whether it wrote."""
        now = self.clock()
        if now - self.last < self.every_s:
            return False
        self._write(text() if callable(text) else text, now)
        return True

    def stage(self, text: str) -> None:
        """Write ``text`` now (a finished stage)."""
        self._write(text, self.clock())

    def _write(self, text: str, now: float) -> None:
        announce(text, self.stream)
        self.last = now
        self.lines += 1


class Progress:
    """``with Progress(label) as p: run_bench(..., observe=p.watch)`` shows progress while the block runs.

    ``enabled`` means the live terminal line (stderr is a terminal, or ``force``); otherwise ``lines`` is the
    :class:`LineTicker` writing plain lines every ``every_s`` seconds of ``clock``.
    """

    def __init__(self, label: str, *, after_s: float = 1.0, period_s: float = 0.25, stream=None,
                 force: bool = False, every_s: float = LINE_EVERY_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.label = label
        self.after_s = after_s
        self.period_s = period_s
        self.every_s = every_s
        self.clock = clock
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or is_terminal(self.stream)
        self.lines: LineTicker | None = None
        self.engine = None
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def watch(self, engine) -> None:
        """Follow ``engine`` (the observer hook of ``run_bench``)."""
        self.engine = engine

    def text(self) -> str | None:
        """The current progress text, or None before an engine is watched."""
        eng = self.engine
        if eng is None:
            return None
        return describe(self.label, eng.now, eng.events, self.clock() - self._t0)

    def start(self) -> None:
        """Start timing (and, off a terminal, the line ticker) without a thread; :meth:`__enter__` calls it."""
        self._t0 = self.clock()
        if not self.enabled:
            self.lines = LineTicker(self.stream, self.every_s, self.clock)

    def poll(self) -> bool:
        """Off a terminal: write a progress line if one is due; whether it wrote."""
        text = self.text()
        return self.lines is not None and text is not None and self.lines.tick(text)

    def finish(self) -> None:
        """Off a terminal: a last line when the run printed any (so a log shows that it ended)."""
        if self.lines is not None and self.lines.lines:
            text = self.text()
            if text is not None:
                self.lines.stage(f"{text}; ended after {self.clock() - self._t0:.1f} s")

    def __enter__(self) -> Progress:
        self.start()
        target = self._live if self.enabled else self._ticking
        self._thread = threading.Thread(target=target, name="kernbench-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
        if exc_type is None:
            self.finish()

    def _ticking(self) -> None:
        while not self._stop.wait(self.period_s):
            self.poll()

    def _live(self) -> None:
        from rich.console import Console
        from rich.status import Status

        if self._stop.wait(self.after_s):
            return
        console = Console(file=self.stream, stderr=True)
        with Status("", console=console, spinner="dots") as status:
            self.shown = True
            while not self._stop.is_set():
                text = self.text()
                if text is not None:
                    status.update(text)
                self._stop.wait(self.period_s)
