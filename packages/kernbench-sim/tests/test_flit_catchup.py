"""Flit catch-up after queueing (ADR 0004): a packet that waits for a wire and then travels on.

The graphs here are hand-built chains, so every bandwidth, latency and overhead is chosen by the
test, and transfers are injected with :meth:`GraphEngine.send` at exact times. A probe terminal
records each packet's head and tail arrival and its flit spacing. Units: ns, bytes, GB/s (= bytes/ns).

Derivation, from the ADR's rules only. A packet of ``m`` flits of ``F`` bytes, the last one ``l``
bytes. Wire ``i`` has bandwidth ``b_i``, flit time ``tau_i = F / b_i`` and latency ``L_i``, and
its feeding node has overhead ``o_i``. The source's overhead is not charged: a transfer is ready
for wire 0 at the ``t_start`` given to ``send``. ``d_-1`` is the spacing the flits have at the
source: 0 when all are there at once, or the pacing given in ``ready``. At wire ``i``:

* the head reaches the feeding node at ``H_i`` and is ready at ``R_i = H_i + o_i`` (``R_0 = t_start``);
* the head leaves at ``S_i = max(R_i, free_i)``; it waited ``W_i = S_i - R_i``;
* the flits were buffered while it waited, so ``d_i = max(d_{i-1} - W_i / (m - 1), tau_i)``;
* the tail leaves at ``E_i = S_i + (m - 1) d_i + l / b_i``, and ``free_i`` becomes ``E_i``;
* the head reaches the next node at ``H_{i+1} = S_i + tau_i + L_i``, the tail at ``E_i + L_i``.

Consequence: if ``d_{i-1} - W_i / (m - 1) >= tau_i`` (partial catch-up), then
``E_i = R_i + (m - 1) d_{i-1} + l / b_i``. The tail leaves when it would have without the wait,
so the queue costs the tail nothing. Otherwise (full catch-up) the packet leaves at wire speed
and the tail is late by ``W_i - (m - 1) (d_{i-1} - tau_i)``.

In the chains below every packet is 4096 B, so ``m = 16`` and ``l = F = 256`` B. Wires are
256 GB/s (``tau = 1`` ns), 128 GB/s (2 ns) or 512 GB/s (0.5 ns). Each wire has ``L = 0.5`` ns
latency and each router ``o = 2`` ns overhead.
"""

from __future__ import annotations

import itertools

import pytest

from kernbench.sim import Component, ComponentRegistry, GraphEngine
from kernbench.sim.engine import Request
from kernbench.topology.graph import Edge, Node, TopologyGraph

F = 256  # flit bytes
PKT = 4096  # packet bytes
M = PKT // F  # flits per packet
L = 0.5  # every wire's latency, ns
OVH = 2.0  # every router's overhead, ns


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-9)


class Probe(Component):
    """A terminal that records ``(transfer, packet index, head, tail, spacing)`` of every packet
    that lands. The transfer is done at the tail of its last packet, with no terminal overhead."""

    __slots__ = ("log",)

    def __init__(self, engine, node):
        super().__init__(engine, node)
        self.log = []

    def on_packet(self, pkt, t_head):
        self.log.append((pkt.transfer, pkt.index, t_head, pkt.t_tail, pkt.delta))
        self.engine.landed(pkt, pkt.t_tail)


@pytest.fixture
def build(small_graph, test_impls):
    """``build(links)`` -> an engine on a graph made only of ``links``, a list of ``(src, dst, bw)``.
    Node names starting with ``s`` are sources (``pe_dma``, no overhead charged), ``d`` is the probe
    terminal (``sram`` type, overhead 0), and all other nodes are routers with overhead ``OVH``."""

    def make(links):
        names = {n for a, b, _ in links for n in (a, b)}
        nodes = {}
        for n in sorted(names):
            kind = "sram" if n == "d" else "pe_dma" if n.startswith("s") else "router"
            nodes[n] = Node(n, kind, 0.0, 0.0, {"overhead_ns": OVH if kind == "router" else 0.0})
        edges = [Edge(a, b, "test", float(bw), L, 1.0, 1.0) for a, b, bw in links]
        graph = TopologyGraph(small_graph.spec, small_graph.mesh, None, nodes, edges, {})
        assert (graph.spec.fabric.flit_bytes, graph.spec.fabric.packet_bytes) == (F, PKT)
        reg = ComponentRegistry(test_impls).replace("sram", Probe)
        return GraphEngine(graph, reg)

    return make


