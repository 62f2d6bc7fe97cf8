"""PE-local compute engines: fetch/store, GEMM and math (the TCM is in ``tcm.py``, the scheduler in ``scheduler.py``).

Engines are serial servers that keep a "free at" time, like wires: a stage
starts when both its input is ready and the engine is free, and occupies the
engine for its service time. Everything inside a PE is arithmetic on these
times; only the command's completion is a scheduled event.

Service times (ns):

* FETCH  — bytes / TCM read bandwidth, on the fetch/store engine and the TCM read channel;
* STORE  — bytes / TCM write bandwidth, on the fetch/store engine and the TCM write channel;
* GEMM   — tiles x (2 tm tn tk / peak), an under-filled tile costs a full tile;
* MATH   — ceil(elements / lanes) cycles at the PE clock.
"""

from __future__ import annotations

import math

from kernbench.components.pe.tcm import PeTcm
from kernbench.components.tiling import gemm_tile_ns
from kernbench.sim.component import Component
from kernbench.sim.protocol import Engine
from kernbench.topology import block_params


class Server(Component):
    """A serial engine: ``free_at`` plus occupancy counters (ns)."""

    __slots__ = ("busy_ns", "count", "free_at")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.free_at = 0.0
        self.busy_ns = 0.0
        self.count = 0

    def reserve(self, t_ready: float, service_ns: float) -> tuple[float, float]:
        """Occupy the engine for ``service_ns`` from ``max(t_ready, free_at)``; returns (start, end)."""
        start = t_ready if t_ready > self.free_at else self.free_at
        end = start + service_ns
        self.free_at = end
        self.busy_ns += service_ns
        self.count += 1
        return start, end


class PeFetchStore(Server):
    """Moves operands TCM -> register file (FETCH) and results back (STORE).

    Its two directions work independently, like the TCM's read and write
    channels they use: a STORE never holds up the next FETCH.
    """

    PARAMS = block_params.PE_FETCH_STORE  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("store_free",)

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.store_free = 0.0

    def fetch(self, tcm: PeTcm, t_ready: float, nbytes: int) -> tuple[float, float]:
        """FETCH ``nbytes``; returns (start, end) ns."""
        if nbytes <= 0:
            return t_ready, t_ready
        start, end = tcm.read(max(t_ready, self.free_at), nbytes)
        self.reserve(start, end - start)
        return start, end

    def store(self, tcm: PeTcm, t_ready: float, nbytes: int) -> tuple[float, float]:
        """STORE ``nbytes``; returns (start, end) ns."""
        if nbytes <= 0:
            return t_ready, t_ready
        start, end = tcm.write(max(t_ready, self.store_free), nbytes)
        self.store_free = end
        self.busy_ns += end - start
        self.count += 1
        return start, end


class PeGemm(Server):
    """The matrix engine: one full tile per ``tile_ns``, however much of the tile is used."""

    PARAMS = block_params.PE_GEMM  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("tile_ns",)

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        a = node.attrs
        self.tile_ns = gemm_tile_ns(a["peak_tflops"], (a["tile_m"], a["tile_n"], a["tile_k"]))


class PeMath(Server):
    """The vector engine: ``lanes`` elements per PE clock cycle."""

    PARAMS = block_params.PE_MATH  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("lanes", "ns_per_step")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.lanes = node.attrs["lanes"]
        self.ns_per_step = 1.0 / node.attrs["clock_ghz"]

    def service_ns(self, elements: int) -> float:
        """Time to process ``elements``: ceil(elements / lanes) clock cycles, ns."""
        return math.ceil(elements / self.lanes) * self.ns_per_step


