"""Timing of the fabric model (see the ``kernbench.sim.fabric`` docstring), checked against hand sums.

Every expected number is assembled from the compiled graph's *parameters* — node
``overhead_ns`` and edge ``bw_gbs`` / ``latency_ns`` — with the formulas the fabric
docstring states, never by running the engine for the expected value:

* a packet's head pays each node's overhead, then one flit time (``flit / bw``; the whole
  packet's ``nbytes / bw`` if it is a single flit) plus the propagation latency per wire;
* its flits leave ``max(delta_in, flit / bw)`` apart, so an unloaded packet of ``m`` flits
  trails its head by ``(m - 1) * flit / min(bw)`` at the end of the path;
* the test terminal (conftest) lands a write ``overhead_ns`` after its last flit.

Units: ns, bytes, GB/s (= bytes/ns).
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.sim import GraphEngine, MemoryReadMsg, MemoryWriteMsg, PeDmaReadMsg, PeDmaWriteMsg
from kernbench.topology import PhysAddr

SRAM0 = PhysAddr(0, 0, "sram", 0)


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-9)


def edges_of(graph, path):
    return [graph.edge(a, b) for a, b in itertools.pairwise(path)]


def overheads(graph, nodes):
    return sum(graph.nodes[n].overhead_ns for n in nodes)


def unloaded_transit(graph, path, nbytes, flit):
    """Propagation + serialisation of one packet alone on ``path`` (no node overheads): head
    time per wire, then the tail trailing at the slowest wire's flit spacing."""
    es = edges_of(graph, path)
    lat = sum(e.latency_ns for e in es)
    if nbytes <= flit:
        return lat + sum(nbytes / e.bw_gbs for e in es)
    m = math.ceil(nbytes / flit)
    last = nbytes - (m - 1) * flit
    return (lat + sum(flit / e.bw_gbs for e in es[:-1]) + (m - 1) * flit / min(e.bw_gbs for e in es)
            + last / es[-1].bw_gbs)


def write_hand_latency(graph, path, nbytes, flit):
    """Source, intermediate and terminal overheads plus the unloaded transit."""
    return overheads(graph, path) + unloaded_transit(graph, path, nbytes, flit)


def run_one(engine, msg):
    req = engine.submit(msg)
    engine.run()
    return req


# ---------------------------------------------------------------------------------- single requests


@pytest.mark.parametrize("nbytes", [1, 64, 200, 256])
def test_single_flit_host_write_is_overheads_plus_latency_plus_serialisation(make_engine, small_graph, resolver,
                                                                              nbytes):
    eng = make_engine()
    req = run_one(eng, MemoryWriteMsg(resolver.hbm_addr(0, 0, 0), nbytes))
    path = req.legs[0]
    assert path[0] == "tray.host_cpu" and path[-1] == "sip0.cube0.hbm_ctrl.pe0"
    es = edges_of(small_graph, path)
    # written out term by term, as the brief states it
    src = small_graph.nodes[path[0]].overhead_ns
    mid_and_terminal = sum(small_graph.nodes[n].overhead_ns for n in path[1:])
    expected = src + mid_and_terminal + sum(e.latency_ns for e in es) + sum(nbytes / e.bw_gbs for e in es)
    assert req.latency_ns == approx(expected)
    assert req.t_submit == 0.0 and req.t_end == approx(expected)


def test_hand_sum_of_the_pe_to_sram_path_literal(make_engine, small_graph):
    """The same rule with the default spec's numbers spelled out: PE DMA 2 ns, three routers 2 ns
    each, SRAM 5 ns; 64 B over three 256 GB/s wires and one 128 GB/s wire."""
    eng = make_engine()
    req = run_one(eng, PeDmaWriteMsg(0, 0, 0, SRAM0, 64))
    path = req.legs[0]
    assert [small_graph.nodes[n].type for n in path] == ["pe_dma", "router", "router", "router", "sram"]
    prop = sum(e.latency_ns for e in edges_of(small_graph, path))
    assert req.latency_ns == approx(2 + 3 * 2 + 5 + 3 * 64 / 256 + 64 / 128 + prop)