def send(eng, path, nbytes, t_start, pace=None):
    """Inject ``nbytes`` along ``path`` at ``t_start``. With ``pace`` (ns per flit), each packet's
    flits become available at the source that far apart, as a paced memory reply's would.
    Returns ``(transfer, request, done)``; ``done`` receives the completion time."""
    req = Request(0, None, t_start, eng.env.event())
    done = []
    ready = None if pace is None else [(t_start, pace)] * -(-nbytes // PKT)
    tr = eng.send(req, eng.route(tuple(path)), nbytes, kind="write", addr=0, t_start=t_start,
                  on_done=lambda _tr, t: done.append(t), ready=ready)
    return tr, req, done


def arrivals(eng, tr):
    """``[(index, head, tail, spacing)]`` of ``tr``'s packets at the probe, in arrival order."""
    return [(i, h, t, d) for x, i, h, t, d in eng.components["d"].log if x is tr]


def hop_starts(req):
    """When the first packet's head started onto each wire (the trace's ``t_out`` per node)."""
    return [t_out for _, _, _, t_out in req.hops[:-1]]


# ---------------------------------------------------------------------------------- (1) first hop, equal bandwidth


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize(("pace", "d_after"), [
    (None, 1.0),  # all flits at the source: the packet leaves at wire speed anyway
    (1.5, 1.0),  # full catch-up: 1.5 - 15/15 = 0.5 < tau, so tau
    (2.0, 1.0),  # exactly caught up: 2 - 1 = 1 = tau
    (3.0, 2.0),  # partial catch-up: 3 - 1 = 2 > tau
    (5.0, 4.0),  # partial catch-up: 5 - 1 = 4
])
def test_packet_queued_at_the_first_hop_catches_up_over_k_equal_hops(build, k, pace, d_after):
    """Wires s -> r1 -> ... -> rk -> d, all 256 GB/s (tau = 1 ns), so k + 1 wires. P (4096 B) is
    injected at 0 and holds wire 0 until E_0(P) = 15 * 1 + 1 = 16. Q (4096 B, flits paced ``pace``
    ns apart at the source) is ready at 1 and waits W = 15 ns, so it leaves at S_0 = 16 with
    spacing d = max(pace - 15/15, 1).

    P's head starts on wire i at S_i(P) = i (1 + L + o) and its tail frees the wire at S_i(P) + 16.
    Q's head reaches the router feeding wire i at 16 + i (1 + L + o) - o. It is ready exactly when
    P's tail has gone, so Q never waits again and keeps its spacing d:
      S_i(Q) = 16 + i (1 + L + o),   E_i(Q) = S_i(Q) + 15 d + 1,
      head at d = S_k(Q) + 1 + L,    tail at d = S_k(Q) + 15 d + 1 + L."""
    eng = build([("s", "r1", 256)] + [(f"r{i}", f"r{i + 1}", 256) for i in range(1, k)] + [(f"r{k}", "d", 256)])
    path = ["s", *(f"r{i}" for i in range(1, k + 1)), "d"]
    _, p_req, p_done = send(eng, path, PKT, 0.0)
    q, q_req, q_done = send(eng, path, PKT, 1.0, pace=pace)
    eng.run()

    step = 1 + L + OVH
    assert hop_starts(p_req) == [approx(i * step) for i in range(k + 1)]
    assert p_done == [approx(k * step + 16 + L)]  # P alone: unaffected by Q

    assert q_req.hops[0][2:] == (approx(1.0), approx(16.0))  # ready at 1, starts at 16: waited 15 ns
    assert hop_starts(q_req) == [approx(16 + i * step) for i in range(k + 1)]
    s_k = 16 + k * step
    [(_, head, tail, spacing)] = arrivals(eng, q)
    assert spacing == approx(d_after)
    assert head == approx(s_k + 1 + L)
    assert tail == approx(s_k + 15 * d_after + 1 + L)
    assert q_done == [approx(tail)]
    # the tail on every hop: Q is the last packet on each wire, so the wire is free when Q's tail has left
    for i, (a, b) in enumerate(itertools.pairwise(path)):
        assert eng.wires[(a, b)].free_at == approx(16 + i * step + 15 * d_after + 1)
    assert eng.wires[("s", "r1")].max_wait_ns == approx(15.0)
    assert all(eng.wires[(a, b)].max_wait_ns < 1e-9 for a, b in itertools.pairwise(path[1:]))


# ---------------------------------------------------------------------------------- (2) unequal bandwidths


@pytest.mark.parametrize(("pace", "d_slow"), [
    (None, 2.0),  # leaves wire 0 at 1 ns/flit; the 128 GB/s wire spaces it to 2
    (3.0, 2.0),  # 3 -> 2 after wire 0's wait; the second wait would allow 2 - 16/15, but tau = 2
    (5.0, 44 / 15),  # 5 -> 4 after wire 0; 4 - 16/15 = 44/15 > 2: the pacing still dominates
])
def test_tail_is_bounded_by_the_slow_wire_after_the_queue(build, pace, d_slow):
    """s -(256)-> a -(128)-> b -(512)-> d: a slow hop after the queueing point and a fast hop
    after that. P (4096 B, at 0, unpaced):
      wire 0: S = 0, E = 16; wire 1: S = 1 + L + o = 3.5, d = 2, E = 3.5 + 30 + 2 = 35.5;
      wire 2: S = 3.5 + 2 + L + o = 8, d = max(2, 0.5) = 2, E = 8 + 30 + 0.5 = 38.5.
    Q (4096 B, ready at 1, flits ``pace`` ns apart):
      wire 0: W = 15, S = 16, d0 = max(pace - 1, 1), head at a at 16 + 1 + L = 17.5;
      wire 1: R = 19.5, P holds it until 35.5: W = 16, S = 35.5, d = max(d0 - 16/15, 2),
              E = 35.5 + 15 d + 2, head at b at 35.5 + 2 + L = 38;
      wire 2: R = 40 > 38.5, no wait, S = 40, spacing stays d (the 0.5 ns flit time does not undo it),
              E = 40 + 15 d + 0.5; head at d at 40 + 0.5 + L = 41, tail at 41 + 15 d.
    Unpaced, the tail trails the head by 15 x 2 ns, the slowest wire's flit time, not 15 x 0.5."""
    eng = build([("s", "a", 256), ("a", "b", 128), ("b", "d", 512)])
    path = ["s", "a", "b", "d"]
    p, p_req, _ = send(eng, path, PKT, 0.0)
    q, q_req, _ = send(eng, path, PKT, 1.0, pace=pace)
    eng.run()

    assert hop_starts(p_req) == [approx(0.0), approx(3.5), approx(8.0)]
    [(_, p_head, p_tail, p_d)] = arrivals(eng, p)
    assert (p_head, p_tail, p_d) == (approx(9.0), approx(39.0), approx(2.0))

    assert hop_starts(q_req) == [approx(16.0), approx(35.5), approx(40.0)]
    assert eng.wires[("s", "a")].max_wait_ns == approx(15.0)
    assert eng.wires[("a", "b")].max_wait_ns == approx(16.0)
    assert eng.wires[("b", "d")].max_wait_ns == 0.0
    assert eng.wires[("a", "b")].free_at == approx(35.5 + 15 * d_slow + 2)
    assert eng.wires[("b", "d")].free_at == approx(40 + 15 * d_slow + 0.5)
    [(_, head, tail, spacing)] = arrivals(eng, q)
    assert spacing == approx(d_slow)
    assert head == approx(41.0)
    assert tail == approx(41 + 15 * d_slow)
    if pace is None:
        assert tail - head == approx((M - 1) * F / 128)


# ---------------------------------------------------------------------------------- (3) queue at a middle hop


@pytest.mark.parametrize(("t_p", "wait", "d_after"), [
    (0.0, 11.5, 37 / 30),  # partial: 2 - 11.5/15
    (2.0, 13.5, 1.1),  # partial: 2 - 13.5/15
    (4.0, 15.5, 1.0),  # full: 2 - 15.5/15 < tau = 1
])
def test_packet_queued_at_a_middle_hop_catches_up(build, t_p, wait, d_after):
    """Q runs s1 -(128)-> a -(256)-> b -(256)-> c -(256)-> d; P runs s2 -(256)-> b -> c -> d.
    Q alone (injected at 0): wire s1-a S = 0, d = 2, head at a at 2.5; wire a-b S = 4.5, d = 2, head at
    b at 6; ready for b-c at 8; lone tail at d: b-c E = 8 + 30 + 1 = 39, c-d S = 11.5, E = 42.5, tail 43.
    P (unpaced, injected at ``t_p``) is ready for b-c at t_p + 1 + L + o = t_p + 3.5 < 8, so it goes
    first and holds b-c until t_p + 19.5. So Q waits at b, the third hop:
      W = t_p + 11.5, S = t_p + 19.5, d = max(2 - W/15, 1), E = S + 15 d + 1;
      c-d: ready at S + 1 + L + o = t_p + 23, which is when P's tail leaves c-d
           (P: S = t_p + 7, E = t_p + 23), so there is no second wait;
      head at d at t_p + 24.5, tail at t_p + 24.5 + 15 d.
    Partial catch-up leaves the tail where it was alone (43 ns); full catch-up cannot absorb all of
    the wait, and the tail is t_p + 39.5 > 43."""
    eng = build([("s1", "a", 128), ("a", "b", 256), ("s2", "b", 256), ("b", "c", 256), ("c", "d", 256)])
    q, q_req, q_done = send(eng, ["s1", "a", "b", "c", "d"], PKT, 0.0)
    _, p_req, p_done = send(eng, ["s2", "b", "c", "d"], PKT, t_p)
    eng.run()

    assert hop_starts(p_req) == [approx(t_p), approx(t_p + 3.5), approx(t_p + 7.0)]
    assert p_done == [approx(t_p + 23.5)]
    assert hop_starts(q_req) == [approx(0.0), approx(4.5), approx(t_p + 19.5), approx(t_p + 23.0)]
    assert eng.wires[("b", "c")].max_wait_ns == approx(wait)
    assert eng.wires[("b", "c")].free_at == approx(t_p + 19.5 + 15 * d_after + 1)
    [(_, head, tail, spacing)] = arrivals(eng, q)
    assert spacing == approx(d_after)
    assert head == approx(t_p + 24.5)
    assert tail == approx(t_p + 24.5 + 15 * d_after)
    assert q_done == [approx(tail)]
    if wait <= (M - 1) * (2 - 1):
        assert tail == approx(43.0)  # the queue cost the tail nothing
    else:
        assert tail == approx(43.0 + wait - (M - 1) * (2 - 1))


# ---------------------------------------------------------------------------------- (4) multi-packet interleaving


def test_multi_packet_transfers_interleave_in_arrival_order_and_catch_up(build):
    """A (3 x 4096 B) runs sa -(256)-> m -(256)-> n -(128)-> d, B (3 x 4096 B) runs
    sb -(128)-> m -> n -> d, both injected at 0. A source injects its next packet when the previous
    one's tail has left the first wire.
      A_i: S on sa-m = 16 i, head at m at 16 i + 1.5, ready for m-n at 16 i + 3.5.
      B_i: S on sb-m = 32 i, spacing 2, head at m at 32 i + 2.5, ready for m-n at 32 i + 4.5.
    Ready order at m: A0 3.5, B0 4.5, A1 19.5, A2 35.5, B1 36.5, B2 68.5, so the m-n order is
    A0 B0 A1 A2 B1 B2, one 16 ns slot each: slot j starts at 3.5 + 16 j. B's packets wait there
    (B0: 15, B1: 31, B2: 15 ns) and catch up fully, max(2 - W/15, 1) = 1. At n, slot j is ready
    for n-d at 7 + 16 j. n-d takes 15 x 2 + 2 = 32 ns per packet, so slot j starts at 7 + 32 j
    (it waited 16 j) with spacing 2. Head at d at 9.5 + 32 j, tail at 39.5 + 32 j.
    A lands in slots 0, 2, 3 (done at 135.5) and B in slots 1, 4, 5 (done at 199.5)."""
    eng = build([("sa", "m", 256), ("sb", "m", 128), ("m", "n", 256), ("n", "d", 128)])
    a, _, a_done = send(eng, ["sa", "m", "n", "d"], 3 * PKT, 0.0)
    b, _, b_done = send(eng, ["sb", "m", "n", "d"], 3 * PKT, 0.0)
    eng.run()

    order = [({a: "A", b: "B"}[x], i) for x, i, *_ in eng.components["d"].log]
    assert order == [("A", 0), ("B", 0), ("A", 1), ("A", 2), ("B", 1), ("B", 2)]
    for j, (_, _, head, tail, spacing) in enumerate(eng.components["d"].log):
        assert (head, tail, spacing) == (approx(9.5 + 32 * j), approx(39.5 + 32 * j), approx(2.0)), f"slot {j}"
    assert a_done == [approx(39.5 + 32 * 3)]
    assert b_done == [approx(39.5 + 32 * 5)]
    # each source injects its next packet only once the previous one has left its first wire
    assert eng.wires[("sa", "m")].max_wait_ns == 0.0 and eng.wires[("sb", "m")].max_wait_ns == 0.0
    assert eng.wires[("m", "n")].max_wait_ns == approx(31.0)
    assert eng.wires[("m", "n")].free_at == approx(3.5 + 16 * 6)
    assert eng.wires[("n", "d")].max_wait_ns == approx(16 * 5)
    assert eng.wires[("n", "d")].busy_ns == approx(6 * 32.0)
    # the m-n wire was never idle between the first head and the last tail: B's packets left it at wire speed
    assert eng.wires[("m", "n")].busy_ns == approx(6 * 16.0)
