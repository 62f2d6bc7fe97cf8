"""Flow fidelity in the engine (``GraphEngine(..., fidelity="flow")``, ``kernbench.sim.flow``, ADR 0039).

Expected times are assembled from the graph's parameters, as ``test_fabric_timing`` does: a transfer alone on
its route takes the head latency (node overheads, wire latencies, the first flit's serialisation on every wire)
plus the rest of its bytes at the bottleneck, ``(N - flit) / min(bw)``: the packet model's closed form
(``kernbench probe``'s ``overhead + wire + fill + drain``).
"""

from __future__ import annotations

import itertools

import pytest

from kernbench.sim import Component, ComponentRegistry, GraphEngine, MemoryReadMsg, MemoryWriteMsg
from kernbench.topology import PhysAddr

SRAM0 = PhysAddr(0, 0, "sram", 0)


def closed_form_write(graph, path, nbytes, flit):
    """Every node's overhead (source, relays, terminal), the wires' latency, the head flit's serialisation per
    wire, and the rest of the payload at the slowest wire."""
    edges = [graph.edge(a, b) for a, b in itertools.pairwise(path)]
    head = min(flit, nbytes)
    return (sum(graph.nodes[n].overhead_ns for n in path) + sum(e.latency_ns for e in edges)
            + sum(head / e.bw_gbs for e in edges) + (nbytes - head) / min(e.bw_gbs for e in edges))


@pytest.fixture
def engines(small_graph, test_impls):
    def make(fidelity):
        return GraphEngine(small_graph, ComponentRegistry(test_impls), fidelity=fidelity)
    return make


def _one(engine, msg):
    req = engine.submit(msg)
    engine.run()
    return req


@pytest.mark.parametrize("nbytes", [256, 4096, 65536, 1 << 20])
def test_a_lone_write_takes_the_closed_form_exactly(engines, small_graph, nbytes):
    eng = engines("flow")
    req = _one(eng, MemoryWriteMsg(SRAM0, nbytes))
    path = req.legs[0]
    assert req.latency_ns == pytest.approx(closed_form_write(small_graph, path, nbytes, eng.flit_bytes), rel=1e-12)


@pytest.mark.parametrize("nbytes", [4096, 10000, 65536, 1 << 20])
def test_a_lone_bulk_transfer_matches_packet_fidelity_within_one_percent(engines, nbytes):
    """Writes and reads of bulk payloads alone on their route: flow and packet fidelity agree within 1 %.

    The flow is exactly the closed form. Packet fidelity gives the same number to rounding when the payload is
    whole flits (packets follow each other back to back, so packet boundaries cost nothing on an idle route).
    The one systematic difference is a partial last flit: packet fidelity paces a read reply's last, short flit
    behind a whole flit time at the source, where the flow drains only the bytes it holds; 10,000 B (39 flits
    and 16 B) read from SRAM takes 1.56 ns (0.41 %) longer in packet fidelity.
    """
    for msg in (MemoryWriteMsg(SRAM0, nbytes), MemoryReadMsg(SRAM0, nbytes)):
        packet, flow = _one(engines("packet"), msg), _one(engines("flow"), msg)
        assert flow.latency_ns == pytest.approx(packet.latency_ns, rel=0.01), type(msg).__name__


def test_two_writes_share_the_route_and_each_takes_twice_the_drain(engines, small_graph):
    nbytes = 1 << 20
    eng = engines("flow")
    reqs = [eng.submit(MemoryWriteMsg(PhysAddr(0, 0, "sram", i * nbytes), nbytes)) for i in range(2)]
    eng.run()
    path = reqs[0].legs[0]
    lone = closed_form_write(small_graph, path, nbytes, eng.flit_bytes)
    bn = min(small_graph.edge(a, b).bw_gbs for a, b in itertools.pairwise(path))
    # both flows start together and share every wire: each drains at bn / 2, so it ends one payload later
    for r in reqs:
        assert r.latency_ns == pytest.approx(lone + nbytes / bn, rel=1e-9)


def test_link_counters_are_filled_as_packet_fidelity_counts_them(engines):
    msgs = [MemoryWriteMsg(SRAM0, 65536), MemoryReadMsg(PhysAddr(0, 1, "sram", 0), 10000)]
    stats = {}
    for fid in ("packet", "flow"):
        eng = engines(fid)
        for m in msgs:
            eng.submit(m)
        eng.run()
        stats[fid] = {(r.src, r.dst): r for r in eng.link_stats()}
    assert stats["flow"].keys() == stats["packet"].keys()
    for key, p in stats["packet"].items():
        f = stats["flow"][key]
        assert (f.bytes, f.packets, f.messages) == (p.bytes, p.packets, p.messages), key
        assert f.busy_ns == pytest.approx(f.bytes / f.bw_gbs)
        assert 0 < f.utilisation <= 1


def test_hops_record_the_head_of_each_leg(engines, small_graph):
    eng = engines("flow")
    req = _one(eng, MemoryReadMsg(SRAM0, 8192))
    legs = [h[0] for h in req.hops]
    assert legs[0] == "read_cmd" and legs[-1] == "read_data"
    assert [h[1] for h in req.hops if h[0] == "read_cmd"] == list(req.legs[0])
    assert all(t_in <= t_out for _, _, t_in, t_out in req.hops)


