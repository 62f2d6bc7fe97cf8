"""The strategy of one SIP topology family, and the registry the rest of KernBench asks.

A family (``system.sips.topology`` in a topology file) decides four things:
how its SIPs form a grid of ``rows x cols`` (and whether the written
``system.sips.grid`` is acceptable), where SIP ``i`` sits in that grid, which
SIP is ``E``/``W``/``N``/``S`` of SIP ``i`` (with or without wrap-around),
and the lines a collective exchanges along. Nothing outside this package
compares family names; it calls :func:`get_sip_topology` and asks the strategy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kernbench.topology.errors import KernbenchError

Grid = tuple[int, int]
DIRECTIONS = ("E", "W", "N", "S")


class SipTopologyError(KernbenchError, ValueError):
    """An unknown SIP topology name, or a strategy that cannot be registered."""


@dataclass(frozen=True)
class SipTopology:
    """A 2-D grid of SIPs, row-major (SIP ``i`` at row ``i // cols``, column ``i % cols``).

    ``name`` is what a topology file writes, ``label`` a short word for
    figures and reports, ``kind`` a stable integer for kernels that want a
    scalar, ``wrap_rows`` whether ``E``/``W`` along a row wrap around and
    ``wrap_cols`` whether ``N``/``S`` along a column do. Subclasses override
    :meth:`grid` and :meth:`grid_problem` when they lay SIPs out otherwise.
    """

    name: str
    label: str
    kind: int
    wrap_rows: bool
    wrap_cols: bool

    def grid(self, count: int, grid: Grid) -> Grid:
        """``(rows, cols)`` of ``count`` SIPs given the file's ``system.sips.grid`` (default: that grid)."""
        return int(grid[0]), int(grid[1])

    def grid_problem(self, count: int, grid: Grid) -> str | None:
        """What to fix when the file's ``system.sips.grid`` does not fit ``count`` SIPs, or ``None`` when it
        does. The loader prefixes the file, the field and the counts."""
        rows, cols = grid
        return None if rows * cols == count else "make rows*cols equal the count"

    def layout(self, index: int, count: int, grid: Grid) -> Grid:
        """``(row, col)`` where SIP ``index`` of ``count`` is placed (drawn, and ranked)."""
        _, cols = self.grid(count, grid)
        return divmod(index, cols)

    def neighbour(self, index: int, direction: str, rows: int, cols: int) -> int | None:
        """The SIP ``direction`` (``E``/``W``/``N``/``S``) of SIP ``index`` in a ``rows x cols`` grid, or ``None``
        at an edge without wrap-around or along a line of one SIP."""
        if direction not in DIRECTIONS:
            raise SipTopologyError(f"{self.name}: direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
        y, x = divmod(index, cols)
        if direction in ("E", "W"):
            n, pos, wrap = cols, x, self.wrap_rows
        else:
            n, pos, wrap = rows, y, self.wrap_cols
        step = 1 if direction in ("E", "S") else -1
        if n < 2 or (not wrap and not 0 <= pos + step < n):
            return None
        pos = (pos + step) % n
        return y * cols + pos if direction in ("E", "W") else pos * cols + x

    def exchange_lines(self, rows: int, cols: int) -> tuple[tuple[int, bool], ...]:
        """The lines a grid collective exchanges along, in order: ``(length, wraps)`` of a row, then of a
        column (a line of one SIP has nothing to exchange)."""
        return (cols, self.wrap_rows), (rows, self.wrap_cols)


_REGISTRY: dict[str, SipTopology] = {}
_LOCK = threading.Lock()


def register_sip_topology(topology: SipTopology, *, replace: bool = False) -> SipTopology:
    """Make ``topology`` available under its name (to topology files, the compiler and collectives); returns
    it. Registering another strategy under a taken name needs ``replace=True``."""
    if not isinstance(topology, SipTopology):
        raise SipTopologyError(f"register_sip_topology: expected a SipTopology, got {type(topology).__name__}")
    if not isinstance(topology.name, str) or not topology.name.isidentifier():
        raise SipTopologyError(f"register_sip_topology: the name {topology.name!r} is not an identifier")
    with _LOCK:
        have = _REGISTRY.get(topology.name)
        if have is not None and have != topology and not replace:
            raise SipTopologyError(f"register_sip_topology: {topology.name!r} is already registered as {have!r}; "
                                   f"pass replace=True to replace it")
        clash = [t.name for t in _REGISTRY.values() if t.kind == topology.kind and t.name != topology.name]
        if clash:
            raise SipTopologyError(f"register_sip_topology: kind {topology.kind} of {topology.name!r} is taken by "
                                   f"{clash[0]!r}; give each family its own kind")
        _REGISTRY[topology.name] = topology
    return topology


def unregister_sip_topology(name: str) -> None:
    """Forget the family ``name`` (for tests and scripts that registered one for a while)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def sip_topology_names() -> tuple[str, ...]:
    """The registered family names, by ``kind`` (the shipped ones first, in the order of their kinds)."""
    with _LOCK:
        return tuple(t.name for t in sorted(_REGISTRY.values(), key=lambda t: (t.kind, t.name)))


def get_sip_topology(name: str) -> SipTopology:
    """The strategy registered as ``name``; :class:`SipTopologyError` listing the registered names otherwise."""
    with _LOCK:
        found = _REGISTRY.get(name) if isinstance(name, str) else None
    if found is None:
        raise SipTopologyError(f"unknown SIP topology {name!r}; registered: {', '.join(sip_topology_names())} "
                               f"(register another with kernbench.topology.sip_topologies.register_sip_topology)")
    return found


class RegisteredNames:
    """A live, read-only view of :func:`sip_topology_names` (a field's ``choices`` that follow the registry)."""

    def __iter__(self):
        return iter(sip_topology_names())

    def __contains__(self, name: object) -> bool:
        return name in sip_topology_names()

    def __len__(self) -> int:
        return len(sip_topology_names())

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return repr(sip_topology_names())
