"""Where users and reductions sit on the hardware: cube groups, centre-rooted reduce trees, chains and rings.

Users are placed on disjoint *cube groups* of one SIP: user ``u`` gets the
``n`` cubes ``u*n .. u*n + n - 1`` (cube ``c`` of a ``w x h`` mesh sits at
column ``c % w``, row ``c // w``), which is a rectangle of the mesh when ``n``
divides the mesh width or is a whole number of rows. Other group sizes would
wrap round a row edge and are refused.

Reductions run over *trees* whose edges are neighbour links. Nodes laid out
row-major on a grid (a cube group's rectangle, or the first ``pes`` PEs of a
cube on its 2 x 4 grid) reduce to the centre, as the all-reduce of
``kernbench.ccl`` does: each row first folds towards the root column
``(width - 1) // 2`` from both sides, then the root column folds towards the
root row ``(rows - 1) // 2``. A centre root keeps the longest path to about
half the width plus half the height, against the full width plus height for
a corner root, and both halves of a row work at the same time.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.ccl.neighbours import NeighbourError, snake_order
from kernbench.layers.attention.errors import AttentionConfigError

#: PEs of a cube form a grid this many columns wide for the ``intra_*`` directions (ADR 0016).
PE_GRID_WIDTH = 4

_STEP = {"E": (1, 0), "W": (-1, 0), "N": (0, -1), "S": (0, 1)}
_RECEIVE_ORDER = ("W", "E", "N", "S")  # a node folds its row neighbours in before its column neighbours


@dataclass(frozen=True)
class CubeGroup:
    """The cubes one user's attention runs on: SIP cube indices in row-major order of a ``w x h`` rectangle
    whose top-left cube is at mesh column ``x0``, row ``y0``."""

    user: int
    cubes: tuple[int, ...]
    x0: int
    y0: int
    w: int
    h: int


@dataclass(frozen=True)
class TreeNode:
    """One node of a reduce tree: the direction of its parent (None at the root) and of its children, in the
    order the node receives them."""

    parent: str | None
    children: tuple[str, ...]


def group_sizes(spec) -> tuple[int, ...]:
    """Cube-group sizes that tile the SIP's cube mesh into rectangles, smallest first."""
    w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    return tuple(n for n in range(1, w * h + 1) if (n <= w and w % n == 0) or (n % w == 0 and n // w <= h))


def cube_groups(spec, users: int, cubes: int, *, what: str) -> list[CubeGroup]:
    """The cube groups of ``users`` users with ``cubes`` cubes each; ``what`` names the call in errors."""
    w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    total = w * h
    if isinstance(cubes, bool) or not isinstance(cubes, int) or cubes < 1:
        raise AttentionConfigError(f"{what}: cubes={cubes!r} must be a positive integer (cubes per user)")
    if cubes > total:
        raise AttentionConfigError(f"{what}: cubes={cubes} per user is wider than the SIP, which has {total} "
                                   f"cubes ({w}x{h}); use at most {total}")
    sizes = group_sizes(spec)
    if cubes not in sizes:
        raise AttentionConfigError(f"{what}: cubes={cubes} per user does not tile the {w}x{h} cube mesh into "
                                   f"rectangles; use one of {', '.join(map(str, sizes))}")
    n_groups = total // cubes
    if users > n_groups:
        raise AttentionConfigError(f"{what}: {users} users do not fit: users are placed on disjoint groups of "
                                   f"{cubes} cube(s) and a SIP of {total} cubes holds {n_groups} such group(s); "
                                   f"pass fewer users or fewer cubes per user")
    gw, gh = (cubes, 1) if cubes <= w else (w, cubes // w)
    out = []
    for u in range(users):
        first = u * cubes
        out.append(CubeGroup(u, tuple(range(first, first + cubes)), first % w, first // w, gw, gh))
    return out


def grid_tree(n: int, width: int) -> tuple[list[TreeNode], int]:
    """A centre-rooted reduce tree over nodes ``0..n-1`` laid out row-major, ``width`` per row (the last row may
    be shorter). Returns the nodes (directions ``N S E W``) and the root's index."""
    width = min(width, n)
    rows = -(-n // width)
    rx, ry = (width - 1) // 2, (rows - 1) // 2

    def row_root(y: int) -> int:
        return min(rx, min(width, n - y * width) - 1)

    parents: list[str | None] = []
    for i in range(n):
        x, y = i % width, i // width
        r = row_root(y)
        parents.append("E" if x < r else "W" if x > r else "S" if y < ry else "N" if y > ry else None)
    children: list[list[str]] = [[] for _ in range(n)]
    for i, d in enumerate(parents):
        if d is not None:
            children[_neighbour(i, d, width)].append(_OPPOSITE[d])
    nodes = [TreeNode(parents[i], tuple(sorted(children[i], key=_RECEIVE_ORDER.index))) for i in range(n)]
    return nodes, ry * width + rx


_OPPOSITE = {"E": "W", "W": "E", "N": "S", "S": "N"}


def _neighbour(i: int, d: str, width: int) -> int:
    dx, dy = _STEP[d]
    return i + dx + dy * width


def prefixed(node: TreeNode, prefix: str) -> TreeNode:
    """The same node with its directions renamed for a level (``intra_`` between PEs of a cube)."""
    return TreeNode(None if node.parent is None else prefix + node.parent, tuple(prefix + c for c in node.children))


def ring_order(spec, group: CubeGroup) -> list[int]:
    """The cube order of a ring through a group: along the row for a one-row group (the closing link spans the
    row), else a snake of single mesh hops through the rectangle (row order when no snake exists)."""
    if group.h == 1 or group.w == 1:
        return list(group.cubes)
    try:
        return snake_order(group.x0, group.y0, group.w, group.h, spec.sip.cube_mesh.w)
    except NeighbourError:
        return list(group.cubes)
