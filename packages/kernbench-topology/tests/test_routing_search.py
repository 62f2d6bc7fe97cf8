"""The router's resumable, corridor-inlined search gives exactly the paths of the reference Dijkstra (issue 24).

``routing._dijkstra`` is the plain search the router used before: a full shortest-path tree from a source between
nodes outside cubes, a search stopped at the destination over the corridor's nodes otherwise. The router now
pauses and resumes one search per source (and per corridor); these tests ask it for many destinations in a
shuffled order and compare every path and distance with a fresh reference search.
"""

from __future__ import annotations

import random

import pytest

from kernbench.topology import PathRouter, builtin
from kernbench.topology import naming as nm
from kernbench.topology.routing import _EXCLUDE, _dijkstra


@pytest.fixture(scope="module")
def graph():
    return builtin("6sip_2x3_torus_2d")


_ADJ: dict[tuple[int, str], dict[str, list[tuple[str, float]]]] = {}
_TREES: dict[tuple[int, str, str], tuple[dict[str, float], dict[str, str]]] = {}


def _reference(router: PathRouter, graph, adj_name: str, src: str, dst: str) -> tuple[tuple[str, ...], float]:
    adj = _ADJ.get((id(graph), adj_name))
    if adj is None:
        adj = _ADJ[(id(graph), adj_name)] = {}
        for e in graph.edges:
            if e.kind not in _EXCLUDE[adj_name]:
                adj.setdefault(e.src, []).append((e.dst, e.routing_weight_mm))
    corridor = router._corridor(src, dst)
    if corridor is None:
        key = (id(graph), adj_name, src)
        if key not in _TREES:
            _TREES[key] = _dijkstra(adj, src)
        dist, prev = _TREES[key]
    else:
        cube_of = router._cube_index()
        ends = {cube_of.get(src), cube_of.get(dst)}

        def allowed(n: str) -> bool:
            c = cube_of.get(n)
            return c is None or ((c[0], c[1]) in corridor and (c[2] is None or c in ends))

        dist, prev = _dijkstra(adj, src, dst, allowed)
    path = [dst]
    while path[-1] != src:
        path.append(prev[path[-1]])
    return tuple(reversed(path)), dist[dst]


def _check(router, graph, queries) -> int:
    """Ask the router every query in order and compare each path and distance with the reference search (an
    unreachable destination must be unreachable for both); returns how many paths were compared."""
    checked = 0
    for adj_name, src, dst in queries:
        try:
            got = router.path_with_distance(adj_name, src, dst)
        except Exception as exc:
            with pytest.raises(KeyError):
                _reference(router, graph, adj_name, src, dst)
            assert "no path" in str(exc)
            continue
        assert got == _reference(router, graph, adj_name, src, dst), (adj_name, src, dst)
        checked += 1
    return checked


def test_resumed_and_corridor_searches_match_the_reference(graph):
    rng = random.Random(24)
    nodes = sorted(graph.nodes)
    outside = [n for n in nodes if nm.locate(n).cube is None]
    inside = [n for n in nodes if nm.locate(n).cube is not None]
    router = PathRouter(graph)
    queries = []
    for adj_name in ("all", "memory"):
        for src in rng.sample(outside, 3):  # resumed full-graph searches: many destinations, shuffled
            queries += [(adj_name, src, d) for d in rng.sample(outside, 12) + rng.sample(inside, 6) if d != src]
    for adj_name in ("all", "data", "memory"):  # corridor searches, several destinations sharing a source
        for src in rng.sample(inside, 4):
            queries += [(adj_name, src, d) for d in rng.sample(inside, 8) if d != src]
    rng.shuffle(queries)
    assert _check(router, graph, queries) > 100


# --------------------------------------------------------------------------- reuse in congruent cubes and SIPs


def test_paths_reused_across_cubes_and_sips_match_the_reference(graph):
    """Same-cube and same-SIP queries in every cube and SIP of the 6-SIP torus, shuffled: each reused path is the
    one a fresh reference search finds (ties by edge order included), and most queries are reused."""
    rng = random.Random(2024)
    router = PathRouter(graph)
    by_cube: dict[tuple[int, int], list[str]] = {}
    for n in sorted(graph.nodes):
        loc = nm.locate(n)
        if loc.cube is not None:
            by_cube.setdefault((loc.sip, loc.cube), []).append(n)
    sips = sorted({s for s, _ in by_cube})
    cubes = sorted({c for _, c in by_cube})
    queries = []
    for adj_name in ("all", "data_local", "memory_local"):  # same cube: one relative pair asked in every cube
        for _ in range(6):
            a, b = rng.sample(range(len(by_cube[(0, 0)])), 2)
            queries += [(adj_name, by_cube[(s, c)][a], by_cube[(s, c)][b]) for s in sips for c in cubes]
    for adj_name in ("all", "data", "memory"):  # same SIP, across its cubes: one relative pair in every SIP
        for _ in range(6):
            c0, c1 = rng.sample(cubes, 2)
            a = rng.randrange(len(by_cube[(0, c0)]))
            b = rng.randrange(len(by_cube[(0, c1)]))
            queries += [(adj_name, by_cube[(s, c0)][a], by_cube[(s, c1)][b]) for s in sips]
    io = {s: nm.io_cpu(s) for s in sips}  # from a node outside cubes into its own SIP's cubes
    queries += [("all", io[s], by_cube[(s, c)][0]) for s in sips for c in cubes]
    rng.shuffle(queries)
    checked = _check(router, graph, queries)
    assert checked > 400
    assert router.reused > checked // 2  # the reuse really ran


