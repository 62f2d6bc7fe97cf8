"""A live progress line on stderr for long simulations: simulated time, events and events per second.

A background thread samples the engine (its clock and event counter are
plain numbers, read without locks) a few times a second and shows a line
once the run has taken longer than ``after_s``; it is shown only when stderr
is a terminal, so piped and JSON output stay clean. The simulation itself
does no extra work.
"""

from __future__ import annotations

import sys
import threading
import time


def _fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.1f} ns"


def describe(label: str, sim_ns: float, events: int, wall_s: float) -> str:
    """The progress text: label, simulated time, events, events per second of wall time."""
    rate = events / wall_s if wall_s > 0 else 0.0
    return f"{label}: simulated {_fmt_ns(sim_ns)}, {events:,} events, {rate:,.0f} events/s"


class Progress:
    """``with Progress(label) as p: run_bench(..., observe=p.watch)`` shows progress while the block runs."""

    def __init__(self, label: str, *, after_s: float = 1.0, period_s: float = 0.25, stream=None,
                 force: bool = False) -> None:
        self.label = label
        self.after_s = after_s
        self.period_s = period_s
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.engine = None
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def watch(self, engine) -> None:
        """Follow ``engine`` (the observer hook of ``run_bench``)."""
        self.engine = engine

    def __enter__(self) -> Progress:
        self._t0 = time.perf_counter()
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="kernbench-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _loop(self) -> None:
        from rich.console import Console
        from rich.status import Status

        if self._stop.wait(self.after_s):
            return
        console = Console(file=self.stream, stderr=True)
        with Status("", console=console, spinner="dots") as status:
            self.shown = True
            while not self._stop.is_set():
                eng = self.engine
                if eng is not None:
                    status.update(describe(self.label, eng.now, eng.events, time.perf_counter() - self._t0))
                self._stop.wait(self.period_s)
