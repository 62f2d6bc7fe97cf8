"""The compiled, immutable hardware graph and its view projections."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kernbench.topology.errors import TopologyError
from kernbench.topology.mesh_gen import CubeMesh
from kernbench.topology.spec import TopologySpec


@dataclass(frozen=True, slots=True)
class Node:
    """A modeled component instance: id, type, die position (mm) and attributes.

    ``attrs`` holds the per-node parameters components read, e.g.
    ``overhead_ns`` (fixed processing delay, ns).
    """

    id: str
    type: str
    x_mm: float
    y_mm: float
    attrs: Mapping[str, object] = field(default_factory=dict)

    @property
    def overhead_ns(self) -> float:
        """The node's fixed per-message processing delay, ns."""
        return float(self.attrs.get("overhead_ns", 0.0))


@dataclass(frozen=True, slots=True)
class Edge:
    """A directed link: bandwidth (GB/s = bytes/ns), propagation (ns), length (mm).

    ``routing_weight_mm`` is the Dijkstra weight; it differs from
    ``distance_mm`` only where a link declares an explicit weight (UCIe).
    """

    src: str
    dst: str
    kind: str
    bw_gbs: float
    latency_ns: float
    distance_mm: float
    routing_weight_mm: float


@dataclass(frozen=True, slots=True)
class ViewNode:
    """A box in a diagram view: position and size in the graph's mm coordinates."""

    id: str
    label: str
    kind: str
    x_mm: float
    y_mm: float
    w_mm: float
    h_mm: float


@dataclass(frozen=True, slots=True)
class ViewEdge:
    """A link in a diagram view; ``count`` parallel graph edges merged into one."""

    src: str
    dst: str
    kind: str
    bw_gbs: float
    distance_mm: float
    count: int = 1


@dataclass(frozen=True)
class View:
    """One abstraction level of the graph (system, sip, cube or pe)."""

    name: str
    title: str
    nodes: tuple[ViewNode, ...]
    edges: tuple[ViewEdge, ...]


class TopologyGraph:
    """The compiled topology: nodes, directed edges, four views and the cube mesh.

    Immutable after construction; one instance can back many engines.
    """

    __slots__ = ("_edge_map", "_edge_pos", "_memos", "_out", "_views", "edges", "mesh", "mesh_path", "nodes",
                 "spec")

    def __init__(self, spec: TopologySpec, mesh: CubeMesh, mesh_path: Path | None,
                 nodes: dict[str, Node], edges: list[Edge],
                 views: dict[str, View] | Callable[[], dict[str, View]]) -> None:
        self.spec = spec
        self.mesh = mesh
        self.mesh_path = mesh_path
        self.nodes: Mapping[str, Node] = MappingProxyType(nodes)
        self.edges: tuple[Edge, ...] = tuple(edges)
        # the diagram views, or the function that draws them on first use (a simulation never reads them)
        self._views: Mapping[str, View] | Callable[[], dict[str, View]] = \
            MappingProxyType(views) if isinstance(views, dict) else views
        self._edge_map = {(e.src, e.dst): e for e in self.edges}
        self._edge_pos: dict[tuple[str, str], int] | None = None  # made by the first edge_index call
        out: dict[str, list[Edge]] = {n: [] for n in nodes}
        for e in self.edges:
            out[e.src].append(e)
        self._out = {k: tuple(v) for k, v in out.items()}
        self._memos: dict[tuple[int, object], object] = {}  # (thread id, maker) -> what memo() made

    def edge(self, src: str, dst: str) -> Edge:
        """The directed edge ``src -> dst``; :class:`TopologyError` if absent."""
        try:
            return self._edge_map[(src, dst)]
        except KeyError:
            raise TopologyError(f"no link for {src} → {dst}") from None

    def edge_index(self, src: str, dst: str) -> int:
        """Position of the edge ``src -> dst`` in :attr:`edges`."""
        pos = self._edge_pos
        if pos is None:
            pos = self._edge_pos = {(e.src, e.dst): i for i, e in enumerate(self.edges)}
        return pos[(src, dst)]

    def memo(self, make: Callable[[TopologyGraph], object]) -> object:
        """``make(self)``, made once per calling thread and kept with the graph: derived data such as the route
        memo every engine on the graph shares (:meth:`~kernbench.topology.routing.PathRouter.shared`), so the
        graph stays what it was in all it models. Per thread, because such memos are not thread-safe."""
        key = (threading.get_ident(), make)
        got = self._memos.get(key)
        if got is None:
            got = self._memos[key] = make(self)
        return got

    def forget_memos(self) -> None:
        """Drop everything :meth:`memo` kept (the next engine starts cold, as in a new process)."""
        self._memos.clear()

    @property
    def views(self) -> Mapping[str, View]:
        """The diagram views by name (system, SIP, cube, PE), drawn on first use."""
        views = self._views
        if callable(views):
            views = self._views = MappingProxyType(views())
        return views

    def has_edge(self, src: str, dst: str) -> bool:
        """Whether the directed edge ``src -> dst`` exists."""
        return (src, dst) in self._edge_map

    def out_edges(self, node_id: str) -> tuple[Edge, ...]:
        """Edges leaving a node, in insertion order."""
        return self._out[node_id]

    def node(self, node_id: str) -> Node:
        """The node with this id; :class:`TopologyError` if absent."""
        try:
            return self.nodes[node_id]
        except KeyError:
            raise TopologyError(f"node {node_id} is not in topology {self.spec.name!r}") from None

    def edge_kind_counts(self) -> dict[str, int]:
        """Number of directed edges per kind, sorted by kind."""
        counts: dict[str, int] = {}
        for e in self.edges:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return dict(sorted(counts.items()))

    def nodes_of_type(self, node_type: str) -> list[str]:
        """Ids of every node of one type, in insertion order."""
        return [n.id for n in self.nodes.values() if n.type == node_type]