@pytest.mark.parametrize("nbytes", [512, 4096])
def test_multi_flit_packet_trails_its_head_at_the_slowest_wire(make_engine, small_graph, nbytes):
    """A whole number of flits: sum(flit / bw) for the head plus (nbytes - flit) / min(bw)."""
    flit = small_graph.spec.fabric.flit_bytes
    assert nbytes % flit == 0 and nbytes <= small_graph.spec.fabric.packet_bytes
    eng = make_engine()
    req = run_one(eng, MemoryWriteMsg(SRAM0, nbytes))
    es = edges_of(small_graph, req.legs[0])
    bws = {e.bw_gbs for e in es}
    assert len(bws) >= 3  # 768 (PCIe), 512 (IO/UCIe), 256 (NoC), 128 (SRAM link): a real mixture
    expected = (overheads(small_graph, req.legs[0]) + sum(e.latency_ns for e in es)
                + sum(flit / e.bw_gbs for e in es) + (nbytes - flit) / min(bws))
    assert req.latency_ns == approx(expected)


def test_multi_flit_packet_with_a_short_last_flit(make_engine, small_graph):
    """1000 B = 3 full flits + 232 B: the last flit serialises in 232 / bw of the final wire."""
    flit = small_graph.spec.fabric.flit_bytes
    eng = make_engine()
    req = run_one(eng, PeDmaWriteMsg(0, 0, 0, SRAM0, 1000))
    es = edges_of(small_graph, req.legs[0])
    expected = (overheads(small_graph, req.legs[0]) + sum(e.latency_ns for e in es)
                + sum(flit / e.bw_gbs for e in es[:-1]) + 3 * flit / 128.0 + 232 / 128.0)
    assert es[-1].bw_gbs == 128.0 and min(e.bw_gbs for e in es) == 128.0
    assert req.latency_ns == approx(expected)


@settings(max_examples=40, deadline=None)
@given(nbytes=st.integers(min_value=1, max_value=4096))
def test_any_single_packet_write_matches_the_hand_formula(small_graph, test_impls, nbytes):
    from kernbench.sim import ComponentRegistry

    eng = GraphEngine(small_graph, ComponentRegistry(test_impls))
    req = run_one(eng, MemoryWriteMsg(SRAM0, nbytes))
    assert req.latency_ns == approx(write_hand_latency(small_graph, req.legs[0], nbytes, 256))


def test_multi_packet_write_alone_is_bound_by_the_slowest_wire(make_engine, small_graph):
    """Four 4 KiB packets leave the PE every 4096/256 = 16 ns but drain into the SRAM link at
    4096/128 = 32 ns each: the last lands 3 x 32 ns after a lone first packet would."""
    eng = make_engine()
    req = run_one(eng, PeDmaWriteMsg(0, 0, 0, SRAM0, 4 * 4096))
    one_packet = write_hand_latency(small_graph, req.legs[0], 4096, 256)
    assert req.latency_ns == approx(one_packet + 3 * 4096 / 128)


@pytest.mark.parametrize("nbytes", [64, 4096])
def test_read_is_command_there_then_data_back(make_engine, small_graph, nbytes):
    """Command (control_bytes) out with every overhead on the way, the terminal's overhead, then the
    data back along the reversed path paying only the intermediate overheads."""
    ctrl = small_graph.spec.fabric.control_bytes
    assert ctrl == 64
    eng = make_engine()
    req = run_one(eng, PeDmaReadMsg(0, 0, 0, SRAM0, nbytes))
    fwd, back = req.legs
    assert back == tuple(reversed(fwd))
    expected = (overheads(small_graph, fwd) + unloaded_transit(small_graph, fwd, ctrl, 256)
                + overheads(small_graph, back[1:-1]) + unloaded_transit(small_graph, back, nbytes, 256))
    assert req.latency_ns == approx(expected)