def _variant(base, change) -> object:
    """A copy of a compiled graph with its edge list passed through ``change`` (a list -> list function)."""
    from kernbench.topology.graph import TopologyGraph

    _ADJ.clear()  # the reference's memos are keyed by id(graph), which a collected variant's successor may reuse
    _TREES.clear()
    return TopologyGraph(base.spec, base.mesh, None, dict(base.nodes), change(list(base.edges)), dict(base.views))


@pytest.fixture(scope="module")
def small():
    return builtin("default")


A, B = "noc.r0c0", "noc.r3c3"  # opposite corners of a cube's router ring: two routes of equal length


def test_a_cube_with_another_weight_is_not_reused(small):
    """Cube 2's ring has one edge 1 mm heavier, so its corner-to-corner route turns the other way: the router
    must search it rather than reuse cube 1's route."""
    import dataclasses

    heavy = ("sip0.cube2.noc.r0c1", "sip0.cube2.noc.r0c2")
    g = _variant(small, lambda edges: [dataclasses.replace(e, routing_weight_mm=e.routing_weight_mm + 1)
                                       if (e.src, e.dst) == heavy else e for e in edges])
    router = PathRouter(g)
    first = router.path_with_distance("all", f"sip0.cube1.{A}", f"sip0.cube1.{B}")
    got = router.path_with_distance("all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")
    translated = tuple(p.replace("cube1", "cube2") for p in first[0])
    assert got == _reference(router, g, "all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")
    assert got[0] != translated  # reusing cube 1's route would have been wrong
    assert router.reused == 0
    router2 = PathRouter(small)  # the unchanged graph: the same two questions, the second one reused
    router2.path_with_distance("all", f"sip0.cube1.{A}", f"sip0.cube1.{B}")
    assert router2.path_with_distance("all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")[0] == translated
    assert router2.reused == 1


def test_a_cube_with_another_edge_order_is_not_reused(small):
    """Ties resolve by edge order: cube 2's corner router lists its two ring neighbours the other way round, so
    its route takes the other half of the ring at equal length; it must not be reused from cube 1."""
    corner = f"sip0.cube2.{A}"

    def swap(edges):
        mine = [i for i, e in enumerate(edges) if e.src == corner and ".noc." in e.dst]
        out = list(edges)
        out[mine[0]], out[mine[1]] = edges[mine[1]], edges[mine[0]]
        return out

    g = _variant(small, swap)
    router = PathRouter(g)
    first = router.path_with_distance("all", f"sip0.cube1.{A}", f"sip0.cube1.{B}")
    got = router.path_with_distance("all", corner, f"sip0.cube2.{B}")
    assert got == _reference(router, g, "all", corner, f"sip0.cube2.{B}")
    assert got[0] != tuple(p.replace("cube1", "cube2") for p in first[0])
    assert got[1] == first[1]
    assert router.reused == 0


def test_the_guard_refuses_a_cube_whose_outside_edge_is_a_shortcut(small):
    """Cube 2 gets a 0.01 mm detour through the IO chiplet's NoC (a node outside cubes, so allowed in a same-cube
    corridor and invisible to the signature of in-cube edges): its corner-to-corner route takes it. The guard
    (an outside edge ending no farther than the destination) makes the router search."""
    from kernbench.topology.graph import Edge

    io = "sip0.io0.io_noc"
    extra = [Edge(f"sip0.cube2.{A}", io, "io_internal", 1000.0, 1.0, 0.01, 0.01),
             Edge(io, f"sip0.cube2.{B}", "io_internal", 1000.0, 1.0, 0.01, 0.01)]
    g = _variant(small, lambda edges: edges + extra)
    router = PathRouter(g)
    router.path_with_distance("all", f"sip0.cube1.{A}", f"sip0.cube1.{B}")
    got = router.path_with_distance("all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")
    assert got == _reference(router, g, "all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")
    assert got[0] == (f"sip0.cube2.{A}", io, f"sip0.cube2.{B}")
    assert router.reused == 0
    # the in-cube edges alone would have allowed the reuse
    assert all(router._row((0, 1), rel)[0] == router._row((0, 2), rel)[0]
               for rel, _ in router._shapes[("all", "cube", A, B)][3])


