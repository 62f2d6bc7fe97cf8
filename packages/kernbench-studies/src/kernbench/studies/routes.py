"""Closed-form costs of single transfers along a routed path, from the compiled topology's nodes and edges.

These are the pieces the analytic models are built from (ns, bytes, GB/s =
bytes per ns): the fixed part ``α`` of a transfer (node overheads,
propagation, the head serialised on every link) and the narrowest bandwidth
it streams at. They read only the topology; nothing is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.topology import TopologyGraph, path_edges


@dataclass(frozen=True)
class Route:
    """A transfer route: fixed cost ``alpha_ns`` for a head of ``head_bytes`` and the narrowest link, GB/s."""

    alpha_ns: float
    link_gbs: float
    hops: int


def write_route(graph: TopologyGraph, nodes: tuple[str, ...], head_bytes: int) -> Route:
    """A write streamed along ``nodes`` (source first): every node's overhead, every edge's propagation, and the
    head (``head_bytes``, at most one flit) serialised on every edge."""
    edges = path_edges(graph, nodes)
    alpha = sum(graph.nodes[n].overhead_ns for n in nodes) + sum(head_bytes / e.bw_gbs + e.latency_ns for e in edges)
    return Route(alpha, min(e.bw_gbs for e in edges), len(edges))


def read_route(graph: TopologyGraph, nodes: tuple[str, ...], into: str, control_bytes: int,
               head_bytes: int) -> Route:
    """A read issued by ``nodes[0]`` from ``nodes[-1]`` whose data returns along the reversed path into ``into``:
    the command leg (every node after the requester, incl. the target's access overhead, and the command on every
    edge), then the head of the data back (the nodes between, the requester, and the edge into ``into``)."""
    out = path_edges(graph, nodes)
    back = [*path_edges(graph, tuple(reversed(nodes))), graph.edge(nodes[0], into)]
    alpha = (sum(control_bytes / e.bw_gbs + e.latency_ns for e in out)
             + sum(graph.nodes[n].overhead_ns for n in nodes[1:])
             + sum(head_bytes / e.bw_gbs + e.latency_ns for e in back)
             + sum(graph.nodes[n].overhead_ns for n in nodes[:-1]) + graph.nodes[into].overhead_ns)
    return Route(alpha, min(e.bw_gbs for e in back), len(out))