def test_multi_packet_read_reply_drains_at_the_terminal_link(make_engine, small_graph):
    """Three reply packets all ready at once: they queue on the 128 GB/s SRAM->router wire, 32 ns apart."""
    eng = make_engine()
    req = run_one(eng, MemoryReadMsg(SRAM0, 3 * 4096))
    fwd, back = req.legs
    assert small_graph.edge(back[0], back[1]).bw_gbs == 128.0
    expected = (overheads(small_graph, fwd) + unloaded_transit(small_graph, fwd, 64, 256)
                + overheads(small_graph, back[1:-1]) + unloaded_transit(small_graph, back, 4096, 256) + 2 * 32.0)
    assert req.latency_ns == approx(expected)


def test_trace_hops_of_an_unloaded_write(make_engine, small_graph):
    """Per hop: a node holds the head for its overhead; the next node sees it one flit time plus
    the wire latency later."""
    eng = make_engine()
    req = run_one(eng, PeDmaWriteMsg(0, 0, 0, SRAM0, 4096))
    path = req.legs[0]
    assert [n for _, n, _, _ in req.hops] == list(path)
    assert {leg for leg, _, _, _ in req.hops} == {"write"}
    _, _, t_in0, t_out0 = req.hops[0]
    assert t_in0 == approx(small_graph.nodes[path[0]].overhead_ns) and t_out0 == approx(t_in0)
    for h in range(1, len(path) - 1):
        _, node, t_in, t_out = req.hops[h]
        assert t_out - t_in == approx(small_graph.nodes[node].overhead_ns)
    for h in range(len(path) - 1):
        e = small_graph.edge(path[h], path[h + 1])
        assert req.hops[h + 1][2] == approx(req.hops[h][3] + 256 / e.bw_gbs + e.latency_ns)
    _, _, t_in_last, t_out_last = req.hops[-1]
    assert t_in_last == t_out_last
    # the write lands when the last flit is in plus the SRAM's overhead, after the head arrived
    assert req.t_end == approx(t_in_last + 15 * 256 / 128 + small_graph.nodes[path[-1]].overhead_ns)


# ---------------------------------------------------------------------------------- sharing a wire


def _wire(stats, src, dst):
    hits = [s for s in stats if (s.src, s.dst) == (src, dst)]
    assert len(hits) == 1, f"{src} -> {dst} not (uniquely) in link_stats"
    return hits[0]


def test_two_identical_writes_share_the_path_fifo(make_engine, small_graph):
    """Two one-packet 4 KiB writes from the same PE at t = 0: the first is unaffected, the second
    drains one payload later at the 128 GB/s bottleneck."""
    nbytes = 4096
    eng = make_engine()
    a = eng.submit(PeDmaWriteMsg(0, 0, 0, SRAM0, nbytes))
    b = eng.submit(PeDmaWriteMsg(0, 0, 0, SRAM0, nbytes))
    eng.run()
    path = a.legs[0]
    assert b.legs[0] == path
    assert a.latency_ns == approx(write_hand_latency(small_graph, path, nbytes, 256))
    assert b.t_end - a.t_end == approx(nbytes / 128)

    stats = eng.link_stats()
    assert {(s.src, s.dst) for s in stats} == set(itertools.pairwise(path))
    bottleneck = _wire(stats, path[-2], path[-1])
    assert bottleneck.kind == "router_to_sram"
    assert bottleneck.bytes == 2 * nbytes
    assert bottleneck.messages == 2
    assert bottleneck.packets == 2
    assert bottleneck.busy_ns == approx(2 * nbytes / 128)
    # b's head is 4096/256 = 16 ns behind a's (it queued at the PE), a holds the SRAM link 32 ns
    assert bottleneck.max_wait_ns == approx(nbytes / 128 - nbytes / 256)
    assert bottleneck.max_wait_ns > 0
    first = _wire(stats, path[0], path[1])
    assert first.max_wait_ns == approx(nbytes / 256)
    assert first.busy_ns == approx(2 * nbytes / 256)
    for s in stats:
        assert (s.bytes, s.packets, s.messages) == (2 * nbytes, 2, 2)