def test_a_cube_equal_in_full_is_still_refused_when_the_guard_fails(small):
    """Cubes 1 and 2 both get an edge from ring router r3c2 (15 mm from the corner) to the IO chiplet's NoC,
    3 mm long: an outside entry at exactly the destination's 18 mm, pushed after it, so the search still ends in
    the cube and cube 1's route is remembered, but its guard does not hold. Cube 2's rows equal cube 1's in full,
    and the fast test of reuse must still refuse it, as the per-node test does: the router searches."""
    from kernbench.topology.graph import Edge

    io = "sip0.io0.io_noc"
    extra = [Edge(f"sip0.cube{c}.noc.r3c2", io, "io_internal", 1000.0, 1.0, 3.0, 3.0) for c in (1, 2)]
    g = _variant(small, lambda edges: edges + extra)
    router = PathRouter(g)
    first = router.path_with_distance("all", f"sip0.cube1.{A}", f"sip0.cube1.{B}")
    assert first[1] == 18.0 and ("all", "cube", A, B) in router._shapes  # remembered: the search stayed in cube 1
    got = router.path_with_distance("all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")
    assert got == _reference(router, g, "all", f"sip0.cube2.{A}", f"sip0.cube2.{B}")
    rels = [rel for rel, _ in router._shapes[("all", "cube", A, B)][3]]
    assert [router._row((0, 1), rel) for rel in rels] == [router._row((0, 2), rel) for rel in rels]
    assert router._row((0, 1), "noc.r3c2")[1] == 3.0
    assert router.reused == 0 and router.searched == 2


# --------------------------------------------------------------------------- dead-end SIPs


def _cross_sip_queries(graph, rng) -> list[tuple[str, str, str]]:
    nodes = sorted(graph.nodes)
    by_sip: dict[int | None, list[str]] = {}
    for n in nodes:
        by_sip.setdefault(nm.locate(n).sip, []).append(n)
    sips = sorted(s for s in by_sip if s is not None)
    queries = []
    for adj_name in ("all", "data", "memory"):
        for _ in range(12):
            a, b = rng.sample(sips, 2)
            queries += [(adj_name, src, dst) for src in rng.sample(by_sip[a], 2) for dst in rng.sample(by_sip[b], 3)]
        queries += [(adj_name, nm.HOST, d) for d in rng.sample(nodes, 10) if d != nm.HOST]
        queries += [(adj_name, s, nm.HOST) for s in rng.sample(nodes, 10) if s != nm.HOST]
    return queries


def test_routes_between_sips_skip_the_other_sips_and_match_the_reference(graph):
    """On the 6-SIP torus every SIP meets the rest only at the PCIe switch: a search between two SIPs (or the
    host and a SIP) never settles a node of a third SIP, and every path is the reference's (which searches all)."""
    router = PathRouter(graph)
    queries = _cross_sip_queries(graph, random.Random(7))
    assert _check(router, graph, queries) > 150
    assert router._dead_ends == frozenset(range(6))
    for key, search in router._trees.items():
        third = {nm.locate(n).sip for n in search.done} - {None, nm.locate(key[1]).sip}
        assert len(third) <= 1, (key[:2], sorted(third))  # at most the destination's SIP besides the source's


def test_a_sip_linked_to_another_is_not_a_dead_end(graph):
    """A link between SIP 1's and SIP 2's IO chiplets makes both SIPs touch two outside nodes: neither is skipped
    any more, and paths still match the reference (some now cross that link)."""
    from kernbench.topology.graph import Edge

    a, b = nm.io_noc(1), nm.io_noc(2)
    extra = [Edge(a, b, "pcie", 64.0, 10.0, 1.0, 1.0), Edge(b, a, "pcie", 64.0, 10.0, 1.0, 1.0)]
    g = _variant(graph, lambda edges: edges + extra)
    router = PathRouter(g)
    queries = _cross_sip_queries(g, random.Random(8))
    queries += [("all", nm.io_cpu(1), nm.io_cpu(2)), ("memory", nm.pcie_ep(2), nm.hbm_ctrl(1, 0, 0))]
    assert _check(router, g, queries) > 150
    assert router._dead_ends == frozenset({0, 3, 4, 5})
    assert a in router.control_path(nm.io_cpu(1), nm.io_cpu(2))
    assert b in router.path_with_distance("memory", nm.pcie_ep(2), nm.hbm_ctrl(1, 0, 0))[0]


# --------------------------------------------------------------------------- one router per graph and thread


def test_the_shared_router_is_one_per_graph_and_thread(small):
    import threading

    PathRouter.drop_shared(small)
    first = PathRouter.shared(small)
    assert PathRouter.shared(small) is first
    path = first.control_path(nm.HOST, "sip0.cube2.pe3.pe_cpu")
    assert PathRouter.shared(small).searched == first.searched  # the memo answers a second engine's question
    other = []
    t = threading.Thread(target=lambda: other.append(PathRouter.shared(small)))
    t.start()
    t.join()
    assert other[0] is not first and other[0].control_path(nm.HOST, "sip0.cube2.pe3.pe_cpu") == path
    PathRouter.drop_shared(small)
    fresh = PathRouter.shared(small)
    assert fresh is not first and fresh.searched == 0
    assert fresh.control_path(nm.HOST, "sip0.cube2.pe3.pe_cpu") == path
