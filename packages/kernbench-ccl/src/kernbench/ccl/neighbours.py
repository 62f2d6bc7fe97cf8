"""Neighbour tables: which peer PE each direction of a PE reaches (direction addressing).

A table maps a PE ``(sip, cube, pe)`` to its directions and their peers.
Links are always symmetric: if ``a`` reaches ``b`` through ``E``, ``b``
reaches ``a`` through ``W`` (``N``/``S``, ``intra_*`` and ``global_*``
likewise), because a message sent towards ``d`` lands in the peer's receive
ring for the opposite direction. The builders here return plain tables; the
installer (``kernbench.ccl.install``) gives them receive rings.

Geometry: a SIP's cubes form a ``w x h`` mesh, cube ``c`` at column
``c % w`` and row ``c // w``; ``E`` is the next column, ``S`` the next row.
A cube's PEs form a grid of rows of :func:`pe_grid_cols` PEs (``2 x 4`` by
default: PE ``p`` at row ``p // 4``, column ``p % 4``) for the ``intra_*``
directions. SIP ranks follow the SIP topology strategy
(:mod:`kernbench.topology.sip_topologies`): its grid ``(rows, cols)``, rank
``r`` at row ``r // cols``, column ``r % cols``, and its neighbours.
"""

from __future__ import annotations

from kernbench.components.pe.ipcq import OPPOSITE
from kernbench.topology.errors import KernbenchError
from kernbench.topology.sip_topologies import SipTopology, SipTopologyError, get_sip_topology

Pe = tuple[int, int, int]
Table = dict[Pe, dict[str, Pe]]


class NeighbourError(KernbenchError):
    """A neighbour table could not be built or does not fit the topology."""


def link(table: Table, a: Pe, direction: str, b: Pe) -> None:
    """Add ``a --direction--> b`` and its reverse; a conflicting existing link is an error."""
    pairs = ((a, direction, b), (b, OPPOSITE[direction], a))
    for src, d, dst in pairs:  # check both ends before writing either, so a rejected link changes nothing
        have = table.get(src, {}).get(d)
        if have is not None and have != dst:
            raise NeighbourError(f"PE {src} already reaches {have} through {d!r}; cannot also link it to {dst}")
    for src, d, dst in pairs:
        table.setdefault(src, {})[d] = dst


def merge(*tables: Table) -> Table:
    """One table holding every link of ``tables`` (conflicts are errors)."""
    out: Table = {}
    for t in tables:
        for a, dirs in t.items():
            for d, b in dirs.items():
                link(out, a, d, b)
    return out


def intercube_mesh(spec, sip: int, pe: int = 0) -> Table:
    """``N S E W`` links between PE ``pe`` of neighbouring cubes of one SIP's mesh (no wrap-around)."""
    w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    table: Table = {}
    for cube in range(w * h):
        y, x = divmod(cube, w)
        if x + 1 < w:
            link(table, (sip, cube, pe), "E", (sip, cube + 1, pe))
        if y + 1 < h:
            link(table, (sip, cube, pe), "S", (sip, cube + w, pe))
    return table


def sip_strategy(sip_topology: str | SipTopology) -> SipTopology:
    """The strategy of a SIP topology (a registered name, or a strategy passed as is)."""
    if isinstance(sip_topology, SipTopology):
        return sip_topology
    try:
        return get_sip_topology(sip_topology)
    except SipTopologyError as exc:
        raise NeighbourError(f"unsupported SIP topology: {exc}") from None


def sip_grid(spec, world_size: int, sip_topology: str | SipTopology) -> tuple[int, int]:
    """(rows, cols) of the ranks for a SIP topology; checks the world size fits it."""
    topo = sip_strategy(sip_topology)
    rows, cols = topo.grid(world_size, spec.system.sips.grid)
    if rows * cols != world_size:
        raise NeighbourError(f"{topo.name} needs a world size of {rows}x{cols} = {rows * cols} SIPs "
                             f"(system.sips.grid), got {world_size}")
    return rows, cols


def inter_sip(spec, world_size: int, sip_topology: str | SipTopology, cube: int, pe: int = 0) -> Table:
    """``global_*`` links between PE ``pe`` of cube ``cube`` on each rank's SIP, following the SIP topology:
    ``global_E/W`` along a row of its grid and ``global_N/S`` along a column, where the strategy's
    :meth:`~kernbench.topology.sip_topologies.SipTopology.neighbour` says (with or without wrap-around; a ring
    is one row)."""
    topo = sip_strategy(sip_topology)
    rows, cols = sip_grid(spec, world_size, topo)
    table: Table = {}
    for r in range(world_size):
        for direction in ("E", "S"):
            peer = topo.neighbour(r, direction, rows, cols)
            if peer is not None:
                link(table, (r, cube, pe), f"global_{direction}", (peer, cube, pe))
    return table


def intercube_multisip(spec, world_size: int, sip_topology: str | SipTopology, pe: int = 0) -> Table:
    """The all-reduce layout: mesh links between PE ``pe`` of every cube of each rank's SIP, and ``global_*``
    links between the same cube of neighbouring ranks (so whichever cube roots the exchange has them)."""
    sips = spec.system.sips.count
    if not 1 <= world_size <= sips:
        raise NeighbourError(f"world size {world_size} needs 1..{sips} SIPs (the topology has {sips})")
    parts = [intercube_mesh(spec, s, pe) for s in range(world_size)]
    if world_size > 1:
        parts += [inter_sip(spec, world_size, sip_topology, c, pe) for c in range(spec.cubes_per_sip)]
    else:
        sip_grid(spec, world_size, sip_topology)  # still reject an unknown SIP topology
    return merge(*parts)


