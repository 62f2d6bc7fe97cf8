"""Neighbour tables and their installation.

Expected neighbours are written out by hand or recomputed here from the
geometry (cube ``c`` of a 4x4 mesh at column ``c % 4``, row ``c // 4``; PE
``p`` of a cube at row ``p // 4``, column ``p % 4``; SIP rank ``r`` of a
``rows x cols`` grid at row ``r // cols``, column ``r % cols``), never taken
from the builders themselves.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kernbench.ccl import NeighbourError, install
from kernbench.ccl.neighbours import (
    cube_ring,
    inter_sip,
    intercube_mesh,
    intercube_multisip,
    intra_cube,
    link,
    merge,
    snake,
)
from kernbench.components.pe.ipcq import OPPOSITE
from kernbench.runtime import RuntimeContext
from kernbench.topology.address import decode
from kernbench.topology.builtins import topologies_folder

MIB = 1 << 20
SIX = ("6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap")


def ipcq(ctx, pe):
    return ctx.engine.components[f"sip{pe[0]}.cube{pe[1]}.pe{pe[2]}.pe_ipcq"]


def all_ipcqs(ctx) -> dict:
    return {name: c for name, c in ctx.engine.components.items() if name.endswith(".pe_ipcq")}


def globals_of(table, pe) -> dict:
    return {d: p for d, p in table[pe].items() if d.startswith("global_")}


def undirected(table) -> set:
    return {frozenset((a, b)) for a, dirs in table.items() for b in dirs.values()}


# ---------------------------------------------------------------------------------------------- symmetry
def test_opposite_flips_the_compass_point_and_keeps_the_level():
    assert OPPOSITE["E"] == "W" and OPPOSITE["N"] == "S"
    assert OPPOSITE["intra_S"] == "intra_N" and OPPOSITE["intra_W"] == "intra_E"
    assert OPPOSITE["global_E"] == "global_W" and OPPOSITE["global_N"] == "global_S"
    assert all(OPPOSITE[OPPOSITE[d]] == d for d in OPPOSITE)


def _every_table(load_graph):
    """(label, table) for every builder on every topology it applies to."""
    d = load_graph("topology").spec
    out = [
        ("mesh sip0", intercube_mesh(d, 0)),
        ("mesh sip1 pe3", intercube_mesh(d, 1, pe=3)),
        ("multisip 2 ring", intercube_multisip(d, 2, "ring_1d")),
        ("multisip 1 ring", intercube_multisip(d, 1, "ring_1d")),
        ("inter_sip 2 ring", inter_sip(d, 2, "ring_1d", cube=5)),
        ("cube_ring", cube_ring(d, 0, [0, 5, 10, 15, 3])),
        ("cube_ring 2", cube_ring(d, 1, [7, 2], pe=4)),
        ("intra_cube", intra_cube(d, 1, 9)),
        ("merged", merge(intercube_multisip(d, 2, "ring_1d"), intra_cube(d, 0, 0), intra_cube(d, 1, 15))),
    ]
    for x0, y0, w, h in ((0, 0, 2, 2), (0, 0, 4, 4), (1, 1, 3, 2), (2, 0, 2, 3), (3, 2, 1, 2), (0, 3, 2, 1)):
        out.append((f"snake {w}x{h}@({x0},{y0})", snake(d, 0, x0, y0, w, h)))
    for name in SIX:
        spec = load_graph(name).spec
        topo = spec.system.sips.topology
        out.append((f"{name} inter_sip", inter_sip(spec, 6, topo, cube=7, pe=2)))
        out.append((f"{name} multisip", intercube_multisip(spec, 6, topo)))
        if topo == "ring_1d":
            out.append((f"{name} multisip 3", intercube_multisip(spec, 3, topo)))
    return out


def test_every_table_of_every_builder_is_symmetric(load_graph):
    tables = _every_table(load_graph)
    assert len(tables) == 22
    for label, table in tables:
        assert table, label
        for a, dirs in table.items():
            for d, b in dirs.items():
                assert b != a, (label, a, d)
                assert table[b][OPPOSITE[d]] == a, (label, a, d, b)


# ---------------------------------------------------------------------------------------------- intercube mesh
def test_intercube_mesh_links_exactly_the_neighbouring_cubes_of_a_4x4_mesh(default_graph):
    table = intercube_mesh(default_graph.spec, 0)
    expected = {frozenset(((0, c, 0), (0, c + 1, 0))) for c in range(16) if c % 4 < 3}
    expected |= {frozenset(((0, c, 0), (0, c + 4, 0))) for c in range(12)}
    assert len(expected) == 2 * (3 * 4) == 24
    assert undirected(table) == expected
    assert sum(len(dirs) for dirs in table.values()) == 48
    assert set(table) == {(0, c, 0) for c in range(16)}


def test_intercube_mesh_corner_and_inner_cube(default_graph):
    table = intercube_mesh(default_graph.spec, 0)
    assert table[(0, 0, 0)] == {"E": (0, 1, 0), "S": (0, 4, 0)}
    # cube 5: column 1, row 1
    assert table[(0, 5, 0)] == {"N": (0, 1, 0), "S": (0, 9, 0), "E": (0, 6, 0), "W": (0, 4, 0)}
    # opposite corner (cube 15: column 3, row 3) and an east-edge cube (cube 7: column 3, row 1)
    assert table[(0, 15, 0)] == {"N": (0, 11, 0), "W": (0, 14, 0)}
    assert table[(0, 7, 0)] == {"N": (0, 3, 0), "S": (0, 11, 0), "W": (0, 6, 0)}


def test_intercube_mesh_uses_the_given_sip_and_pe(default_graph):
    table = intercube_mesh(default_graph.spec, 1, pe=6)
    assert {(s, p) for s, _, p in table} == {(1, 6)}
    assert table[(1, 5, 6)]["E"] == (1, 6, 6)


# ---------------------------------------------------------------------------------------------- inter-SIP
def _expected_2d(rank: int, rows: int, cols: int, wrap: bool) -> dict:
    y, x = rank // cols, rank % cols
    out = {}
    for d, (dy, dx) in {"global_E": (0, 1), "global_W": (0, -1), "global_S": (1, 0), "global_N": (-1, 0)}.items():
        if (rows if dy else cols) == 1:
            continue  # a 1-long axis has no links along it
        ny, nx = y + dy, x + dx
        if not wrap and not (0 <= ny < rows and 0 <= nx < cols):
            continue
        out[d] = (ny % rows) * cols + nx % cols
    return out


def test_sip_grid_of_the_six_sip_topologies(load_graph):
    for name in SIX:
        assert tuple(load_graph(name).spec.system.sips.grid) == (2, 3)


def test_inter_sip_torus_2d(load_graph):
    spec = load_graph("6sip_2x3_torus_2d").spec
    table = inter_sip(spec, 6, "torus_2d", cube=0)
    assert table[(0, 0, 0)] == {"global_E": (1, 0, 0), "global_W": (2, 0, 0), "global_S": (3, 0, 0),
                                "global_N": (3, 0, 0)}
    for r in range(6):
        want = {d: (peer, 0, 0) for d, peer in _expected_2d(r, 2, 3, wrap=True).items()}
        assert table[(r, 0, 0)] == want, r


def test_inter_sip_mesh_2d_no_wrap(load_graph):
    spec = load_graph("6sip_2x3_mesh_2d_no_wrap").spec
    table = inter_sip(spec, 6, "mesh_2d_no_wrap", cube=0)
    assert table[(0, 0, 0)] == {"global_E": (1, 0, 0), "global_S": (3, 0, 0)}
    assert table[(4, 0, 0)] == {"global_E": (5, 0, 0), "global_W": (3, 0, 0), "global_N": (1, 0, 0)}
    for r in range(6):
        want = {d: (peer, 0, 0) for d, peer in _expected_2d(r, 2, 3, wrap=False).items()}
        assert table[(r, 0, 0)] == want, r
    # 2x3 grid without wrap: 2 rows of 2 horizontal links + 3 vertical links
    assert len(undirected(table)) == 2 * 2 + 3


def test_inter_sip_ring_of_six(load_graph):
    spec = load_graph("6sip_2x3_ring_1d").spec
    table = inter_sip(spec, 6, "ring_1d", cube=3, pe=1)
    assert set(table) == {(r, 3, 1) for r in range(6)}
    for r in range(6):
        assert table[(r, 3, 1)] == {"global_E": ((r + 1) % 6, 3, 1), "global_W": ((r - 1) % 6, 3, 1)}


def test_inter_sip_ring_of_two_reaches_the_other_rank_both_ways(default_graph):
    table = inter_sip(default_graph.spec, 2, "ring_1d", cube=0)
    assert table[(0, 0, 0)] == {"global_E": (1, 0, 0), "global_W": (1, 0, 0)}
    assert table[(1, 0, 0)] == {"global_E": (0, 0, 0), "global_W": (0, 0, 0)}


def test_inter_sip_2d_needs_the_whole_grid(load_graph):
    spec = load_graph("6sip_2x3_torus_2d").spec
    for topo in ("torus_2d", "mesh_2d_no_wrap"):
        for world in (2, 3, 4):
            with pytest.raises(NeighbourError, match="2x3"):
                inter_sip(spec, world, topo, cube=0)


# ---------------------------------------------------------------------------------------------- multi-SIP layout
@pytest.mark.parametrize("name", SIX)
def test_intercube_multisip_puts_global_links_on_every_cube_pe0(load_graph, name):
    spec = load_graph(name).spec
    topo = spec.system.sips.topology
    wrap = topo != "mesh_2d_no_wrap"
    rows, cols = (1, 6) if topo == "ring_1d" else (2, 3)
    table = intercube_multisip(spec, 6, topo)
    assert set(table) == {(s, c, 0) for s in range(6) for c in range(16)}
    for s in range(6):
        mesh = intercube_mesh(spec, s)
        for c in range(16):
            pe = (s, c, 0)
            want = {d: (peer, c, 0) for d, peer in _expected_2d(s, rows, cols, wrap).items()}
            assert globals_of(table, pe) == want, (s, c)
            assert {d: p for d, p in table[pe].items() if not d.startswith("global_")} == mesh[pe]


def test_intercube_multisip_single_rank_has_no_global_links(default_graph):
    table = intercube_multisip(default_graph.spec, 1, "ring_1d")
    assert table == intercube_mesh(default_graph.spec, 0)


def test_intercube_multisip_ring_of_three_on_six_sips(load_graph):
    spec = load_graph("6sip_2x3_ring_1d").spec
    table = intercube_multisip(spec, 3, "ring_1d")
    assert {s for s, _, _ in table} == {0, 1, 2}
    assert globals_of(table, (0, 9, 0)) == {"global_E": (1, 9, 0), "global_W": (2, 9, 0)}


@pytest.mark.parametrize("world", [0, -1, 7])
def test_intercube_multisip_rejects_world_sizes_outside_the_sips(load_graph, world):
    spec = load_graph("6sip_2x3_ring_1d").spec
    with pytest.raises(NeighbourError, match="world size"):
        intercube_multisip(spec, world, "ring_1d")


def test_intercube_multisip_rejects_more_ranks_than_sips_on_two_sips(default_graph):
    with pytest.raises(NeighbourError):
        intercube_multisip(default_graph.spec, 3, "ring_1d")


@pytest.mark.parametrize("world", [1, 2])
def test_intercube_multisip_rejects_an_unknown_sip_topology(default_graph, world):
    with pytest.raises(NeighbourError, match="hypercube"):
        intercube_multisip(default_graph.spec, world, "hypercube")


@pytest.mark.parametrize("topo", ["torus_2d", "mesh_2d_no_wrap"])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_intercube_multisip_2d_needs_the_grid_size(load_graph, topo, world):
    spec = load_graph(f"6sip_2x3_{topo}").spec
    with pytest.raises(NeighbourError):
        intercube_multisip(spec, world, topo)


# ---------------------------------------------------------------------------------------------- rings and snakes
def _walk_east(table, start):
    """The cubes visited following ``E`` from ``start`` until it comes back."""
    order = [start]
    while True:
        nxt = table[order[-1]]["E"]
        if nxt == start:
            return order
        assert nxt not in order, f"E walk revisits {nxt} before closing"
        order.append(nxt)


@pytest.mark.parametrize(("x0", "y0", "w", "h"),
                         [(0, 0, 2, 2), (0, 0, 4, 4), (1, 1, 3, 2), (2, 0, 2, 3), (3, 2, 1, 2), (0, 3, 2, 1),
                          (0, 0, 4, 2), (0, 1, 2, 3)])
def test_snake_is_a_hamiltonian_cycle_of_single_hops(default_graph, x0, y0, w, h):
    table = snake(default_graph.spec, 1, x0, y0, w, h, pe=2)
    rect = {(1, (y0 + j) * 4 + x0 + i, 2) for j in range(h) for i in range(w)}
    assert set(table) == rect
    start = min(rect)
    order = _walk_east(table, start)
    assert len(order) == len(rect) == w * h
    assert set(order) == rect
    for a, b in zip(order, [*order[1:], order[0]], strict=True):  # includes the closing step
        (ay, ax), (by, bx) = divmod(a[1], 4), divmod(b[1], 4)
        assert abs(ax - bx) + abs(ay - by) == 1, (a, b)
        assert table[b]["W"] == a


@pytest.mark.parametrize(("x0", "y0", "w", "h"), [(0, 0, 3, 3), (1, 1, 3, 3), (0, 0, 1, 3), (0, 2, 3, 1),
                                                  (0, 0, 1, 1), (0, 0, 1, 4)])
def test_snake_rejects_shapes_without_a_cycle(default_graph, x0, y0, w, h):
    with pytest.raises(NeighbourError):
        snake(default_graph.spec, 0, x0, y0, w, h)


@pytest.mark.parametrize(("x0", "y0", "w", "h"), [(3, 3, 2, 2), (0, 0, 5, 2), (2, 0, 2, 6), (-1, 0, 2, 2),
                                                  (0, -1, 2, 2), (0, 0, 0, 2), (0, 0, 2, 0)])
def test_snake_rejects_a_rectangle_outside_the_mesh(default_graph, x0, y0, w, h):
    with pytest.raises(NeighbourError, match="does not fit"):
        snake(default_graph.spec, 0, x0, y0, w, h)


def test_cube_ring_follows_the_given_order(default_graph):
    table = cube_ring(default_graph.spec, 1, [3, 12, 6], pe=5)
    assert table == {
        (1, 3, 5): {"E": (1, 12, 5), "W": (1, 6, 5)},
        (1, 12, 5): {"E": (1, 6, 5), "W": (1, 3, 5)},
        (1, 6, 5): {"E": (1, 3, 5), "W": (1, 12, 5)},
    }


@pytest.mark.parametrize("cubes", [[], [4], [1, 2, 1], [0, 16], [-1, 3], [2, 2]])
def test_cube_ring_rejects_bad_cube_lists(default_graph, cubes):
    with pytest.raises(NeighbourError):
        cube_ring(default_graph.spec, 0, cubes)


def test_link_rejects_a_conflicting_link_but_accepts_a_repeat():
    a, b, c = (0, 0, 0), (0, 1, 0), (0, 2, 0)
    table: dict = {}
    link(table, a, "E", b)
    link(table, a, "E", b)  # the same link again is fine
    assert table == {a: {"E": b}, b: {"W": a}}
    with pytest.raises(NeighbourError, match="already reaches"):
        link(table, a, "E", c)  # a's E is taken
    assert table[a]["E"] == b


def test_link_rejects_a_conflict_on_the_reverse_direction():
    a, b, c = (0, 0, 0), (0, 1, 0), (0, 2, 0)
    table: dict = {}
    link(table, a, "E", b)
    with pytest.raises(NeighbourError, match="already reaches"):
        link(table, c, "E", b)  # b's W already reaches a


def test_a_rejected_link_leaves_the_table_unchanged():
    a, b, c = (0, 0, 0), (0, 1, 0), (0, 2, 0)
    table: dict = {}
    link(table, a, "E", b)
    before = {pe: dict(dirs) for pe, dirs in table.items()}
    with pytest.raises(NeighbourError):
        link(table, c, "E", b)
    assert table == before


def test_merge_rejects_conflicting_tables(default_graph):
    spec = default_graph.spec
    with pytest.raises(NeighbourError):
        merge(cube_ring(spec, 0, [0, 1, 2]), cube_ring(spec, 0, [0, 2, 1]))


def test_intra_cube_is_a_2x4_grid(default_graph):
    table = intra_cube(default_graph.spec, 1, 3)
    assert table[(1, 3, 0)] == {"intra_E": (1, 3, 1), "intra_S": (1, 3, 4)}
    assert table[(1, 3, 7)] == {"intra_W": (1, 3, 6), "intra_N": (1, 3, 3)}
    for p in range(8):
        y, x = divmod(p, 4)
        want = {}
        if x < 3:
            want["intra_E"] = (1, 3, p + 1)
        if x > 0:
            want["intra_W"] = (1, 3, p - 1)
        if y == 0:
            want["intra_S"] = (1, 3, p + 4)
        else:
            want["intra_N"] = (1, 3, p - 4)
        assert table[(1, 3, p)] == want, p


# ---------------------------------------------------------------------------------------------- install
RING = 2 * 128 * 1024  # default pe.ipcq: depth 2 x 128 KiB slots


def _rich_table(spec):
    """Mesh + ring + intra-cube links: PE 0 of cube 5 has 4 mesh, 2 global and 2 intra directions."""
    return merge(intercube_multisip(spec, 2, "ring_1d"), intra_cube(spec, 0, 5), intra_cube(spec, 1, 0))


@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
def test_install_puts_every_ring_in_the_chosen_memory(default_graph, kind):
    spec = default_graph.spec
    assert spec.pe.ipcq.depth * spec.pe.ipcq.slot_bytes == RING
    ctx = RuntimeContext(default_graph)
    table = _rich_table(spec)
    inst = install(ctx, table, kind)
    assert inst.active and inst.buffer_kind == kind
    assert len(inst.rings) == sum(len(d) for d in table.values())
    assert len(table[(0, 5, 0)]) == 8
    assert len(table[(0, 5, 5)]) == 3
    hbm_slice = spec.hbm_slice_bytes
    spans: dict = {}
    for pe, dirs in table.items():
        comp = ipcq(ctx, pe)
        assert comp.buffer_kind == kind
        assert set(comp.links) == set(dirs)
        for d, peer in dirs.items():
            lk = comp.links[d]
            assert lk.peer == peer
            addr = decode(lk.rx_base)
            assert addr.kind == kind
            assert (addr.sip, addr.cube) == pe[:2]
            if kind == "tcm":
                assert addr.pe == pe[2]
                assert addr.offset + RING <= 15 * MIB  # below the kernel scratch (top 1 MiB of 16)
                unit = (pe, "tcm")
            elif kind == "sram":
                assert addr.pe == 0
                assert addr.offset + RING <= 32 * MIB
                unit = (pe[:2], "sram")
            else:
                assert pe[2] * hbm_slice <= addr.offset <= (pe[2] + 1) * hbm_slice - RING  # the PE's own slice
                unit = (pe[:2], "hbm")
            spans.setdefault(unit, []).append((addr.offset, addr.offset + RING))
            assert len(comp.free_slots[d]) == spec.pe.ipcq.depth
    for unit, ranges in spans.items():
        ranges.sort()
        for (_, end), (start, _) in itertools.pairwise(ranges):
            assert end <= start, f"overlapping rings in {unit}: {ranges}"
    # PEs outside the table stay empty
    assert ipcq(ctx, (0, 0, 1)).links == {}
    assert ipcq(ctx, (1, 5, 3)).links == {}


def test_install_rejects_an_unknown_buffer_kind_and_foreign_pes(default_graph):
    ctx = RuntimeContext(default_graph)
    spec = default_graph.spec
    with pytest.raises(NeighbourError, match="dram"):
        install(ctx, intercube_mesh(spec, 0), "dram")
    for far in ((2, 0, 0), (0, 16, 0), (0, 0, 8)):
        table: dict = {}
        link(table, (0, 0, 0), "E", far)
        with pytest.raises(NeighbourError, match="not in the topology"):
            install(ctx, table, "tcm")
    assert all(c.links == {} for c in all_ipcqs(ctx).values())


def test_remove_clears_the_links_and_frees_the_rings(load_graph):
    g = load_graph("big_slots")  # 4 MiB slots: one 8 MiB ring per PE fills its 15 MiB of allocatable TCM
    ctx = RuntimeContext(g)
    a, b = (0, 0, 0), (0, 1, 0)
    table: dict = {}
    link(table, a, "E", b)
    first = install(ctx, table, "tcm")
    base = ipcq(ctx, a).links["E"].rx_base
    # without remove a second install over the same PEs is refused: the previous one stays installed
    with pytest.raises(NeighbourError, match="already has a neighbour table installed"):
        install(ctx, table, "tcm")
    assert ipcq(ctx, a).links["E"].rx_base == base
    first.remove()
    assert not first.active
    assert ipcq(ctx, a).links == {} and ipcq(ctx, b).links == {}
    first.remove()  # idempotent
    second = install(ctx, table, "tcm")
    assert set(ipcq(ctx, a).links) == {"E"} and set(ipcq(ctx, b).links) == {"W"}
    assert decode(ipcq(ctx, b).links["W"].rx_base).kind == "tcm"
    second.remove()


def _reinstall_gives_the_same_rings(ctx, table, kind):
    inst = install(ctx, table, kind)
    before = {pe: {d: lk.rx_base for d, lk in ipcq(ctx, pe).links.items()} for pe in table}
    inst.remove()
    assert all(ipcq(ctx, pe).links == {} for pe in table)
    # the allocators are first-fit: freed memory is handed out again at the same addresses
    install(ctx, table, kind)
    assert {pe: {d: lk.rx_base for d, lk in ipcq(ctx, pe).links.items()} for pe in table} == before


@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
def test_remove_frees_the_rings_of_the_all_reduce_layout(default_graph, kind):
    ctx = RuntimeContext(default_graph)
    _reinstall_gives_the_same_rings(ctx, intercube_multisip(default_graph.spec, 2, "ring_1d"), kind)


@pytest.mark.parametrize("kind", ["tcm", "sram"])
def test_remove_frees_rings_of_every_pe(default_graph, kind):
    ctx = RuntimeContext(default_graph)
    _reinstall_gives_the_same_rings(ctx, _rich_table(default_graph.spec), kind)


def test_remove_frees_hbm_rings_of_pes_other_than_0(default_graph):
    ctx = RuntimeContext(default_graph)
    _reinstall_gives_the_same_rings(ctx, intra_cube(default_graph.spec, 0, 2), "hbm")


def test_install_is_all_or_nothing(load_graph):
    g = load_graph("big_slots")
    spec = g.spec
    assert spec.pe.ipcq.depth * spec.pe.ipcq.slot_bytes == 8 * MIB
    ctx = RuntimeContext(g)
    with pytest.raises(NeighbourError, match="cannot reserve"):
        install(ctx, intercube_multisip(spec, 2, "ring_1d"), "tcm")
    assert all(c.links == {} for c in all_ipcqs(ctx).values())
    # a table whose last PE does not fit: the rings of the PEs before it must be given back
    a, b, c, d, e = ((0, i, 0) for i in (0, 1, 2, 3, 6))
    table: dict = {}
    link(table, a, "E", b)
    link(table, c, "E", d)
    link(table, c, "S", e)  # c needs 16 MiB
    assert list(table)[-1] == e and list(table).index(c) == 2
    with pytest.raises(NeighbourError):
        install(ctx, table, "tcm")
    assert all(comp.links == {} for comp in all_ipcqs(ctx).values())
    # one 8 MiB ring on each of a, b, c, d only fits if nothing leaked
    small: dict = {}
    link(small, a, "E", b)
    link(small, c, "E", d)
    install(ctx, small, "tcm")
    assert {pe: set(ipcq(ctx, pe).links) for pe in (a, b, c, d, e)} == {a: {"E"}, b: {"W"}, c: {"E"}, d: {"W"},
                                                                          e: set()}


def test_a_failed_install_keeps_the_previous_table(load_graph):
    g = load_graph("big_slots")
    ctx = RuntimeContext(g)
    table = intercube_multisip(g.spec, 2, "ring_1d")
    install(ctx, table, "hbm")  # HBM slices are large enough
    before = {pe: dict(ipcq(ctx, pe).links) for pe in table}
    with pytest.raises(NeighbourError):
        install(ctx, table, "tcm")
    assert {pe: dict(ipcq(ctx, pe).links) for pe in table} == before
    assert all(ipcq(ctx, pe).buffer_kind == "hbm" for pe in table)


@pytest.mark.parametrize("size", [2, 4, 6, 8, 12, 16])
def test_a_cube_ring_of_a_given_size_steps_one_mesh_hop_at_a_time(size):
    from kernbench.ccl.neighbours import cube_ring
    from kernbench.topology import load_topology

    spec = load_topology(topologies_folder(Path(__file__)) / "topology.yaml").spec
    table = cube_ring(spec, 0, size)
    order = [0]
    while len(order) < size:
        order.append(table[(0, order[-1], 0)]["E"][1])
    assert sorted(order) == sorted(set(order)) and len(order) == size
    assert table[(0, order[-1], 0)]["E"] == (0, 0, 0)  # the ring closes
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        assert abs(a % 4 - b % 4) + abs(a // 4 - b // 4) == 1


def test_torch_install_ipcq_installs_a_table():
    import kernbench.ccl  # noqa: F401
    from kernbench.ccl.neighbours import cube_ring
    from kernbench.runtime import RuntimeContext
    from kernbench.topology import load_topology

    graph = load_topology(topologies_folder(Path(__file__)) / "topology.yaml")
    torch = RuntimeContext(graph)
    inst = torch.install_ipcq(cube_ring(graph.spec, 0, 4), "sram")
    ipcq = torch.engine.components["sip0.cube1.pe0.pe_ipcq"]
    assert ipcq.links["E"].peer == (0, 5, 0) and ipcq.links["W"].peer == (0, 0, 0)
    inst.remove()
    assert ipcq.links == {}


def test_extend_adds_links_over_an_installed_table_and_gives_them_back(default_graph):
    from kernbench.ccl.neighbours import intercube_mesh, intra_cube

    ctx = RuntimeContext(default_graph)
    spec = default_graph.spec
    base = install(ctx, intercube_mesh(spec, 0, 0), "sram")
    pe0 = ctx.engine.components["sip0.cube0.pe0.pe_ipcq"]
    pe1 = ctx.engine.components["sip0.cube0.pe1.pe_ipcq"]
    before = dict(pe0.links)
    with pytest.raises(NeighbourError, match=r"PE \(0, 0, 0\) already has a neighbour table installed"):
        install(ctx, intra_cube(spec, 0, 0), "tcm")
    added = install(ctx, intra_cube(spec, 0, 0), "tcm", extend=True)
    # PE 0 keeps its mesh links and their rings, and its new intra_E ring is in the memory it already uses
    assert {d: pe0.links[d] for d in before} == before
    assert pe0.links["intra_E"].peer == (0, 0, 1) and pe0.buffer_kind == "sram"
    assert decode(pe0.links["intra_E"].rx_base).kind == "sram"
    assert pe1.buffer_kind == "tcm" and decode(pe1.links["intra_W"].rx_base).kind == "tcm"
    assert len(added.rings) == sum(len(d) for d in intra_cube(spec, 0, 0).values())
    added.remove()
    assert pe0.links == before and pe1.links == {}
    base.remove()
    assert pe0.links == {}


def test_extend_refuses_a_direction_that_reaches_another_peer(default_graph):
    from kernbench.ccl.neighbours import intercube_mesh, link

    ctx = RuntimeContext(default_graph)
    install(ctx, intercube_mesh(default_graph.spec, 0, 0), "tcm")
    table: dict = {}
    link(table, (0, 0, 0), "E", (0, 2, 0))  # cube 0's E is cube 1 in the mesh
    with pytest.raises(NeighbourError, match=r"PE \(0, 0, 0\) already reaches \(0, 1, 0\) through 'E'"):
        install(ctx, table, "tcm", extend=True)
    assert ctx.engine.components["sip0.cube2.pe0.pe_ipcq"].links["W"].peer == (0, 1, 0)  # nothing changed
