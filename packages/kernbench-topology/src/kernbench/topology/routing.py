"""Deterministic, intent-aware path finding.

:class:`PathRouter` finds shortest paths per routing *intent* (where a
request goes is :class:`~kernbench.topology.resolver.AddressResolver`'s
job). Each intent searches its own adjacency, built once, that leaves out
the edge kinds the intent must never use:

==============  ==============================================================
intent          excluded edge kinds
==============  ==============================================================
control         none (command links are the control plane)
PE DMA          ``command``; same-cube traffic also excludes the UCIe kinds,
                so a die crossing never looks shorter than the mesh
M_CPU DMA       ``command`` and the PE pipeline (``pe_internal``,
                ``pe_to_router``, ``router_to_pe``); same-cube also UCIe
host memory     as M_CPU DMA (host traffic never enters a PE pipeline)
==============  ==============================================================

Between cubes, routes are XY: a path may only use the cubes of the
X-then-Y walk from the source cube to the destination cube (through the IO
chiplet's cube when it leaves or enters a SIP); inside that corridor
Dijkstra runs on ``routing_weight_mm``; ties resolve by edge insertion order
(a heap of ``(distance, sequence)``), so paths are deterministic. Each
adjacency is built on first use; within a cube (or outside cubes) a search
tree is computed once per (adjacency, source); a cross-cube path searches
its corridor once per (adjacency, source, destination); every path is memoised. One router can serve many
engines on the same graph.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from itertools import pairwise

from kernbench.topology import naming as nm
from kernbench.topology.errors import RoutingError
from kernbench.topology.graph import TopologyGraph

UCIE_KINDS = frozenset({"ucie_internal", "ucie_conn_to_router", "router_to_ucie_conn", "ucie_mesh",
                        "io_to_cube", "cube_to_io"})
PE_PIPELINE_KINDS = frozenset({"pe_internal", "pe_to_router", "router_to_pe"})
_EXCLUDE = {
    "all": frozenset(),
    "data": frozenset({"command"}),
    "data_local": frozenset({"command"}) | UCIE_KINDS,
    "memory": frozenset({"command"}) | PE_PIPELINE_KINDS,
    "memory_local": frozenset({"command"}) | PE_PIPELINE_KINDS | UCIE_KINDS,
}


def excluded_kinds() -> dict[str, frozenset[str]]:
    """The edge kinds each routing adjacency leaves out (the module table), keyed by adjacency name: ``all``
    (control), ``data``/``data_local`` (PE DMA across/within a cube), ``memory``/``memory_local`` (M_CPU DMA and
    host memory)."""
    return dict(_EXCLUDE)


class PathRouter:
    """Deterministic shortest paths per routing intent, memoised."""

    __slots__ = ("_adj", "_cube_of", "_graph", "_paths", "_trees")

    def __init__(self, graph: TopologyGraph) -> None:
        self._graph = graph
        self._adj: dict[str, dict[str, list[tuple[str, float]]]] = {}
        self._cube_of: dict[str, tuple[int, int, int | None]] | None = None
        self._trees: dict[tuple[str, str], tuple[dict[str, float], dict[str, str]]] = {}
        self._paths: dict[tuple[str, str, str], tuple[tuple[str, ...], float]] = {}

    # ------------------------------------------------------------- intents
    def pe_dma_path(self, src_dma: str, dst: str) -> tuple[str, ...]:
        """Path of a PE-initiated DMA from a ``pe_dma`` node to ``dst``."""
        return self._path("data_local" if nm.same_cube(src_dma, dst) else "data", src_dma, dst)[0]

    def mcpu_dma_path(self, m_cpu: str, dst: str) -> tuple[str, ...]:
        """Path of an M_CPU-initiated DMA; never enters a PE pipeline."""
        return self._path("memory_local" if nm.same_cube(m_cpu, dst) else "memory", m_cpu, dst)[0]

    def memory_path(self, src: str, dst: str) -> tuple[str, ...]:
        """Host memory path (e.g. host CPU to an HBM controller), bypassing control CPUs."""
        return self._path("memory", src, dst)[0]

    def control_path(self, src: str, dst: str) -> tuple[str, ...]:
        """Control-plane path, command links included (launches, MMU maps, acks)."""
        return self._path("all", src, dst)[0]

    def path_with_distance(self, intent: str, src: str, dst: str) -> tuple[tuple[str, ...], float]:
        """Path and its total routing weight for a raw adjacency name (see module table)."""
        if intent not in _EXCLUDE:
            raise RoutingError(f"unknown routing intent {intent!r}; known: {', '.join(_EXCLUDE)}")
        return self._path(intent, src, dst)

    # ------------------------------------------------------------- search
    def _adjacency(self, name: str) -> dict[str, list[tuple[str, float]]]:
        """The adjacency of one intent, built on first use (edge insertion order kept)."""
        adj = self._adj.get(name)
        if adj is None:
            excluded = _EXCLUDE[name]
            adj = self._adj[name] = {}
            for e in self._graph.edges:
                if e.kind not in excluded:
                    adj.setdefault(e.src, []).append((e.dst, e.routing_weight_mm))
        return adj

    def _cube_index(self) -> dict[str, tuple[int, int, int | None]]:
        """Node id -> (sip, cube, pe or None) for every node inside a cube (built once)."""
        if self._cube_of is None:
            out = {}
            for n in self._graph.nodes:
                loc = nm.locate(n)
                if loc.cube is not None:
                    out[n] = (loc.sip, loc.cube, loc.pe)
            self._cube_of = out
        return self._cube_of

    def _corridor(self, src: str, dst: str) -> frozenset[tuple[int, int]] | None:
        """The cubes an X-then-Y route may use between two nodes, or None between two nodes outside cubes.

        Within one cube the route stays in it. Between cubes of one SIP it
        moves along the cube row first, then the column. Leaving or entering a
        SIP, it runs XY to or from the cube the IO chiplet attaches to.
        """
        a, b = nm.locate(src), nm.locate(dst)
        if a.cube is None and b.cube is None:
            return None
        if a.sip == b.sip and a.cube == b.cube:
            return frozenset({(a.sip, a.cube)})
        io = self._graph.spec.sip.io.attach_cube
        if a.cube is not None and b.cube is not None and a.sip == b.sip:
            legs = [(a.sip, a.cube, b.cube)]
        else:
            legs = []
            if a.cube is not None:
                legs.append((a.sip, a.cube, io))
            if b.cube is not None:
                legs.append((b.sip, io, b.cube))
        w = self._graph.spec.sip.cube_mesh.w
        cubes = set()
        for sip, c0, c1 in legs:
            (r0, x0), (r1, x1) = divmod(c0, w), divmod(c1, w)
            step = 1 if x1 >= x0 else -1
            cubes.update((sip, r0 * w + x) for x in range(x0, x1 + step, step))
            step = 1 if r1 >= r0 else -1
            cubes.update((sip, r * w + x1) for r in range(r0, r1 + step, step))
        return frozenset(cubes)

    def _path(self, adj: str, src: str, dst: str) -> tuple[tuple[str, ...], float]:
        key = (adj, src, dst)
        hit = self._paths.get(key)
        if hit is not None:
            return hit
        for n in (src, dst):
            if n not in self._graph.nodes:
                raise RoutingError(f"node {n} not found in topology {self._graph.spec.name!r}")
        corridor = self._corridor(src, dst)
        if corridor is None:
            tree = self._trees.get((adj, src))
            if tree is None:
                tree = self._trees[(adj, src)] = _dijkstra(self._adjacency(adj), src)
        else:
            cube_of = self._cube_index()
            # PE blocks are never relays for other PEs' traffic: only the two endpoints' PEs are searched
            ends = {cube_of.get(src), cube_of.get(dst)}

            def allowed(n: str) -> bool:
                c = cube_of.get(n)
                return c is None or ((c[0], c[1]) in corridor and (c[2] is None or c in ends))

            tree = _dijkstra(self._adjacency(adj), src, dst, allowed)
        dist, prev = tree
        if dst not in dist:
            raise RoutingError(f"no path from {src} to {dst}")
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        result = (tuple(reversed(path)), dist[dst])
        self._paths[key] = result
        return result


def _dijkstra(adj: dict[str, list[tuple[str, float]]], src: str, goal: str | None = None,
              allowed: Callable[[str], bool] | None = None) -> tuple[dict[str, float], dict[str, str]]:
    """Shortest-path tree from ``src`` (stops at ``goal``; skips nodes ``allowed`` rejects)."""
    dist = {src: 0.0}
    prev: dict[str, str] = {}
    seq = 0
    heap: list[tuple[float, int, str]] = [(0.0, 0, src)]
    done: set[str] = set()
    while heap:
        d, _, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        if node == goal:
            break
        for nb, w in adj.get(node, ()):
            if allowed is not None and not allowed(nb):
                continue
            nd = d + w
            if nd < dist.get(nb, float("inf")):
                dist[nb] = nd
                prev[nb] = node
                seq += 1
                heapq.heappush(heap, (nd, seq, nb))
    return dist, prev


def path_edges(graph: TopologyGraph, path: Iterable[str]) -> list:
    """The edges along a node path, in order (raises ``no link for A → B`` if one is missing)."""
    p = list(path)
    return [graph.edge(a, b) for a, b in pairwise(p)]