def cube_ring(spec, sip: int, cubes: list[int] | int, pe: int = 0) -> Table:
    """A ring through ``cubes`` of one SIP in the given order: ``E`` is the next cube, ``W`` the previous.

    An integer ``n`` asks for a ring of ``n`` cubes whose every step is one
    mesh hop: the snake cycle through the smallest rectangle of the mesh's
    top rows (or left columns) holding exactly ``n`` cubes.
    """
    n = spec.cubes_per_sip
    if isinstance(cubes, int) and not isinstance(cubes, bool):
        cubes = _ring_of_size(spec, cubes)
    if len(cubes) < 2 or len(set(cubes)) != len(cubes) or not all(0 <= c < n for c in cubes):
        raise NeighbourError(f"a cube ring needs at least 2 distinct cubes of 0..{n - 1}, got {cubes}")
    table: Table = {}
    for i, c in enumerate(cubes):
        link(table, (sip, c, pe), "E", (sip, cubes[(i + 1) % len(cubes)], pe))
    return table


def snake_order(x0: int, y0: int, w: int, h: int, mesh_w: int) -> list[int]:
    """A Hamiltonian cycle through the ``w x h`` cube rectangle at column ``x0``, row ``y0`` (cube indices).

    Along the top row, then boustrophedon over the remaining rows leaving
    column ``x0`` free, then back up column ``x0``; every step is one mesh
    hop, including the closing one. Needs an even number of rows (or of
    columns, in which case the rectangle is walked transposed).
    """
    if w * h < 2:
        raise NeighbourError("a snake needs at least 2 cubes")
    if w == 1 or h == 1:
        if w * h != 2:
            raise NeighbourError(f"a {w}x{h} line has no Hamiltonian cycle (only 2 cubes can form one)")
        return [y0 * mesh_w + x0, (y0 + h - 1) * mesh_w + x0 + w - 1]
    if h % 2 == 0:
        cells = snake_cells(w, h)
    elif w % 2 == 0:
        cells = [(x, y) for y, x in snake_cells(h, w)]
    else:
        raise NeighbourError(f"a {w}x{h} rectangle has an odd number of cubes: no Hamiltonian cycle exists")
    return [(y0 + y) * mesh_w + x0 + x for x, y in cells]


def snake_cells(w: int, h: int) -> list[tuple[int, int]]:
    """The snake cycle's (x, y) cells for a ``w x h`` grid (``w >= 2``, ``h`` even)."""
    cells = [(x, 0) for x in range(w)]
    for y in range(1, h):
        xs = range(w - 1, 0, -1) if y % 2 else range(1, w)
        cells += [(x, y) for x in xs]
    cells += [(0, y) for y in range(h - 1, 0, -1)]
    return cells


def snake(spec, sip: int, x0: int, y0: int, w: int, h: int, pe: int = 0) -> Table:
    """A ring (``E`` next, ``W`` previous) along a Hamiltonian cycle through a rectangular cube sub-mesh."""
    mw, mh = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    if not (x0 >= 0 and y0 >= 0 and w >= 1 and h >= 1 and x0 + w <= mw and y0 + h <= mh):
        raise NeighbourError(f"rectangle {w}x{h} at ({x0}, {y0}) does not fit the {mw}x{mh} cube mesh")
    return cube_ring(spec, sip, snake_order(x0, y0, w, h, mw), pe)


def pe_grid_cols(spec) -> int:
    """PEs in one row of a cube's PE grid: each corner holds ``pe_per_corner`` PEs in a row, and a die row
    holds the corners of one side (north or south), so ``pe_per_corner`` times the corners on the fuller side
    (4 for the default four corners of 2 PEs)."""
    layout = spec.cube.pe_layout
    per_side = max(sum(1 for c in layout.corners if c[0] == side) for side in ("N", "S"))
    return layout.pe_per_corner * per_side


def intra_cube(spec, sip: int, cube: int) -> Table:
    """``intra_N/S/E/W`` links between the PEs of one cube laid out as a grid of :func:`pe_grid_cols` columns
    (2 x 4 by default; no wrap-around)."""
    n = spec.pes_per_cube
    cols = pe_grid_cols(spec)
    table: Table = {}
    for p in range(n):
        x = p % cols
        if x + 1 < cols and p + 1 < n:
            link(table, (sip, cube, p), "intra_E", (sip, cube, p + 1))
        if p + cols < n:
            link(table, (sip, cube, p), "intra_S", (sip, cube, p + cols))
    return table


def _ring_of_size(spec, size: int) -> list[int]:
    """Cube order of a one-hop-per-step ring of ``size`` cubes anchored at cube 0."""
    mw, mh = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    for h in range(1, mh + 1):  # full-width rows first, then full-height columns
        if h * mw == size or (size % h == 0 and size // h <= mw and h > 1):
            w = size // h
            try:
                return snake_order(0, 0, w, h, mw)
            except NeighbourError:
                continue
    raise NeighbourError(f"no rectangle of the {mw}x{mh} cube mesh holds a ring of {size} cubes; give the cube list")
