"""Host-side plans of the reduce partitionings: every decode partition and short prefill.

A plan says, per user, where K, V, Q and the output live (``DPPolicy`` per
tensor), which keys each PE holds (:class:`Segment`), and the script each PE
follows (:class:`Step`): attend its keys for one block of query rows, merge
the partial ``(m, l, O)`` of its children in the reduce tree, and send to its
parent or, at the root, normalise and store. Every PE walks the same global
order of (KV head, row block), so the messages on each link arrive in the
order they are received.

Key placement uses two layouts of one user's K and V:

* *token-major* ``(S, Hkv*d)`` — a row is one key of every head, so a row
  split over cubes and PEs splits the sequence and every PE holds all heads;
* *head-major* ``(Hkv*S, d)`` — heads one after the other, so a row split
  hands whole heads to cubes and sequence pieces of a head to PEs (``short``).

K is stored transposed (``(Hkv*d, S)`` or ``(d, Hkv*S)``, split by columns the
same way) for the ``opt2`` loop, whose score composite multiplies ``Q`` by a
``[d, T]`` block of ``Kᵀ``. Splits follow ``DPPolicy`` (``numpy.array_split``
order), so any ``S`` works; segments are read back from the placement itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.ccl.neighbours import Table, link
from kernbench.layers.attention.errors import AttentionConfigError
from kernbench.layers.attention.geometry import (
    PE_GRID_WIDTH,
    CubeGroup,
    cube_groups,
    grid_tree,
    group_sizes,
    prefixed,
)
from kernbench.layers.attention.problem import ROW_BLOCK, Problem
from kernbench.runtime import DPPolicy, resolve_shards

#: The decode partitionings, in the order the report lists them.
PARTITIONS = ("single_pe", "cube_sp_pe_tp", "cube_repl_pe_tp", "cube_repl_pe_sp", "cube_sp_pe_sp", "short")
#: Variants of the local flash loop (see ``kernbench.layers.attention.local``).
VARIANTS = ("opt1", "opt2", "opt3")

PeKey = tuple[int, int]  # (cube index inside the user's group, PE index inside the cube)


@dataclass(frozen=True)
class Segment:
    """Keys ``[k0, k1)`` of KV head ``head`` that a PE holds; in its K and V shards the first of them is at row
    (or, for a transposed K, column) ``row0`` and the head's ``d`` features start at column (row) ``col0``."""

    head: int
    k0: int
    k1: int
    row0: int
    col0: int


@dataclass(frozen=True)
class Step:
    """One (KV head, row block) of a PE's script.

    ``q0:q1`` are the block's rows of Q (and of the rowpos and output
    tensors). ``seg`` is the PE's own keys for the block (trimmed to keys some
    row can see), None when it has none. With ``mask_pmin`` set, keys after
    that position are masked per row (causal); keys ``<= mask_pmin`` are seen
    by every row. ``recv`` lists the directions of the children whose merged
    partials arrive for this block, ``send`` the parent's direction, and
    ``store`` says this PE normalises and stores the block.
    """

    head: int
    q0: int
    q1: int
    seg: Segment | None
    mask_pmin: int | None
    recv: tuple[str, ...]
    send: str | None
    store: bool


@dataclass(frozen=True)
class TreeConfig:
    """What every PE of a reduce launch shares: loop variant, keys per tile, softmax scale, head dimension,
    whether K is stored transposed."""

    variant: str
    tile: int
    scale: float
    d: int
    k_transposed: bool


