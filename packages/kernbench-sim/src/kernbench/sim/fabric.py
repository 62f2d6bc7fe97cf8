"""Wires, packets and routes: the arithmetic core of the fabric.

A payload is cut into packets of at most ``packet_bytes``; a packet is a
train of flits of ``flit_bytes``. Each directed edge is a :class:`Wire`: a
FIFO that remembers when it is next free. When a packet's head reaches the
node feeding a wire (after that node's overhead) the wire decides, in
arrival order:

* ``start = max(ready, free_at)``; ``start - ready`` is queueing delay;
* flits leave ``delta = max(delta_in, flit_bytes / bw)`` apart, where
  ``delta_in`` is the spacing the packet arrived with (a slow upstream wire
  keeps its spacing downstream). A packet that waited had its flits
  buffered, so it catches up towards wire speed;
* the wire is busy until the last flit has left; the head reaches the next
  node after one flit time plus the propagation latency.

This is wormhole pipelining at flit granularity computed arithmetically —
one scheduled event per packet per hop, not per flit — and streams that
share a wire interleave packet by packet in arrival order, each getting a
share of its bandwidth. Units: ns, bytes, GB/s (= bytes/ns).
"""

from __future__ import annotations

from kernbench.topology.graph import Edge


class Wire:
    """One directed edge's FIFO state and counters."""

    __slots__ = (
        "busy_ns",
        "bw",
        "bytes",
        "edge",
        "flit_ns",
        "free_at",
        "latency_ns",
        "max_wait_ns",
        "messages",
        "packets",
    )

    def __init__(self, edge: Edge, flit_bytes: int) -> None:
        self.edge = edge
        self.bw = edge.bw_gbs
        self.latency_ns = edge.latency_ns
        self.flit_ns = flit_bytes / edge.bw_gbs
        self.free_at = 0.0
        self.bytes = 0
        self.busy_ns = 0.0
        self.packets = 0
        self.messages = 0
        self.max_wait_ns = 0.0


class Route:
    """A resolved path: node ids, the wires between them and the component at each node."""

    __slots__ = ("comps", "hops", "nodes", "overheads", "wires")

    def __init__(self, nodes: tuple[str, ...], wires: tuple[Wire, ...], comps: tuple) -> None:
        self.nodes = nodes
        self.wires = wires
        self.comps = comps
        self.overheads = tuple(c.overhead_ns for c in comps)
        self.hops = len(wires)


class Packet:
    """One packet in flight.

    ``delta`` is the flit spacing it currently travels with (ns); ``t_head``
    and ``t_tail`` are the arrival times of its first and last flit at the
    node it last reached.
    """

    __slots__ = (
        "delta",
        "hop",
        "index",
        "nbytes",
        "nflits",
        "offset",
        "route",
        "t_head",
        "t_tail",
        "transfer",
    )

    def __init__(self, transfer: Transfer, index: int, nbytes: int, nflits: int, offset: int) -> None:
        self.transfer = transfer
        self.route = transfer.route
        self.hop = 0
        self.index = index
        self.nbytes = nbytes
        self.nflits = nflits
        self.offset = offset
        self.delta = 0.0
        self.t_head = 0.0
        self.t_tail = 0.0


class Transfer:
    """A payload moving along one route: its packets and where it stands.

    ``ready`` optionally gives, per packet, the time its first flit is
    available at the source and the spacing of its flits there (a memory
    read paces its response); by default everything is ready at once.
    ``on_packet`` is called by the terminal component as each packet lands.
    """

    __slots__ = (
        "addr",
        "kind",
        "landed",
        "nbytes",
        "on_done",
        "on_reply",
        "packets",
        "payload",
        "pitch",
        "read_nbytes",
        "ready",
        "reply_nodes",
        "request",
        "route",
        "row_bytes",
        "t_done",
        "t_first",
    )

    def __init__(self, request, route: Route, nbytes: int, kind: str, addr: int, on_done) -> None:
        self.request = request
        self.route = route
        self.nbytes = nbytes
        self.kind = kind
        self.addr = addr
        self.packets: list[Packet] = []
        self.payload: object = None
        self.row_bytes = 0  # a 2-D transfer: payload rows of row_bytes whose addresses are pitch apart
        self.pitch = 0
        self.on_reply = None
        self.reply_nodes: tuple[str, ...] | None = None
        self.ready: list[tuple[float, float]] | None = None
        self.landed = 0
        self.t_first = -1.0
        self.t_done = 0.0
        self.read_nbytes = 0
        self.on_done = on_done


