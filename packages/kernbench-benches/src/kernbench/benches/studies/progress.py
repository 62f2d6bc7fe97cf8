"""A one-line progress bar on stderr, drawn only when stderr is a terminal (or when asked to)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class Progress:
    """``label [#####.....] done/total points, elapsed s`` redrawn in place; silent when disabled."""

    def __init__(self, total: int, label: str, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.label = label
        self.done = 0
        self.t0 = time.perf_counter()
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = (tty if enabled is None else enabled) and total > 0
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = WIDTH * self.done // self.total
        elapsed = time.perf_counter() - self.t0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} points, "
                          f"{elapsed:.1f} s")
        self.stream.flush()

    def step(self) -> None:
        """One more point finished."""
        self.done += 1
        self._draw()

    def close(self) -> None:
        """End the line (the bar stays visible above the summary)."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