def test_a_bad_fidelity_is_refused(small_graph, test_impls):
    with pytest.raises(ValueError, match="'packet' simulates every packet"):
        GraphEngine(small_graph, ComponentRegistry(test_impls), fidelity="fluid")
    assert GraphEngine(small_graph, ComponentRegistry(test_impls)).fidelity == "packet"


# ------------------------------------------------------------------------------------------ fewer events, same times
class _ControlSink(Component):
    """Takes control messages and remembers when each arrived (ns)."""

    __slots__ = ("arrivals",)

    def __init__(self, engine, node):
        super().__init__(engine, node)
        self.arrivals = []

    def on_control(self, payload, t, transfer):
        self.arrivals.append((payload, t))


def _control_engine(small_graph, test_impls, fidelity):
    impls = tuple((n, _ControlSink if n == "io_cpu" else c) for n, c in test_impls)
    return GraphEngine(small_graph, ComponentRegistry(impls), fidelity=fidelity)


def test_a_control_message_is_one_event_with_the_packet_paths_times_and_counters(small_graph, test_impls):
    """Host -> IO CPU (four wires): flow fidelity fixes the arrival when the message is sent, summing the same
    overheads and latencies in the same order as the packet path's hop events, so the time is the same float; the
    wires count the message, and the recorded hops are the packet path's (recorded at once, so in another order
    among messages in flight together). One event per message instead of one per node of its path."""
    path = ("tray.host_cpu", "fabric.switch0", "sip0.io0.pcie_ep", "sip0.io0.io_noc", "sip0.io0.io_cpu")
    got = {}
    for fid in ("packet", "flow"):
        alone = _control_engine(small_graph, test_impls, fid)
        alone.submit(MemoryWriteMsg(SRAM0, 64))
        alone.run()
        eng = _control_engine(small_graph, test_impls, fid)
        req = eng.submit(MemoryWriteMsg(SRAM0, 64))  # a request to hang the messages on
        t_send = eng.now
        eng.send_control(req, path, 0)
        eng.send_control(req, path, 1, t_start=t_send + 3.25)
        eng.send_control(req, path, 2, apply_source_overhead=False)
        eng.run()
        arrivals = dict(eng.components[path[-1]].arrivals)
        wires = [eng.wires[(a, b)].messages for a, b in itertools.pairwise(path)]
        got[fid] = (arrivals, wires, sorted(h for h in req.hops if h[0] == "control"), eng.events - alone.events)
    assert got["flow"][:3] == got["packet"][:3]  # exact
    arrivals = got["flow"][0]
    source = small_graph.nodes[path[0]].overhead_ns
    assert arrivals[0] == pytest.approx(t_send + source + eng.control_latency_ns(path), rel=1e-12)
    assert arrivals[1] == pytest.approx(arrivals[0] + 3.25, rel=1e-12)
    assert arrivals[2] == pytest.approx(arrivals[0] - source, rel=1e-12)
    assert got["packet"][3] == 3 * len(path)  # a hop event per wire and the arrival, per message
    assert got["flow"][3] == 3


def test_a_read_command_is_one_event_in_flow_fidelity(engines, small_graph):
    """A read's command (one flit) takes its head latency without entering the solver: one arrival event."""
    eng = engines("flow")
    req = _one(eng, MemoryReadMsg(SRAM0, 64))  # command out, one-flit reply back: neither is solved
    assert eng.flows.flows == 0 and eng.flows.solves == 0
    packet = _one(engines("packet"), MemoryReadMsg(SRAM0, 64))
    assert req.latency_ns == pytest.approx(packet.latency_ns, rel=1e-12)


def test_a_lone_flow_takes_its_rate_without_a_solve(engines, small_graph):
    eng = engines("flow")
    req = _one(eng, MemoryWriteMsg(SRAM0, 65536))
    assert eng.flows.flows == 1 and eng.flows.solves == 0
    assert req.latency_ns == pytest.approx(closed_form_write(small_graph, req.legs[0], 65536, eng.flit_bytes),
                                           rel=1e-12)


def test_a_flow_that_joins_a_lone_one_later_shares_with_it(engines, small_graph):
    """Write A starts alone (no solve); write B, on the same route, starts ``late`` ns after A. From then they drain
    at half the bottleneck each until A is done, then B alone. Each has ``N / bn - late`` ns more than a lone
    write: A drained ``bn * late`` alone and the rest at half speed; B shares for that long and then drains the
    ``bn * late`` bytes A left it alone."""
    nbytes, late = 1 << 20, 1000.0
    eng = engines("flow")
    a = eng.submit(MemoryWriteMsg(PhysAddr(0, 0, "sram", 0), nbytes))
    eng.run(until=late)
    b = eng.submit(MemoryWriteMsg(PhysAddr(0, 0, "sram", nbytes), nbytes))
    eng.run()
    path = a.legs[0]
    lone = closed_form_write(small_graph, path, nbytes, eng.flit_bytes)
    bn = min(small_graph.edge(x, y).bw_gbs for x, y in itertools.pairwise(path))
    assert late < nbytes / bn
    assert eng.flows.solves >= 1
    for r in (a, b):
        assert r.latency_ns == pytest.approx(lone + nbytes / bn - late, rel=1e-9)
