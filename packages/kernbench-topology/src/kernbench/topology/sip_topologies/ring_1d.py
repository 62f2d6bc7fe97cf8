"""``ring_1d``: every SIP in one row, ``E``/``W`` wrapping around; the file's ``grid`` is not used."""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.topology.sip_topologies.base import Grid, SipTopology, register_sip_topology

#: the grid a file gets when it writes none (``SipsSpec.grid``'s default)
DEFAULT_GRID = (1, 2)


@dataclass(frozen=True)
class Ring1d(SipTopology):
    """One ring of all SIPs: ``(rows, cols) = (1, count)``."""

    def grid(self, count: int, grid: Grid) -> Grid:
        return 1, count

    def grid_problem(self, count: int, grid: Grid) -> str | None:
        # A grid left out (so the default) or written as the default is fine with any count: every exported
        # builtin carries it, so changing only `count` keeps working. Any other grid that does not hold `count`
        # SIPs is a mistake (`grid: [3, 5]` with 2 SIPs), not something to ignore silently.
        rows, cols = grid
        if rows * cols != count and tuple(grid) != DEFAULT_GRID:
            return f"{self.name} does not use the grid, so leave it out or make rows*cols equal the count"
        return None


RING_1D = register_sip_topology(Ring1d("ring_1d", "ring", 0, wrap_rows=True, wrap_cols=True))