def cross(wire: Wire, pkt: Packet, ready: float) -> float:
    """Put data packet ``pkt`` on ``wire``, its head ready to enter at ``ready`` (ns): the wire formula.

    Applies the rules of the module docstring: the packet starts when both it
    and the wire are ready, its flits leave ``max(delta_in, flit_ns)`` apart
    (a packet that queued catches up towards wire speed), and it holds the
    wire until its last flit has left (serialisation ``nbytes / bw``). Sets
    ``pkt.delta``, ``pkt.t_head`` and ``pkt.t_tail`` (arrival of its first and
    last flit at the far node: one propagation latency after leaving) and
    the wire's counters (a transfer's first packet counts one message);
    returns the time the head started to cross. The
    wire is free again at ``wire.free_at``. A control message
    (:func:`cross_control`) takes no bandwidth.
    """
    m = pkt.nflits
    flit_ns = wire.flit_ns
    free = wire.free_at
    if free > ready:
        start = free
        wait = free - ready
        if wait > wire.max_wait_ns:
            wire.max_wait_ns = wait
        d_in = pkt.delta - wait / (m - 1) if m > 1 else 0.0
    else:
        start = ready
        d_in = pkt.delta
    delta = d_in if d_in > flit_ns else flit_ns
    nbytes = pkt.nbytes
    serial = nbytes / wire.bw
    if m > 1:
        end = start + (m - 1) * (delta - flit_ns) + serial
        head = start + flit_ns
    else:
        end = head = start + serial
    wire.free_at = end
    wire.busy_ns += end - start
    wire.bytes += nbytes
    wire.packets += 1
    if pkt.index == 0:
        wire.messages += 1
    lat = wire.latency_ns
    pkt.delta = delta
    pkt.t_head = head + lat
    pkt.t_tail = end + lat
    return start


def cross_control(wire: Wire, pkt: Packet, ready: float) -> None:
    """Send control message ``pkt`` over ``wire`` at ``ready`` (ns): a sideband that pays the propagation latency
    and occupies no bandwidth; it counts as a message, not a packet."""
    pkt.t_head = pkt.t_tail = ready + wire.latency_ns
    wire.messages += 1


def cross_flow(wire: Wire, nbytes: int, packets: int) -> None:
    """Count a flow of ``nbytes`` (``packets`` as the packet model would cut it) on ``wire``: flow fidelity's
    counters (:mod:`kernbench.sim.flow`): bytes, packets, one message and ``nbytes / bw`` of busy time; a flow
    shares the wire rather than queueing for it, so ``max_wait_ns`` is untouched."""
    wire.bytes += nbytes
    wire.packets += packets
    wire.messages += 1
    wire.busy_ns += nbytes / wire.bw


def split_packets(transfer: Transfer, packet_bytes: int, flit_bytes: int) -> list[Packet]:
    """Cut a transfer's payload into packets (last one may be short; a control transfer has one empty packet)."""
    if transfer.nbytes == 0:
        return [Packet(transfer, 0, 0, 0, 0)]
    out = []
    offset, index, left = 0, 0, transfer.nbytes
    while left > 0:
        n = packet_bytes if left > packet_bytes else left
        out.append(Packet(transfer, index, n, -(-n // flit_bytes), offset))
        offset += n
        left -= n
        index += 1
    return out
