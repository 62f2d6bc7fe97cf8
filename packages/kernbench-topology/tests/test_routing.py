"""Tests of intent-aware path finding.

Shortest-path expectations come from a Bellman-Ford written here over edge sets filtered by the
intent table of the routing module's docstring, or from hand-worked distances on the default layout.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.topology import (
    PathRouter,
    RoutingError,
    TopologyError,
    compile_spec,
    path_edges,
    spec_from_dict,
)

HOST, SWITCH = "tray.host_cpu", "fabric.switch0"
UCIE_KINDS = {"router_to_ucie_conn", "ucie_conn_to_router", "ucie_mesh", "io_to_cube", "cube_to_io"}
PIPE_KINDS = {"pe_internal", "pe_to_router", "router_to_pe"}
EXCLUDED = {
    "all": set(),
    "data": {"command"},
    "data_local": {"command"} | UCIE_KINDS,
    "memory": {"command"} | PIPE_KINDS,
    "memory_local": {"command"} | PIPE_KINDS | UCIE_KINDS,
}
UCIE_NODE_TYPES = {"ucie_phy", "io_ucie"}


@pytest.fixture(scope="module")
def graph():
    """The default hardware: 2 SIPs x 16 cubes x 8 PEs."""
    return compile_spec(spec_from_dict({}))


def tiny_spec(**extra):
    """2 SIPs of 2x1 cubes: small enough for a brute-force shortest-path check."""
    data = {"system": {"sips": {"count": 2}}, "sip": {"cube_mesh": {"w": 2, "h": 1}}}
    data.update(extra)
    return spec_from_dict(data)


@pytest.fixture(scope="module")
def tiny():
    return compile_spec(tiny_spec())


def cube_of(node_id):
    m = re.match(r"^(sip\d+\.cube\d+)\.", node_id)
    return m.group(1) if m else None


def bellman_ford(graph, intent, src):
    excluded = EXCLUDED[intent]
    edges = [(e.src, e.dst, e.routing_weight_mm) for e in graph.edges if e.kind not in excluded]
    dist = {src: 0.0}
    for _ in range(len(graph.nodes)):
        changed = False
        for a, b, w in edges:
            da = dist.get(a)
            if da is not None and da + w < dist.get(b, math.inf) - 1e-12:
                dist[b] = da + w
                changed = True
        if not changed:
            break
    return dist


def check_path(graph, path, src, dst, intent):
    """The path is a chain of existing edges of allowed kinds; return its routing weight."""
    assert path[0] == src and path[-1] == dst
    assert len(set(path)) == len(path), "path revisits a node"
    edges = path_edges(graph, path)
    for e in edges:
        assert e.kind not in EXCLUDED[intent], (e, intent)
    return sum(e.routing_weight_mm for e in edges)


# --------------------------------------------------------------------------- intents on the default graph


@settings(max_examples=120, deadline=None)
@given(sip=st.integers(0, 1), cube=st.integers(0, 15), pe=st.integers(0, 7), other=st.integers(0, 7),
       target=st.sampled_from(["hbm", "sram", "m_cpu", "tcm", "dma"]))
def test_same_cube_pe_dma_never_uses_ucie(graph, sip, cube, pe, other, target):
    pre = f"sip{sip}.cube{cube}"
    dst = {"hbm": f"{pre}.hbm_ctrl.pe{other}", "sram": f"{pre}.sram", "m_cpu": f"{pre}.m_cpu",
           "tcm": f"{pre}.pe{other}.pe_tcm", "dma": f"{pre}.pe{other}.pe_dma"}[target]
    src = f"{pre}.pe{pe}.pe_dma"
    path = PathRouter(graph).pe_dma_path(src, dst)
    check_path(graph, path, src, dst, "data_local")
    for n in path:
        assert graph.nodes[n].type not in UCIE_NODE_TYPES, path
        assert n.startswith(pre + "."), path


def test_cross_cube_path_by_hand(graph):
    # PE0 sits on r0c0; cube1's PE0 slice controller hangs off cube1's r0c0. Going east along row 0
    # (9 mm) and down to r1c3 (3 mm) reaches the east PHY c0 (1.5 mm), one die crossing (weight 1),
    # then west PHY c0 -> r1c0 (1.5 mm) -> r0c0 (3 mm) -> controller 0.35 x hypot(4.5, 4.5) mm.
    router = PathRouter(graph)
    path = router.pe_dma_path("sip0.cube0.pe0.pe_dma", "sip0.cube1.hbm_ctrl.pe0")
    assert path == (
        "sip0.cube0.pe0.pe_dma", "sip0.cube0.noc.r0c0", "sip0.cube0.noc.r0c1", "sip0.cube0.noc.r0c2",
        "sip0.cube0.noc.r0c3", "sip0.cube0.noc.r1c3", "sip0.cube0.ucie_e.c0", "sip0.cube1.ucie_w.c0",
        "sip0.cube1.noc.r1c0", "sip0.cube1.noc.r0c0", "sip0.cube1.hbm_ctrl.pe0")
    kinds = [e.kind for e in path_edges(graph, path)]
    assert kinds.count("ucie_mesh") == 1
    _, dist = router.path_with_distance("data", "sip0.cube0.pe0.pe_dma", "sip0.cube1.hbm_ctrl.pe0")
    expected = 9 + 3 + 1.5 + 1.0 + 1.5 + 3 + 0.35 * math.hypot(4.5, 4.5)
    assert dist == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("src_cube, dst_cube, crossings", [(0, 1, 1), (0, 3, 3), (0, 5, 2), (0, 15, 6), (6, 9, 2)])
def test_cross_cube_crossings(graph, src_cube, dst_cube, crossings):
    # Manhattan distance on the 4x4 cube mesh = number of die crossings on a shortest path.
    path = PathRouter(graph).pe_dma_path(f"sip0.cube{src_cube}.pe3.pe_dma", f"sip0.cube{dst_cube}.sram")
    kinds = [e.kind for e in path_edges(graph, path)]
    assert kinds.count("ucie_mesh") == crossings
    assert "command" not in kinds


def test_host_memory_path_by_hand(graph):
    # io_noc (3, 6) -> io_ucie.c0 (6, 4.5) is hypot(3, 1.5) mm, nearer than c1 (6, 10.5).
    path = PathRouter(graph).memory_path(HOST, "sip0.cube0.hbm_ctrl.pe0")
    assert path == (HOST, SWITCH, "sip0.io0.pcie_ep", "sip0.io0.io_noc", "sip0.io0.io_ucie.c0",
                    "sip0.cube0.ucie_w.c0", "sip0.cube0.noc.r1c0", "sip0.cube0.noc.r0c0",
                    "sip0.cube0.hbm_ctrl.pe0")


def test_host_memory_paths_avoid_pes_and_cpus(graph):
    router = PathRouter(graph)
    targets = (graph.nodes_of_type("hbm_ctrl") + graph.nodes_of_type("sram") + graph.nodes_of_type("m_cpu"))
    assert len(targets) == 256 + 32 + 32
    for dst in targets:
        path = router.memory_path(HOST, dst)
        check_path(graph, path, HOST, dst, "memory")
        sip = dst.split(".")[0]
        assert path[1] == SWITCH and path[2] == f"{sip}.io0.pcie_ep"
        for n in path:
            t = graph.nodes[n].type
            assert not t.startswith("pe_"), path
            assert t != "io_cpu", path
            assert t != "m_cpu" or n == dst, path
        # and back again
        back = router.memory_path(dst, HOST)
        check_path(graph, back, dst, HOST, "memory")


@pytest.mark.parametrize("sip, cube, pe", [(0, 0, 0), (0, 5, 3), (1, 15, 7), (1, 0, 4)])
def test_control_path_io_cpu_to_pe_cpu(graph, sip, cube, pe):
    src, dst = f"sip{sip}.io0.io_cpu", f"sip{sip}.cube{cube}.pe{pe}.pe_cpu"
    path = PathRouter(graph).control_path(src, dst)
    check_path(graph, path, src, dst, "all")
    kinds = [e.kind for e in path_edges(graph, path)]
    assert kinds[0] == "command"   # io_cpu -> io_noc
    assert kinds[-1] == "command"  # router -> pe_cpu
    assert path[1] == f"sip{sip}.io0.io_noc"
    # no data-only intent reaches a pe_cpu from the io_cpu (its only links are command links)
    with pytest.raises(RoutingError):
        PathRouter(graph).memory_path(src, dst)


def test_cross_sip_pe_dma_goes_through_switch(graph):
    src, dst = "sip0.cube0.pe0.pe_dma", "sip1.cube0.hbm_ctrl.pe0"
    path = PathRouter(graph).pe_dma_path(src, dst)
    check_path(graph, path, src, dst, "data")
    assert SWITCH in path
    i = path.index(SWITCH)
    assert path[i - 1] == "sip0.io0.pcie_ep"
    assert path[i + 1] == "sip1.io0.pcie_ep"
    assert HOST not in path
    assert [e.kind for e in path_edges(graph, path)].count("pcie") == 2


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 15), st.integers(0, 7), st.integers(0, 15), st.integers(0, 7))
def test_every_cross_sip_path_uses_the_switch(graph, c1, p1, c2, p2):
    src, dst = f"sip1.cube{c1}.pe{p1}.pe_dma", f"sip0.cube{c2}.pe{p2}.pe_tcm"
    path = PathRouter(graph).pe_dma_path(src, dst)
    assert SWITCH in path
    assert path[-2] == f"sip0.cube{c2}.pe{p2}.pe_dma"  # a remote TCM is reached through its own DMA


def test_mcpu_dma_path_avoids_pe_pipeline(graph):
    router = PathRouter(graph)
    for dst in ("sip0.cube0.hbm_ctrl.pe5", "sip0.cube0.sram", "sip0.cube6.hbm_ctrl.pe2", "sip1.cube1.sram"):
        path = router.mcpu_dma_path("sip0.cube0.m_cpu", dst)
        intent = "memory_local" if cube_of(dst) == "sip0.cube0" else "memory"
        check_path(graph, path, "sip0.cube0.m_cpu", dst, intent)
        assert not any(graph.nodes[n].type.startswith("pe_") for n in path)
        if intent == "memory_local":
            assert not any(graph.nodes[n].type in UCIE_NODE_TYPES for n in path)


def test_same_node_path(graph):
    router = PathRouter(graph)
    assert router.pe_dma_path("sip0.cube0.pe0.pe_dma", "sip0.cube0.pe0.pe_dma") == ("sip0.cube0.pe0.pe_dma",)
    assert router.path_with_distance("all", HOST, HOST) == ((HOST,), 0.0)


# --------------------------------------------------------------------------- errors


def test_unreachable_host_to_tcm(graph):
    with pytest.raises(RoutingError) as info:
        PathRouter(graph).memory_path(HOST, "sip0.cube0.pe0.pe_tcm")
    assert str(info.value) == f"no path from {HOST} to sip0.cube0.pe0.pe_tcm"


def test_unreachable_mcpu_to_pe(graph):
    with pytest.raises(RoutingError, match=re.escape("no path from sip0.cube2.m_cpu to sip0.cube2.pe1.pe_dma")):
        PathRouter(graph).mcpu_dma_path("sip0.cube2.m_cpu", "sip0.cube2.pe1.pe_dma")


def test_unreachable_from_a_leaf(graph):
    # pe_gemm's only links are pe_internal, so the memory intent cannot leave it
    with pytest.raises(RoutingError, match=re.escape("no path from sip0.cube0.pe0.pe_gemm to")):
        PathRouter(graph).memory_path("sip0.cube0.pe0.pe_gemm", "sip0.cube0.sram")


def test_tcm_source_reaches_other_cube_via_its_dma(graph):
    path = PathRouter(graph).pe_dma_path("sip0.cube0.pe0.pe_tcm", "sip0.cube1.hbm_ctrl.pe0")
    assert path[1] == "sip0.cube0.pe0.pe_dma"


@pytest.mark.parametrize("method", ["pe_dma_path", "mcpu_dma_path", "memory_path", "control_path"])
def test_unknown_node(graph, method):
    router = PathRouter(graph)
    with pytest.raises(RoutingError, match=re.escape("node sip0.cube99.sram not found")):
        getattr(router, method)(HOST, "sip0.cube99.sram")
    with pytest.raises(RoutingError, match="node nowhere not found"):
        getattr(router, method)("nowhere", HOST)


def test_unknown_intent(graph):
    with pytest.raises(RoutingError, match="unknown routing intent 'fast'"):
        PathRouter(graph).path_with_distance("fast", HOST, SWITCH)


def test_path_edges_rejects_a_broken_path(graph):
    with pytest.raises(TopologyError, match=re.escape("no link for tray.host_cpu → sip0.io0.pcie_ep")):
        path_edges(graph, [HOST, "sip0.io0.pcie_ep"])
    assert path_edges(graph, [HOST]) == []


# --------------------------------------------------------------------------- disabled links reroute


def test_disabled_mesh_link_forces_the_ring_detour():
    a, b = "sip0.cube0.noc.r0c0", "sip0.cube0.noc.r0c1"
    g = compile_spec(tiny_spec(disabled_links=[[a, b], [b, a]]))
    path = PathRouter(g).pe_dma_path("sip0.cube0.pe0.pe_dma", "sip0.cube0.hbm_ctrl.pe1")
    # the 12 routers form a ring around the HBM zone; without r0c0-r0c1 the only way is the long way round
    ring = ["r0c0", "r1c0", "r2c0", "r3c0", "r3c1", "r3c2", "r3c3", "r2c3", "r1c3", "r0c3", "r0c2", "r0c1"]
    assert path == ("sip0.cube0.pe0.pe_dma", *(f"sip0.cube0.noc.{r}" for r in ring), "sip0.cube0.hbm_ctrl.pe1")


# --------------------------------------------------------------------------- determinism and optimality


@pytest.fixture(scope="module")
def tiny_nodes(tiny):
    return sorted(tiny.nodes)


def _attempt(router, method, src, dst):
    try:
        return getattr(router, method)(src, dst)
    except RoutingError as exc:
        return ("error", str(exc))


@pytest.fixture(scope="module")
def tiny_again():
    """A second, independently compiled copy of the tiny topology."""
    return compile_spec(tiny_spec())


@settings(max_examples=150, deadline=None)
@given(data=st.data(), method=st.sampled_from(["pe_dma_path", "mcpu_dma_path", "memory_path", "control_path"]))
def test_paths_are_deterministic(tiny, tiny_again, tiny_nodes, data, method):
    src = data.draw(st.sampled_from(tiny_nodes))
    dst = data.draw(st.sampled_from(tiny_nodes))
    first = _attempt(PathRouter(tiny), method, src, dst)
    second = _attempt(PathRouter(tiny), method, src, dst)
    assert first == second
    # a separately compiled graph routes identically too
    third = _attempt(PathRouter(tiny_again), method, src, dst)
    assert first == third


def test_memoised_result_is_stable(graph):
    router = PathRouter(graph)
    a = router.pe_dma_path("sip0.cube3.pe1.pe_dma", "sip1.cube12.sram")
    b = router.pe_dma_path("sip0.cube3.pe1.pe_dma", "sip1.cube12.sram")
    assert a == b


TINY_SOURCES = [HOST, "sip0.cube0.pe0.pe_dma", "sip1.cube1.pe6.pe_dma", "sip0.cube1.m_cpu", "sip1.io0.io_cpu",
                "sip0.cube0.hbm_ctrl.pe3", "sip1.cube0.pe2.pe_tcm"]


@pytest.mark.parametrize("intent", sorted(EXCLUDED))
@pytest.mark.parametrize("src", TINY_SOURCES)
def test_paths_are_shortest(tiny, intent, src):
    router = PathRouter(tiny)
    best = bellman_ford(tiny, intent, src)
    for dst in tiny.nodes:
        if dst not in best:
            with pytest.raises(RoutingError, match=f"no path from {re.escape(src)} to {re.escape(dst)}"):
                router.path_with_distance(intent, src, dst)
            continue
        path, dist = router.path_with_distance(intent, src, dst)
        weight = check_path(tiny, path, src, dst, intent)
        assert dist == pytest.approx(weight, abs=1e-9)
        assert dist == pytest.approx(best[dst], abs=1e-9), (src, dst)


@pytest.mark.parametrize("src", [s for s in TINY_SOURCES if s.endswith("pe_dma")])
def test_pe_dma_path_is_shortest_for_its_intent(tiny, src):
    router = PathRouter(tiny)
    local, remote = bellman_ford(tiny, "data_local", src), bellman_ford(tiny, "data", src)
    for dst in tiny.nodes:
        same = cube_of(dst) == cube_of(src)
        best = local if same else remote
        if dst not in best:
            with pytest.raises(RoutingError):
                router.pe_dma_path(src, dst)
            continue
        path = router.pe_dma_path(src, dst)
        weight = check_path(tiny, path, src, dst, "data_local" if same else "data")
        assert weight == pytest.approx(best[dst], abs=1e-9), (src, dst)


@pytest.mark.parametrize("src", ["sip0.cube0.m_cpu", "sip1.cube1.m_cpu"])
def test_mcpu_dma_path_is_shortest_for_its_intent(tiny, src):
    router = PathRouter(tiny)
    local, remote = bellman_ford(tiny, "memory_local", src), bellman_ford(tiny, "memory", src)
    for dst in tiny.nodes:
        same = cube_of(dst) == cube_of(src)
        best = local if same else remote
        if dst not in best:
            with pytest.raises(RoutingError):
                router.mcpu_dma_path(src, dst)
            continue
        path = router.mcpu_dma_path(src, dst)
        weight = check_path(tiny, path, src, dst, "memory_local" if same else "memory")
        assert weight == pytest.approx(best[dst], abs=1e-9), (src, dst)


def test_ucie_routing_weight_is_used():
    # A heavy die-crossing weight makes a cross-cube path cost at least that weight.
    g = compile_spec(tiny_spec(sip={"cube_mesh": {"w": 2, "h": 1}, "ucie": {"routing_weight_mm": 500.0}}))
    _, dist = PathRouter(g).path_with_distance("data", "sip0.cube0.pe0.pe_dma", "sip0.cube1.sram")
    assert 500.0 < dist < 1000.0


# --------------------------------------------------------------------------- XY routing between cubes


def _loc(node_id):
    m = re.match(r"^sip(\d+)\.cube(\d+)\.", node_id)
    return (int(m.group(1)), int(m.group(2))) if m else None


def xy_walk(sip, c0, c1, w):
    """Cubes of the X-then-Y walk from c0 to c1 in a mesh w cubes wide."""
    (r0, x0), (r1, x1) = divmod(c0, w), divmod(c1, w)
    cubes = [(sip, r0 * w + x) for x in range(min(x0, x1), max(x0, x1) + 1)]
    cubes += [(sip, r * w + x1) for r in range(min(r0, r1), max(r0, r1) + 1)]
    return set(cubes)


def corridor(src, dst, w, io_cube=0):
    a, b = _loc(src), _loc(dst)
    if (a is None and b is None) or a == b:
        return None
    if a is not None and b is not None and a[0] == b[0]:
        return xy_walk(a[0], a[1], b[1], w)
    cubes = set()
    if a is not None:
        cubes |= xy_walk(a[0], a[1], io_cube, w)
    if b is not None:
        cubes |= xy_walk(b[0], io_cube, b[1], w)
    return cubes


def cubes_on(path):
    return {loc for loc in map(_loc, path) if loc is not None}


def test_xy_goes_along_the_row_first(graph):
    router = PathRouter(graph)
    # cube0 (row 0, col 0) -> cube5 (row 1, col 1): east to cube1, then south.
    assert cubes_on(router.pe_dma_path("sip0.cube0.pe6.pe_dma", "sip0.cube5.sram")) == {(0, 0), (0, 1), (0, 5)}
    # cube5 -> cube0: west to cube4, then north.
    assert cubes_on(router.pe_dma_path("sip0.cube5.pe1.pe_dma", "sip0.cube0.sram")) == {(0, 5), (0, 4), (0, 0)}


@settings(max_examples=120, deadline=None)
@given(s0=st.integers(0, 1), c0=st.integers(0, 15), p0=st.integers(0, 7),
       s1=st.integers(0, 1), c1=st.integers(0, 15), p1=st.integers(0, 7),
       target=st.sampled_from(["hbm_ctrl.pe{p}", "sram", "m_cpu", "pe{p}.pe_tcm"]))
def test_pe_dma_paths_stay_in_the_xy_corridor(graph, s0, c0, p0, s1, c1, p1, target):
    src = f"sip{s0}.cube{c0}.pe{p0}.pe_dma"
    dst = f"sip{s1}.cube{c1}." + target.format(p=p1)
    path = PathRouter(graph).pe_dma_path(src, dst)
    allowed = corridor(src, dst, 4) or {(s0, c0)}
    assert cubes_on(path) <= allowed, path
    crossings = [e.kind for e in path_edges(graph, path)].count("ucie_mesh")
    if s0 == s1:
        (r0, x0), (r1, x1) = divmod(c0, 4), divmod(c1, 4)
        assert crossings == abs(r0 - r1) + abs(x0 - x1)
    else:
        # out to the IO chiplet's cube 0 and in from the other SIP's cube 0
        assert crossings == sum(divmod(c0, 4)) + sum(divmod(c1, 4))
        assert SWITCH in path


@pytest.fixture(scope="module")
def square():
    """1 SIP of 2x2 cubes: cross-cube routes have a corridor narrower than the SIP."""
    return compile_spec(spec_from_dict({"system": {"sips": {"count": 1}}, "sip": {"cube_mesh": {"w": 2, "h": 2}}}))


def bellman_ford_within(graph, intent, src, cubes):
    excluded = EXCLUDED[intent]

    def ok(n):
        loc = _loc(n)
        return cubes is None or loc is None or loc in cubes

    edges = [(e.src, e.dst, e.routing_weight_mm) for e in graph.edges
             if e.kind not in excluded and ok(e.src) and ok(e.dst)]
    dist = {src: 0.0}
    for _ in range(len(graph.nodes)):
        changed = False
        for a, b, w in edges:
            da = dist.get(a)
            if da is not None and da + w < dist.get(b, math.inf) - 1e-12:
                dist[b] = da + w
                changed = True
        if not changed:
            break
    return dist


@pytest.mark.parametrize("intent", ["data", "all", "memory"])
@pytest.mark.parametrize("src", ["sip0.cube0.pe0.pe_dma", "sip0.cube3.m_cpu", HOST])
def test_paths_are_shortest_within_the_corridor(square, intent, src):
    router = PathRouter(square)
    cache = {}
    for dst in square.nodes:
        cubes = corridor(src, dst, 2)
        key = None if cubes is None else frozenset(cubes)
        if key not in cache:
            cache[key] = bellman_ford_within(square, intent, src, cubes)
        best = cache[key]
        if dst not in best:
            with pytest.raises(RoutingError, match=f"no path from {re.escape(src)} to {re.escape(dst)}"):
                router.path_with_distance(intent, src, dst)
            continue
        path, dist = router.path_with_distance(intent, src, dst)
        weight = check_path(square, path, src, dst, intent)
        assert dist == pytest.approx(weight, abs=1e-9)
        assert dist == pytest.approx(best[dst], abs=1e-9), (src, dst)
        if cubes is not None:
            assert cubes_on(path) <= cubes
