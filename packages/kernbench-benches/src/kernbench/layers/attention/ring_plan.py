"""Host-side plan of ring prefill: head-parallel query rows, KV blocks rotating round a ring of cubes.

Per user, the group's cubes form a ring (:func:`~kernbench.layers.attention.geometry.ring_order`):
along the row for a one-row group, a snake of single hops through a taller
rectangle. The keys are split over the cubes in cube order (cube ``c`` holds
*block* ``c``, token-major, on each of its ``pes`` PEs). The query rows, in
``(query head, position)`` order, are split over the cubes (so each cube
owns whole query heads when ``Hq`` divides) and then over the PEs of a cube;
PE ``p`` of every cube forms ring ``p``, so ``pes`` rings run side by side.

A PE at ring position ``r`` walks its *actions*: for each tile index ``t``
and ring step ``s = 0 .. n-1``, the tile ``t`` of the block that started at
ring position ``r - s`` (if that block has a tile ``t``). At step 0 it loads
the tile from its own shard, at later steps it receives it from ``W``; below
step ``n - 1`` it forwards the tile to ``E``. Each tile is thus sent ``n - 1``
times and every PE sees every key once. Its rows are kept as row blocks with
their own online-softmax states; when they do not fit the scratch budget the
ring runs again for the next pass of row blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.ccl.neighbours import Table, link
from kernbench.layers.attention.errors import AttentionConfigError
from kernbench.layers.attention.geometry import CubeGroup, cube_groups, ring_order
from kernbench.layers.attention.problem import ROW_BLOCK, Problem
from kernbench.runtime import DPPolicy, resolve_shards

#: Scratch (bytes) the row blocks of one pass may take: their Q rows, states and positions.
PASS_BUDGET = 256 * 1024


@dataclass(frozen=True)
class RingTile:
    """One action: ring step ``step`` on the keys ``[k0, k1)``; at step 0 they start at row ``row0`` of the PE's
    own K and V shards."""

    step: int
    k0: int
    k1: int
    row0: int


@dataclass(frozen=True)
class RowBlock:
    """Query rows ``q0:q1`` of the PE's Q (rowpos, output) shard, all of KV head ``head``; their key positions
    run from ``pmin`` to ``pmax``."""

    head: int
    q0: int
    q1: int
    pmin: int
    pmax: int


@dataclass(frozen=True)
class RingConfig:
    """Shared by every PE of a ring launch: keys per tile, softmax scale, head dimension, cubes in the ring,
    whether the mask is causal."""

    tile: int
    scale: float
    d: int
    n: int
    causal: bool
    variant: str = "opt2"


@dataclass(frozen=True)
class RingPe:
    """What one PE does: its actions (the same for every KV head) and, per KV head, its passes of row blocks."""

    actions: tuple[RingTile, ...]
    passes: tuple[tuple[tuple[RowBlock, ...], ...], ...]  # [head][pass] -> row blocks


@dataclass(frozen=True)
class RingUser:
    """One user's placement and per-PE work."""

    group: CubeGroup
    kv_policy: DPPolicy
    q_policy: DPPolicy
    pes: dict[tuple[int, int], RingPe] = field(repr=False)


@dataclass(frozen=True)
class RingPlan:
    """A ring-prefill call: shared config, per-user plans and the rings' neighbour table."""

    problem: Problem
    config: RingConfig
    users: tuple[RingUser, ...]
    table: Table = field(repr=False)


