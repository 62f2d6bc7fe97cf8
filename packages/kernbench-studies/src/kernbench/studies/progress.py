"""Progress of a study run on stderr: a bar redrawn in place on a terminal, plain lines anywhere else.

On a terminal (or when asked to) the bar ``label [#####.....] done/total
points, elapsed s`` is redrawn after every point. When stderr is not a
terminal (``kernbench study all > log 2>&1``, a pipe, CI) it writes plain
lines instead: one when the points start, at most one every
:data:`LINE_EVERY_S` seconds while they run, and one when they are all done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 30
#: Seconds between two progress lines on a stream that is not a terminal.
LINE_EVERY_S = 5.0


class Progress:
    """Progress of ``total`` points: the bar when ``enabled`` (None: when the stream is a terminal), plain
    rate-limited lines when ``enabled`` is None and the stream is not a terminal, nothing when it is False.
    ``clock`` (seconds) times the lines and the elapsed time."""

    def __init__(self, total: int, label: str, enabled: bool | None = None, stream: TextIO | None = None, *,
                 every_s: float = LINE_EVERY_S, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.label = label
        self.done = 0
        self.every_s = every_s
        self.clock = clock
        self.t0 = clock()
        self._last_line = self.t0
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = (tty if enabled is None else enabled) and total > 0
        self.lines = enabled is None and not tty and total > 0
        if self.lines:
            self._line(f"{label}: {total} points to run")
        self._draw()

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_line = self.clock()

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = WIDTH * self.done // self.total
        elapsed = self.clock() - self.t0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} points, "
                          f"{elapsed:.1f} s")
        self.stream.flush()

    def step(self) -> None:
        """One more point finished."""
        self.done += 1
        self._draw()
        if self.lines and self.done < self.total and self.clock() - self._last_line >= self.every_s:
            self._line(f"{self.label}: {self.done}/{self.total} points ({100 * self.done // self.total}%), "
                       f"{self.clock() - self.t0:.1f} s")

    def close(self) -> None:
        """End the line (the bar stays visible above the summary), or write the last plain line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
        elif self.lines:
            state = "all points done" if self.done == self.total else f"stopped after {self.done}/{self.total} points"
            self._line(f"{self.label}: {state} in {self.clock() - self.t0:.1f} s")
