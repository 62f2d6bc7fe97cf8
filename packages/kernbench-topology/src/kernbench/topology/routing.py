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
adjacency is built on first use. Between two nodes outside cubes the search
from a source is kept and resumed: it runs only until the destination is
settled, and a later destination continues the same search, so every path
is the one the full search tree from that source gives, without searching
the whole graph for a nearby destination. A path inside a cube or between
cubes searches its corridor once per (adjacency, source, destination),
stopping at the destination; every path is memoised. One router can serve
many engines on the same graph: by default every engine on a graph shares
the one :meth:`PathRouter.shared` keeps per thread.

Two rules spare searches without changing a path (ADR 0038). A *dead-end
SIP* -- one whose every link to the rest of the graph joins the same outside
node, the tray's PCIe switch -- is left out of searches between other
nodes: it is entered only through that node and left only back to it, so
no route passes through it and nothing it could settle changes the search.
And a path found inside one cube (or one SIP) is *reused* in another where
every node the first search settled has the same in-frame out-edges, as
long as no edge leaving the frame ends within the destination's distance
(see :meth:`PathRouter._translate`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from itertools import pairwise

from kernbench.topology import naming as nm
from kernbench.topology.accel import compiled_settle
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
    """Deterministic shortest paths per routing intent, memoised.

    ``searched`` counts the paths it found by searching, ``reused`` those it translated from a congruent cube or
    SIP instead (:meth:`_translate`)."""

    __slots__ = ("_adj", "_area_keys", "_areas", "_cube_keys", "_cube_of", "_dead_ends", "_frames", "_graph",
                 "_paths", "_row_ids", "_rows", "_shape_rows", "_shapes", "_sips", "_trees", "_verified", "reused",
                 "searched")

    def __init__(self, graph: TopologyGraph) -> None:
        self._graph = graph
        self._adj: dict[str, _Adjacency] = {}
        self._cube_of: dict[str, tuple[int, int, int | None]] | None = None
        self._cube_keys: dict[str, tuple[tuple[int, int | None], tuple[int, int, int] | None]] = {}
        self._area_keys: dict[str, tuple[tuple[int, int | None], None]] = {}
        self._sips: frozenset[int] = frozenset()
        self._dead_ends: frozenset[int] = frozenset()
        self._areas: dict[frozenset[int], frozenset] = {}  # kept SIPs -> the area of a search outside cubes
        self._frames: dict[str, tuple[int | None, int | None]] = {}  # node -> (sip, cube), None above that level
        self._trees: dict[tuple, _Search] = {}
        self._paths: dict[tuple[str, str, str], tuple[tuple[str, ...], float]] = {}
        # Paths found inside one cube or one SIP, by names relative to it, for reuse in a congruent one (_translate)
        self._shapes: dict[tuple, tuple] = {}
        self._rows: dict[tuple[int, int | None], dict[str, tuple | None]] = {}  # frame -> relative node -> _row
        self._verified: dict[tuple, set[str]] = {}  # (frame, frame) -> relative nodes with equal in-frame rows
        # shape key -> (its settled nodes' relative names, their rows in the shape's frame, whether the guard holds
        # there), made on the shape's first reuse (_translate's fast test)
        self._shape_rows: dict[tuple, tuple[tuple[str, ...], frozenset[str], tuple, bool]] = {}
        self._row_ids: dict[tuple, tuple] = {}  # row -> the one equal row object every frame's table holds
        self.reused = 0  # paths translated from a congruent cube or SIP
        self.searched = 0  # paths found by a search

    @classmethod
    def shared(cls, graph: TopologyGraph) -> PathRouter:
        """The router every engine on ``graph`` shares within the calling thread (made on first use).

        A router only memoises the graph's routes, which never change, so an engine that shares one finds exactly
        the paths a fresh router would; the points of a sweep on one topology then search each route once. One
        router per thread (:meth:`TopologyGraph.memo`), because a search is not safe to resume from two threads
        at once."""
        return graph.memo(cls)  # type: ignore[return-value]

    @staticmethod
    def drop_shared(graph: TopologyGraph) -> None:
        """Forget the routers :meth:`shared` made for ``graph``: the next engine on it searches its routes afresh
        (a cold start, as a new process has; benchmarks use it)."""
        graph.forget_memos()

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
    def _adjacency(self, name: str) -> _Adjacency:
        """The adjacency of one intent (edge insertion order kept), each node's list made on first use."""
        adj = self._adj.get(name)
        if adj is None:
            adj = self._adj[name] = _Adjacency(self._graph, _EXCLUDE[name])
        return adj

    def _cube_index(self) -> dict[str, tuple[int, int, int | None]]:
        """Node id -> (sip, cube, pe or None) for every node inside a cube (built once)."""
        if self._cube_of is None:
            # One tuple object per distinct value, shared by the nodes that have it: a 16-SIP tray has 26,000
            # nodes but only a few thousand PEs, cubes and SIPs, and the collector walks every tuple kept.
            out: dict[str, tuple[int, int, int | None]] = {}
            keys: dict[str, tuple[tuple[int, int | None], tuple[int, int, int] | None]] = {}
            areas: dict[str, tuple[tuple[int, int | None], None]] = {}
            frames = self._frames
            shared: dict[tuple, tuple] = {}
            coordinates = nm.coordinates
            for n in self._graph.nodes:
                sip, cube, pe = coordinates(n)
                at = shared.get((sip, cube, pe))
                if at is None:
                    frame = shared.setdefault((sip, cube), (sip, cube))
                    # the search's area test, node -> (area, PE or None): a cube node's area is (sip, cube) and
                    # its PE is (sip, cube, pe) inside a PE; a node of a SIP outside its cubes has area
                    # (sip, None); tray nodes have none and are always searched. The area key drops the PE part
                    # (searches between nodes outside cubes).
                    cell = (sip, cube, pe)
                    key = (frame, cell if pe is not None else None) if cube is not None else (frame, None)
                    area = shared.setdefault((frame, None), (frame, None))
                    at = shared[(sip, cube, pe)] = (frame, cell, key, area)
                frame, cell, key, area = at
                frames[n] = frame
                if cube is not None:
                    out[n] = cell
                    keys[n] = key
                    areas[n] = area
                elif sip is not None:
                    keys[n] = areas[n] = area
            self._cube_of = out
            self._cube_keys, self._area_keys = keys, areas
            self._sips = frozenset(f[0] for f in frames.values() if f[0] is not None)
            self._dead_ends = self._find_dead_ends()
        return self._cube_of

    def _find_dead_ends(self) -> frozenset[int]:
        """The SIPs every link of which to the rest of the graph, in either direction, joins one and the same
        outside node (the PCIe switch of a tray): routes between other nodes never pass through them (ADR 0038)."""
        frames = self._frames
        touches: dict[int, set[str]] = {s: set() for s in self._sips}
        for e in self._graph.edges:
            a, b = frames[e.src][0], frames[e.dst][0]
            if a != b:
                if a is not None:
                    touches[a].add(e.dst)
                if b is not None:
                    touches[b].add(e.src)
        return frozenset(s for s, outside in touches.items() if len(outside) <= 1)

    def _kept_sips(self, src: str, dst: str) -> frozenset[int] | None:
        """The SIPs a search between ``src`` and ``dst`` may enter: all but the dead ends (other than the ends'
        own SIPs), or None when that is every SIP."""
        dead = self._dead_ends - {self._frames[src][0], self._frames[dst][0]}
        return self._sips - dead if dead else None

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
        cubes = self._corridor(src, dst)
        cube_of = self._cube_index()
        kept = self._kept_sips(src, dst)
        if cubes is None:
            ends = None
            if kept is None:  # every node may be searched
                tkey: tuple = (adj, src)
                keys = area = None
            else:  # every node but those of the dead-end SIPs
                keys = self._area_keys
                area = self._areas.get(kept)
                if area is None:
                    area = self._areas[kept] = frozenset(k[0] for k in keys.values() if k[0][0] in kept)
                tkey = (adj, src, area)
        else:
            # PE blocks are never relays for other PEs' traffic: only the two endpoints' PEs are searched
            ends = frozenset(c for c in (cube_of.get(src), cube_of.get(dst)) if c is not None and c[2] is not None)
            keys = self._cube_keys
            area = cubes | {(s, None) for s in (self._sips if kept is None else kept)}
            tkey = (adj, src, area, ends)
            hit = self._translate(adj, src, dst)
            if hit is not None:
                self._paths[key] = hit
                self.reused += 1
                return hit
        search = self._trees.get(tkey)
        if search is None:
            search = self._trees[tkey] = _Search(self._adjacency(adj), src, keys, area, ends,
                                                 self._frames if cubes is not None else None)
        search.settle(dst)
        dist, prev = search.dist, search.prev
        if dst not in dist:
            raise RoutingError(f"no path from {src} to {dst}")
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        result = (tuple(reversed(path)), dist[dst])
        self._paths[key] = result
        self.searched += 1
        if cubes is not None:
            self._remember(adj, src, dst, search, result)
        return result

    # ------------------------------------------------------------- reuse in congruent cubes and SIPs
    # A corridor search whose settled nodes all lie in the source's cube (or SIP) depended only on those nodes'
    # out-edges: which nodes it popped, in which order, and the adjacency order of their in-frame neighbours.
    # Edges into other cubes lie outside every same-cube or same-SIP corridor, so the search skips them before
    # pushing anything. Edges to other nodes outside cubes (the IO chiplet from a cube, the PCIe switch from a SIP)
    # push entries that were never popped before the destination: they only shift the heap's sequence numbers,
    # which keeps the order of every other entry. In another frame where each node the first search settled has
    # the same in-frame out-edges (relative destinations, kinds, weights, in order), the same search from the
    # translated source pops the translated nodes in the same order, with bit-identical distances, and finds the
    # translated path -- provided no outside entry would be popped first there. The guard checks that: each such
    # node's distance plus its shortest edge to a node outside the frame and outside cubes must exceed the
    # destination's distance. (The nodes recorded may include some settled after the destination, when a search
    # was resumed for it; that only adds checks.) The router then reuses the path instead of searching.

    def _frame_of(self, src: str, dst: str, level: str) -> tuple[int, int | None] | None:
        a, b = self._frames[src], self._frames[dst]
        if a[0] is None or a[0] != b[0]:
            return None
        if level == "cube":
            return a if a[1] is not None and a == b else None
        return (a[0], None)

    def _remember(self, adj: str, src: str, dst: str, search: _Search, result: tuple[tuple[str, ...], float]) -> None:
        """Keep a corridor search's path, by names relative to its cube or SIP, when the search settled nothing
        outside that frame; with it every node the search had settled (relative) and its distance."""
        for level, stayed in (("cube", not search.left_cube), ("sip", not search.left_sip)):
            frame = self._frame_of(src, dst, level) if stayed else None
            if frame is not None:
                n = len(_prefix(frame)) + 1
                key = (adj, level, src[n:], dst[n:])
                if key not in self._shapes:
                    dist = search.dist
                    settled = tuple((u[n:], dist[u]) for u in search.done)
                    self._shapes[key] = (frame, tuple(p[n:] for p in result[0]), result[1], settled)
                return

    def _translate(self, adj: str, src: str, dst: str) -> tuple[tuple[str, ...], float] | None:
        """The path from ``src`` to ``dst`` translated from one found in a congruent cube or SIP, or None.

        Congruent here means: every node the first search settled has, in the new frame, the same out-edges
        inside the frame (same relative destinations, kinds and weights, in the same order), checked once per
        node and pair of frames; and the guard holds for each of them."""
        if not self._shapes:
            return None
        for level in ("cube", "sip"):
            frame = self._frame_of(src, dst, level)
            if frame is None:
                continue
            head = _prefix(frame)
            n = len(head) + 1
            shape_key = (adj, level, src[n:], dst[n:])
            shape = self._shapes.get(shape_key)
            if shape is None:
                continue
            origin, goal = shape[0], shape[2]
            if self._congruent(frame, shape, self._shape_rows.get(shape_key) or self._first_reuse(shape_key, shape)):
                return tuple(f"{head}.{p}" for p in shape[1]), goal
            same = self._verified.get((origin, frame))
            if same is None:
                same = self._verified[(origin, frame)] = set()
            for rel, d in shape[3]:
                row = self._row(frame, rel)
                if row is None:
                    break
                if rel not in same:
                    if row[0] != self._row(origin, rel)[0]:  # type: ignore[index]
                        break
                    same.add(rel)
                if row[1] is not None and d + row[1] <= goal:  # the guard
                    break
            else:
                return tuple(f"{head}.{p}" for p in shape[1]), goal
        return None

    def _first_reuse(self, shape_key: tuple, shape: tuple) -> tuple[tuple[str, ...], frozenset[str], tuple, bool]:
        """A shape's settled nodes (relative names, as a tuple and a set), their rows in the shape's own frame and
        whether the guard holds for every one of them there; kept for :meth:`_congruent`."""
        origin, goal = shape[0], shape[2]
        rels = tuple(rel for rel, _ in shape[3])
        rows = tuple(self._row(origin, rel) for rel in rels)
        safe = all(row is not None and (row[1] is None or d + row[1] > goal)
                   for row, (_, d) in zip(rows, shape[3], strict=True))
        got = self._shape_rows[shape_key] = (rels, frozenset(rels), rows, safe)
        return got

    def _congruent(self, frame: tuple[int, int | None], shape: tuple, shape_rows: tuple) -> bool:
        """The fast test of :meth:`_translate`: every node the shape's search settled has in ``frame`` exactly the
        row it has in the shape's frame (in-frame out-edges and the smallest weight leaving the frame), and the
        guard held for all of them there, so it holds here too. When this is False the per-node test decides."""
        rels, wanted, origin_rows, safe = shape_rows
        if not safe:
            return False
        rows = self._rows.get(frame)
        if rows is None:
            rows = self._rows[frame] = {}
        if not rows.keys() >= wanted:
            for rel in wanted - rows.keys():
                self._row(frame, rel)
        # rows are kept as one object per distinct row (_row), so equal rows compare by identity
        return tuple(map(rows.__getitem__, rels)) == origin_rows

    def _row(self, frame: tuple[int, int | None], rel: str) -> tuple[tuple, float | None] | None:
        """One node of a cube or SIP by its name relative to it: its out-edges inside the frame, in order, as
        (relative destination, kind, routing weight), and the smallest routing weight of its edges to nodes
        outside the frame and outside every cube (None without such edges); None when the frame has no such node.
        """
        rows = self._rows.get(frame)
        if rows is None:
            rows = self._rows[frame] = {}
        got = rows.get(rel, False)
        if got is False:
            head = _prefix(frame) + "."
            node = head + rel
            if node not in self._graph.nodes:
                got = None
            else:
                n = len(head)
                edges = self._graph.out_edges(node)
                inside = tuple((e.dst[n:], e.kind, e.routing_weight_mm) for e in edges if e.dst.startswith(head))
                frames = self._frames
                ws = [e.routing_weight_mm for e in edges if not e.dst.startswith(head) and frames[e.dst][1] is None]
                got = (inside, min(ws) if ws else None)
                got = self._row_ids.setdefault(got, got)
            rows[rel] = got
        return got


class _Adjacency(dict):
    """One intent's adjacency: node -> ``[(neighbour, routing_weight_mm), ...]`` in edge insertion order, leaving
    out the excluded edge kinds; a node's list is made the first time a search reaches it."""

    __slots__ = ("excluded", "graph")

    def __init__(self, graph: TopologyGraph, excluded: frozenset[str]) -> None:
        super().__init__()
        self.graph = graph
        self.excluded = excluded

    def __missing__(self, node: str) -> list[tuple[str, float]]:
        excluded = self.excluded
        out = self[node] = [(e.dst, e.routing_weight_mm) for e in self.graph.out_edges(node) if e.kind not in excluded]
        return out


class _Search:
    """Dijkstra from one source that pauses once the node asked for is settled and resumes for the next one.

    Its steps (pop, settle, relax the neighbours) are those of :func:`_dijkstra` run to the end, in the same
    order, so ``dist``/``prev`` of every settled node are exactly those of the full search (ties by edge insertion
    order, a heap of ``(distance, sequence)``): pausing only skips work no destination asked for. With an area
    (``corridor``: a set of ``(sip, cube)`` and ``(sip, None)`` keys) it searches only the tray's nodes and the
    nodes whose key in ``cube_of`` lies in it, PE blocks only of the PEs in ``ends`` (the router's corridor and
    dead-end rules, inlined).
    """

    __slots__ = ("adj", "corridor", "cube_of", "dist", "done", "ends", "frames", "heap", "left_cube", "left_sip",
                 "origin", "prev", "seq")

    def __init__(self, adj: _Adjacency, src: str,
                 cube_of: dict[str, tuple[tuple[int, int], tuple[int, int, int] | None]] | None = None,
                 corridor: frozenset[tuple[int, int]] | None = None, ends: frozenset | None = None,
                 frames: dict[str, tuple[int | None, int | None]] | None = None) -> None:
        self.adj = adj
        self.cube_of = cube_of
        self.corridor = corridor
        self.ends = ends
        self.dist = {src: 0.0}
        self.prev: dict[str, str] = {}
        self.seq = 0
        self.heap: list[tuple[float, int, str]] = [(0.0, 0, src)]
        self.done: set[str] = set()
        # Whether a node outside the source's cube / SIP has been settled yet (tracked with ``frames`` only)
        self.frames = frames
        self.origin = frames[src] if frames is not None else (None, None)
        self.left_cube = self.origin[1] is None
        self.left_sip = self.origin[0] is None or frames is None

    def settle(self, goal: str) -> None:
        """Run the search until ``goal`` is settled (or every node it may reach is); in C when kernbench-accel is
        installed (:func:`kernbench.topology.accel.compiled_settle`: the same steps)."""
        done = self.done
        if goal in done:
            return
        fast = compiled_settle()
        if fast is not None:
            fast(self, goal)
            return
        heap, dist, prev, adj = self.heap, self.dist, self.prev, self.adj
        pop, push, inf, get = heapq.heappop, heapq.heappush, float("inf"), dist.get
        corridor, ends = self.corridor, self.ends
        where = self.cube_of.get if self.cube_of is not None else None
        seq = self.seq
        track = not self.left_sip
        frames, origin = self.frames, self.origin
        try:
            while heap:
                d, _, node = pop(heap)
                if node in done:
                    continue
                done.add(node)
                if track:
                    f = frames[node]
                    if f != origin:
                        self.left_cube = True
                        if f[0] != origin[0]:
                            self.left_sip = True
                            track = False
                for nb, w in adj[node]:
                    if where is not None:
                        c = where(nb)
                        if c is not None and (c[0] not in corridor or (c[1] is not None and c[1] not in ends)):
                            continue  # outside the search's area, or a PE other than the ends' (never with ends None)
                    nd = d + w
                    if nd < get(nb, inf):
                        dist[nb] = nd
                        prev[nb] = node
                        seq += 1
                        push(heap, (nd, seq, nb))
                if node == goal:
                    return
        finally:
            self.seq = seq


def _prefix(frame: tuple[int, int | None]) -> str:
    """The id prefix of a cube ``(sip, cube)`` or of a SIP ``(sip, None)``."""
    return nm.sip_prefix(frame[0]) if frame[1] is None else nm.cube_prefix(frame[0], frame[1])


def _dijkstra(adj: dict[str, list[tuple[str, float]]], src: str, goal: str | None = None,
              allowed: Callable[[str], bool] | None = None) -> tuple[dict[str, float], dict[str, str]]:
    """Shortest-path tree from ``src`` (stops at ``goal``; skips nodes ``allowed`` rejects). The reference the
    router's resumable search (:class:`_Search`) follows step for step; the tests compare them."""
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
