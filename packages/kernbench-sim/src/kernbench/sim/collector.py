"""How often Python's cyclic garbage collector runs while an engine steps.

A run allocates millions of short-lived objects (calendar entries, packets,
transfers, requests, op-log rows) beside a large long-lived one (the
compiled topology: a 16-SIP tray is about 26,000 nodes and 83,000 edges).
With CPython's default first-generation threshold (700 allocations) the
collector promotes many run objects that would have died young, and every
few hundred thousand events it runs a full collection that walks the whole
topology again. :class:`RunCollector` raises the first-generation threshold
to :data:`RUN_GEN0_THRESHOLD` while the engine steps and puts the previous
thresholds back afterwards. Cycles are still collected; only how often
changes, so results cannot depend on it (ADR 0038).
"""

from __future__ import annotations

import gc

#: First-generation threshold (allocations minus deallocations) while an engine steps; CPython's default is 700.
RUN_GEN0_THRESHOLD = 10_000


class RunCollector:
    """Context manager: the collector's first-generation threshold is at least :data:`RUN_GEN0_THRESHOLD` inside,
    and the thresholds in force before are restored on exit (also on an error). A threshold of 0 (automatic
    collection off) is left as it is."""

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: tuple[int, int, int] | None = None

    def __enter__(self) -> RunCollector:
        saved = gc.get_threshold()
        self._saved = saved
        if 0 < saved[0] < RUN_GEN0_THRESHOLD:
            gc.set_threshold(RUN_GEN0_THRESHOLD, saved[1], saved[2])
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None


__all__ = ["RUN_GEN0_THRESHOLD", "RunCollector"]