def test_link_stats_counts_packets_and_keeps_graph_edge_order(make_engine, small_graph):
    eng = make_engine()
    eng.submit(MemoryWriteMsg(SRAM0, 3 * 4096 + 100))  # 4 packets, the last one short
    eng.submit(PeDmaWriteMsg(0, 0, 0, SRAM0, 4096))
    eng.run()
    stats = eng.link_stats()
    order = {(e.src, e.dst): i for i, e in enumerate(small_graph.edges)}
    idx = [order[(s.src, s.dst)] for s in stats]
    assert idx == sorted(idx)
    sram_link = _wire(stats, "sip0.cube0.noc.r2c0", "sip0.cube0.sram")
    assert sram_link.packets == 5 and sram_link.messages == 2
    assert sram_link.bytes == 4 * 4096 + 100
    assert sram_link.busy_ns == approx((4 * 4096 + 100) / 128)
    for s in stats:
        assert s.kind == small_graph.edge(s.src, s.dst).kind


def test_streams_interleave_packet_by_packet_not_message_by_message(make_engine, small_graph):
    """Two 4-packet writes at t = 0 alternate A0 B0 A1 B1 ... on every wire. At the 32 ns/packet
    SRAM link A's last packet is the 7th, not the 4th, so A finishes 3 x 32 ns later than alone
    and B only one packet (32 ns), not one message (128 ns), after A."""
    nbytes = 4 * 4096
    alone = make_engine()
    solo = run_one(alone, PeDmaWriteMsg(0, 0, 0, SRAM0, nbytes))

    eng = make_engine()
    a = eng.submit(PeDmaWriteMsg(0, 0, 0, SRAM0, nbytes))
    b = eng.submit(PeDmaWriteMsg(0, 0, 0, SRAM0, nbytes))
    eng.run()
    assert a.t_end > solo.t_end
    assert a.t_end - solo.t_end == approx(3 * 4096 / 128)
    assert b.t_end - a.t_end == approx(4096 / 128)
    assert b.t_end - a.t_end < nbytes / 128  # message-level FIFO would give the whole payload


def test_disjoint_paths_do_not_interfere(make_engine, small_graph, resolver):
    """Writes from two PEs into their own HBM slices share no wire: each keeps its lone latency."""
    msgs = [PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 4096),
            PeDmaWriteMsg(0, 0, 7, resolver.hbm_addr(0, 0, 7), 4096)]
    eng = make_engine()
    reqs = [eng.submit(m) for m in msgs]
    eng.run()
    assert not set(itertools.pairwise(reqs[0].legs[0])) & set(itertools.pairwise(reqs[1].legs[0]))
    for r in reqs:
        assert r.latency_ns == approx(write_hand_latency(small_graph, r.legs[0], 4096, 256))
    assert all(s.max_wait_ns == 0.0 for s in eng.link_stats())


def test_a_lone_stream_never_queues_behind_itself_on_a_uniform_path(make_engine, small_graph, resolver):
    """PE 0 -> its HBM controller is 256 GB/s throughout: each packet enters the first wire as the
    previous one's tail leaves it, so no packet ever waits, and the stream takes one packet time per
    further packet."""
    eng = make_engine()
    req = run_one(eng, PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 3 * 4096))
    assert {e.bw_gbs for e in edges_of(small_graph, req.legs[0])} == {256.0}
    assert [s.max_wait_ns for s in eng.link_stats()] == [approx(0.0)] * (len(req.legs[0]) - 1)
    assert req.latency_ns == approx(write_hand_latency(small_graph, req.legs[0], 4096, 256) + 2 * 4096 / 256)
