"""The PE's compute path, in one place: FETCH (TCM -> registers), an engine, STORE (registers -> TCM).

Both the blocking ``tl`` operations (one command = FETCH, engine, STORE) and
the composite pipeline (per tile, and for ops before the tile loop) place
their stages through :class:`Stages`, so stage timing and op-log spelling
are defined once:

* ``fetch`` / ``store`` on the fetch/store engine and the TCM's read / write
  channel: bytes / TCM bandwidth; a zero-byte transfer takes no time and
  leaves no record;
* ``gemm``: tiles x the full-tile time (:func:`~kernbench.components.tiling.gemm_tile_ns`);
* ``math``: ceil(elements / lanes) PE clock cycles.

Every stage records one op-log row on the engine that ran it. Times are ns.
"""

from __future__ import annotations


class Stages:
    """One PE's FETCH -> GEMM/MATH -> STORE path over its engines (looked up once, through the scheduler)."""

    __slots__ = ("fs", "gemm_unit", "log", "math_unit", "tcm")

    def __init__(self, sched) -> None:
        self.tcm = sched.block("pe_tcm")
        self.fs = sched.block("pe_fetch_store")
        self.gemm_unit = sched.block("pe_gemm")
        self.math_unit = sched.block("pe_math")
        self.log = sched.engine.oplog

    def fetch(self, t_ready: float, nbytes: int, params: dict) -> float:
        """FETCH ``nbytes`` from ``t_ready``; records ``fetch`` with ``params``; returns its end."""
        if nbytes <= 0:
            return t_ready
        start, end = self.fs.fetch(self.tcm, t_ready, nbytes)
        self.log.record(start, end, self.fs.id, "memory", "fetch", {**params, "nbytes": nbytes})
        return end

    def store(self, t_ready: float, nbytes: int, params: dict) -> float:
        """STORE ``nbytes`` from ``t_ready``; records ``store`` with ``params``; returns its end."""
        if nbytes <= 0:
            return t_ready
        start, end = self.fs.store(self.tcm, t_ready, nbytes)
        self.log.record(start, end, self.fs.id, "memory", "store", {**params, "nbytes": nbytes})
        return end

    def gemm(self, t_ready: float, tiles: int, name: str, params: dict) -> tuple[float, float]:
        """Run ``tiles`` full GEMM tiles from ``t_ready``; records ``name``; returns (start, end)."""
        unit = self.gemm_unit
        start, end = unit.reserve(t_ready, tiles * unit.tile_ns)
        self.log.record(start, end, unit.id, "gemm", name, params)
        return start, end

    def math(self, t_ready: float, elements: int, name: str, params: dict) -> tuple[float, float]:
        """Run ``elements`` on the math engine from ``t_ready``; records ``name``; returns (start, end)."""
        unit = self.math_unit
        start, end = unit.reserve(t_ready, unit.service_ns(elements))
        self.log.record(start, end, unit.id, "math", name, params)
        return start, end