@dataclass(frozen=True)
class UserPlan:
    """One user's placement and scripts. Q and the output slots live on the first ``launch_pes`` PEs of the
    first ``launch_cubes`` cubes of the group (the launch's PEs)."""

    group: CubeGroup
    launch_cubes: int
    launch_pes: int
    kv_policy: DPPolicy
    steps: dict[PeKey, tuple[Step, ...]] = field(repr=False)
    stores: dict[tuple[int, int], PeKey] = field(repr=False)  # rows (q0, q1) -> the PE that stores them

    @property
    def q_policy(self) -> DPPolicy:
        """Q (and rowpos) replicated on every launched PE."""
        return DPPolicy(num_cubes=self.launch_cubes, num_pes=self.launch_pes, cube_start=self.group.cubes[0])

    @property
    def out_policy(self) -> DPPolicy:
        """The output: one slot of ``(Hq*Tq, d)`` rows per launched PE."""
        return DPPolicy(cube="row_wise", pe="row_wise", num_cubes=self.launch_cubes, num_pes=self.launch_pes,
                        cube_start=self.group.cubes[0])


@dataclass(frozen=True)
class TreePlan:
    """A whole reduce-partitioned call: shared config, per-user plans, the neighbour table the trees need, and
    how K and V are laid out (``token`` or ``head`` major)."""

    partition: str
    problem: Problem
    config: TreeConfig
    kv_layout: str
    users: tuple[UserPlan, ...]
    table: Table = field(repr=False)


def default_cubes(spec, partition: str, problem: Problem) -> int:
    """Cubes per user when the caller gives none: one for ``single_pe``; for ``short`` the most cubes (at most
    8) that split the KV heads evenly; otherwise up to 8 cubes, as many as the users leave room for."""
    room = spec.cubes_per_sip // problem.users
    sizes = [n for n in group_sizes(spec) if n <= min(8, max(room, 1))]
    if partition == "single_pe":
        return 1
    if partition == "short":
        sizes = [n for n in sizes if problem.hkv % n == 0]
    return max(sizes) if sizes else 1


