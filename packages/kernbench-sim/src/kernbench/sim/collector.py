"""How often Python's cyclic garbage collector runs while an engine steps.

A run allocates millions of short-lived objects (calendar entries, packets,
transfers, requests, op-log rows) beside a large long-lived one (the
compiled topology: a 16-SIP tray is about 26,000 nodes and 83,000 edges).
With CPython's default first-generation threshold (700 allocations) the
collector promotes many run objects that would have died young, and every
few hundred thousand events it runs a full collection that walks the whole
topology again. :class:`RunCollector` raises the first-generation threshold
to :data:`RUN_GEN0_THRESHOLD` while the engine steps and puts the previous
thresholds back afterwards.

A process that runs many engines on one large topology (a study worker)
also paid a full collection every few runs, each walking the whole
compiled topology (about 0.6 s on the 16-SIP tray). :func:`keep_graph`,
called by every new engine, collects once and freezes what is alive
(``gc.freeze``) when a second engine starts on a graph of at least
:data:`FREEZE_MIN_NODES` nodes, so later collections skip the topology and
whatever else outlived that point. A process that runs one engine on a
graph pays nothing. Cycles are still collected; only when changes, so
results cannot depend on it (ADR 0038).
"""

from __future__ import annotations

import gc

#: First-generation threshold (allocations minus deallocations) while an engine steps; CPython's default is 700.
RUN_GEN0_THRESHOLD = 10_000
#: A graph this large (nodes) is frozen out of the collector when a second engine starts on it (keep_graph).
FREEZE_MIN_NODES = 5_000


class _Engines:
    """How many engines have started on a graph, kept with it (``TopologyGraph.memo``)."""

    __slots__ = ("count",)

    def __init__(self, graph: object) -> None:
        self.count = 0


def keep_graph(graph) -> bool:
    """Count a new engine on ``graph`` (a :class:`~kernbench.topology.graph.TopologyGraph`); on the second one,
    when the graph has at least :data:`FREEZE_MIN_NODES` nodes, run a full collection and freeze everything
    alive (``gc.freeze``), the graph included. Returns whether it froze. Objects frozen are still freed when
    their last reference goes; only a cycle among them would outlive it, and the collection just before leaves
    none behind."""
    engines = graph.memo(_Engines)
    engines.count += 1
    if engines.count != 2 or len(graph.nodes) < FREEZE_MIN_NODES or not gc.isenabled():
        return False
    gc.collect()
    gc.freeze()
    return True


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


__all__ = ["FREEZE_MIN_NODES", "RUN_GEN0_THRESHOLD", "RunCollector", "keep_graph"]