def plan_ring(spec, problem: Problem, *, pes: int, cubes: int, tile: int, causal: bool, what: str,
              sip: int = 0) -> RingPlan:
    """Plan ring prefill for every user, on SIP ``sip``."""
    p = problem
    if isinstance(cubes, int) and cubes > spec.cubes_per_sip:
        raise AttentionConfigError(f"{what}: a ring of {cubes} cubes is wider than the SIP, which has "
                                   f"{spec.cubes_per_sip} cubes; use at most {spec.cubes_per_sip} cubes per user")
    groups = cube_groups(spec, p.users, cubes, what=what)
    rows = p.hq * p.tq
    if rows < cubes * pes:
        raise AttentionConfigError(f"{what}: ring prefill splits the {rows} query rows (Hq*Tq) over {cubes} cube(s) "
                                   f"x {pes} PE(s); every PE needs at least one row: use fewer cubes or pes")
    if p.s < cubes:
        raise AttentionConfigError(f"{what}: ring prefill gives each of the {cubes} cubes a block of the S={p.s} "
                                   f"keys; use at most {p.s} cubes")
    config = RingConfig(tile, p.scale, p.d, cubes, causal)
    cap = max(ROW_BLOCK, PASS_BUDGET // (6 * p.d + 48) // ROW_BLOCK * ROW_BLOCK)
    table: Table = {}
    users = []
    for group in groups:
        first = group.cubes[0]
        kv_policy = DPPolicy(cube="row_wise", num_cubes=cubes, num_pes=pes, cube_start=first)
        q_policy = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=cubes, num_pes=pes, cube_start=first)
        blocks = {s.cube - first: s.rows for s in resolve_shards((p.s, p.hkv * p.d), 2, kv_policy, spec, 0)}
        order = [c - first for c in ring_order(spec, group)]
        if cubes > 1:
            for pe in range(pes):
                for i, c in enumerate(order):
                    link(table, (sip, first + c, pe), "E", (sip, first + order[(i + 1) % cubes], pe))
        pe_rows = {(s.cube - first, s.pe): s.rows for s in resolve_shards((rows, p.d), 2, q_policy, spec, 0)}
        passes = {key: _passes(p, r, cap) for key, r in pe_rows.items()}
        depth = [max(len(pp[h]) for pp in passes.values()) for h in range(p.hkv)]
        pe_plans = {}
        for key in pe_rows:
            actions = _actions(order, blocks, key[0], tile)
            padded = tuple(tuple(passes[key][h]) + ((),) * (depth[h] - len(passes[key][h])) for h in range(p.hkv))
            pe_plans[key] = RingPe(actions, padded)
        users.append(RingUser(group, kv_policy, q_policy, pe_plans))
    return RingPlan(p, config, tuple(users), table)


def _actions(order: list[int], blocks: dict[int, tuple[int, int]], cube: int, tile: int) -> tuple[RingTile, ...]:
    n = len(order)
    r = order.index(cube)
    own0 = blocks[cube][0]
    ntiles = {c: -(-(b[1] - b[0]) // tile) for c, b in blocks.items()}
    out = []
    for t in range(max(ntiles.values())):
        for s in range(n):
            c = order[(r - s) % n]
            if t < ntiles[c]:
                k0 = blocks[c][0] + t * tile
                k1 = min(k0 + tile, blocks[c][1])
                out.append(RingTile(s, k0, k1, k0 - own0 if s == 0 else 0))
    return tuple(out)


def _passes(p: Problem, rows: tuple[int, int], cap: int) -> list[list[RowBlock]]:
    """The PE's row blocks per KV head, grouped in passes of at most ``cap`` rows."""
    a, b = rows
    out = []
    for h in range(p.hkv):
        lo, hi = max(a, h * p.g * p.tq), min(b, (h + 1) * p.g * p.tq)
        blocks = []
        for q0 in range(lo, hi, ROW_BLOCK):
            q1 = min(q0 + ROW_BLOCK, hi)
            pos = [p.s - p.tq + r % p.tq for r in range(q0, q1)] if q1 - q0 < p.tq else [p.s - p.tq, p.s - 1]
            blocks.append(RowBlock(h, q0 - a, q1 - a, min(pos), max(pos)))
        per_pass = max(1, cap // ROW_BLOCK)
        out.append([blocks[i:i + per_pass] for i in range(0, len(blocks), per_pass)])
    return out