def plan_tree(spec, partition: str, problem: Problem, *, pes: int, cubes: int, tile: int, variant: str,
              causal: bool, what: str, sip: int = 0) -> TreePlan:
    """Plan a reduce-partitioned call (every decode partition; ``short`` prefill) on SIP ``sip``."""
    if partition not in PARTITIONS:
        raise AttentionConfigError(f"{what}: unknown partition {partition!r}; use one of {', '.join(PARTITIONS)}")
    if variant not in VARIANTS:
        raise AttentionConfigError(f"{what}: unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    p = problem
    if partition == "single_pe" and cubes != 1:
        raise AttentionConfigError(f"{what}: single_pe runs each user on one PE of one cube; got cubes={cubes}")
    if partition == "short" and p.hkv % cubes:
        raise AttentionConfigError(f"{what}: short gives every cube whole KV heads, but Hkv={p.hkv} does not "
                                   f"split over cubes={cubes}; use a number of cubes that divides {p.hkv}")
    groups = cube_groups(spec, p.users, cubes, what=what)
    launch_cubes, launch_pes, cube_mode, pe_mode, kv_pes = {
        "single_pe": (1, 1, "replicate", "replicate", 1),
        "cube_sp_pe_tp": (cubes, 1, "row_wise", "replicate", pes),
        "cube_repl_pe_tp": (1, 1, "replicate", "replicate", pes),
        "cube_repl_pe_sp": (cubes, pes, "replicate", "row_wise", pes),
        "cube_sp_pe_sp": (cubes, pes, "row_wise", "row_wise", pes),
        "short": (cubes, pes, "row_wise", "row_wise", pes),
    }[partition]
    layout = "head" if partition == "short" else "token"
    k_transposed = variant == "opt2"
    config = TreeConfig(variant, tile, p.scale, p.d, k_transposed)
    v_shape = (p.s, p.hkv * p.d) if layout == "token" else (p.hkv * p.s, p.d)
    if v_shape[0] < launch_cubes * launch_pes and (cube_mode == "row_wise" or pe_mode == "row_wise"):
        raise AttentionConfigError(f"{what}: {partition} splits {v_shape[0]} key rows over {launch_cubes} cube(s) x "
                                   f"{launch_pes} PE(s); every PE needs at least one key: use fewer cubes or pes")
    users, table = [], {}
    for group in groups:
        kv_policy = DPPolicy(cube=cube_mode, pe=pe_mode, num_cubes=cubes, num_pes=kv_pes, cube_start=group.cubes[0])
        segments = _segments(spec, kv_policy, v_shape, layout, p, group, launch_cubes, launch_pes)
        trees = _trees(partition, p, group, segments, pes, table, sip)
        steps, stores = _scripts(p, segments, trees, causal)
        users.append(UserPlan(group, launch_cubes, launch_pes, kv_policy, steps, stores))
    return TreePlan(partition, p, config, layout, tuple(users), table)


def _segments(spec, policy: DPPolicy, v_shape, layout: str, p: Problem, group: CubeGroup, launch_cubes: int,
              launch_pes: int) -> dict[PeKey, list[Segment]]:
    """The keys each launched PE holds, read from where ``policy`` puts the rows of V."""
    out: dict[PeKey, list[Segment]] = {}
    first = group.cubes[0]
    for shard in resolve_shards(v_shape, 2, policy, spec, 0):
        key = (shard.cube - first, shard.pe)
        if key[0] >= launch_cubes or key[1] >= launch_pes:
            continue  # a replica on a PE that does not compute (cube_repl_pe_tp)
        a, b = shard.rows
        if layout == "token":
            out[key] = [Segment(h, a, b, 0, h * p.d) for h in range(p.hkv)]
        else:
            segs = []
            for h in range(a // p.s, (b - 1) // p.s + 1):
                lo, hi = max(a, h * p.s), min(b, (h + 1) * p.s)
                segs.append(Segment(h, lo - h * p.s, hi - h * p.s, lo - a, 0))
            out[key] = segs
    return out


# A reduce tree over PEs: PE -> (parent PE, direction to it, ((direction, child PE), ...)).
Tree = dict[PeKey, tuple[PeKey | None, str | None, tuple[tuple[str, PeKey], ...]]]


def _grid(n: int, width: int, key_of, prefix: str) -> tuple[Tree, PeKey]:
    nodes, root = grid_tree(n, width)
    w = min(width, n)
    step = {"E": 1, "W": -1, "N": -w, "S": w}
    tree: Tree = {}
    for i, node in enumerate(nodes):
        node = prefixed(node, prefix)
        parent = None if node.parent is None else key_of(i + step[node.parent.removeprefix(prefix)])
        kids = tuple((d, key_of(i + step[d.removeprefix(prefix)])) for d in node.children)
        tree[key_of(i)] = (parent, node.parent, kids)
    return tree, key_of(root)


def _join(lower: dict[PeKey, Tree], roots: dict[int, PeKey], upper: Tree) -> Tree:
    """Two levels: each cube's PE tree, whose root also takes the cube-level children and parent."""
    out: Tree = {}
    for tree in lower.values():
        out.update(tree)
    for key, (parent, pdir, kids) in upper.items():
        _, _, low_kids = out[key]
        out[key] = (parent, pdir, low_kids + kids)
    return out


def _trees(partition: str, p: Problem, group: CubeGroup, segments, pes: int, table: Table, sip: int
           ) -> dict[int, Tree]:
    """The reduce tree of every KV head (the same tree for every head except in ``short``), and their links."""
    cubes = len(group.cubes)
    if partition in ("single_pe", "cube_repl_pe_tp"):
        tree: Tree = {(0, 0): (None, None, ())}
        return dict.fromkeys(range(p.hkv), tree)
    if partition == "short":
        trees = {}
        for h in range(p.hkv):
            holders = sorted(k for k, segs in segments.items() if any(s.head == h for s in segs))
            tree = {}
            for i, key in enumerate(holders):  # a chain towards the PE holding the head's first keys
                parent = holders[i - 1] if i else None
                kids = ((("intra_E", holders[i + 1]),) if i + 1 < len(holders) else ())
                tree[key] = (parent, "intra_W" if parent else None, kids)
                if parent:
                    link(table, (sip, group.cubes[key[0]], key[1]), "intra_W", (sip, group.cubes[parent[0]], parent[1]))
            trees[h] = tree
        return trees
    lower: dict[int, Tree] = {}
    roots: dict[int, PeKey] = {}
    n_pes = 1 if partition == "cube_sp_pe_tp" else pes
    for c in range(cubes):
        lower[c], roots[c] = _grid(n_pes, PE_GRID_WIDTH, lambda i, c=c: (c, i), "intra_")
    if partition == "cube_repl_pe_sp":
        tree = {}
        for c in range(cubes):
            tree.update(lower[c])
    else:
        upper, _ = _grid(cubes, group.w, lambda i: roots[i], "")
        tree = _join(lower, roots, upper)
    for key, (parent, pdir, _) in tree.items():
        if parent is not None:
            link(table, (sip, group.cubes[key[0]], key[1]), pdir, (sip, group.cubes[parent[0]], parent[1]))
    return dict.fromkeys(range(p.hkv), tree)


def _row_blocks(p: Problem, h: int) -> list[tuple[int, int, int, int]]:
    """Row blocks ``(q0, q1, pmin, pmax)`` of KV head ``h``: its query heads' rows (in ``(query head, position)``
    order) in pieces of at most :data:`ROW_BLOCK`, with the first and last key position any of their rows sees."""
    run0, run1 = h * p.g * p.tq, (h + 1) * p.g * p.tq
    out = []
    for q0 in range(run0, run1, ROW_BLOCK):
        q1 = min(q0 + ROW_BLOCK, run1)
        if q1 - q0 >= p.tq:
            pmin, pmax = p.s - p.tq, p.s - 1
        else:  # a block shorter than Tq may still wrap from one query head into the next
            pos = [p.s - p.tq + r % p.tq for r in range(q0, q1)]
            pmin, pmax = min(pos), max(pos)
        out.append((q0, q1, pmin, pmax))
    return out


def _scripts(p: Problem, segments, trees: dict[int, Tree], causal: bool
             ) -> tuple[dict[PeKey, tuple[Step, ...]], dict[tuple[int, int], PeKey]]:
    steps: dict[PeKey, list[Step]] = {k: [] for k in segments}
    stores: dict[tuple[int, int], PeKey] = {}
    for h in range(p.hkv):
        tree = trees[h]
        store_at = _store_pe(tree)
        for q0, q1, pmin, pmax in _row_blocks(p, h):
            own: dict[PeKey, Segment | None] = {}
            for key in tree:
                seg = next((s for s in segments[key] if s.head == h), None)
                if seg is not None and causal:
                    k1 = min(seg.k1, pmax + 1)
                    seg = Segment(h, seg.k0, k1, seg.row0, seg.col0) if k1 > seg.k0 else None
                own[key] = seg
            busy = _subtree_busy(tree, own)
            for key, (_, pdir, kids) in tree.items():
                if not busy[key]:
                    continue
                seg = own[key]
                mask = pmin if causal and seg is not None and seg.k1 - 1 > pmin else None
                recv = tuple(d for d, kid in kids if busy[kid])
                steps[key].append(Step(h, q0, q1, seg, mask, recv, pdir, key == store_at))
            stores[(q0, q1)] = store_at
    return {k: tuple(v) for k, v in steps.items()}, stores


def _store_pe(tree: Tree) -> PeKey:
    """The root that stores: the root of the tree, or of cube 0's tree when every cube has its own."""
    return min(k for k, (parent, _, _) in tree.items() if parent is None)


def _subtree_busy(tree: Tree, own: dict[PeKey, Segment | None]) -> dict[PeKey, bool]:
    """Whether any PE in each PE's subtree has keys to attend."""
    busy: dict[PeKey, bool] = {}

    def visit(key: PeKey) -> bool:
        if key not in busy:
            kids = [visit(kid) for _, kid in tree[key][2]]
            busy[key] = own[key] is not None or any(kids)
        return busy[key]

    for key in tree:
        visit(key)
    return busy
