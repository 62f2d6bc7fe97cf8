"""Behaviour the mutation run (tests/mutation/mutate.py) found untested in kernbench-sim, pinned with values
worked out by hand here.

A wire's ``busy_ns`` is the time from its first flit starting to its last flit leaving. When a packet arrives
with its flits spaced by a slower upstream wire, a fast wire stays busy for that whole spread-out train, which is
longer than ``bytes / bw``; the link report's utilisation is built on that number.
"""

from __future__ import annotations

import pytest

from kernbench.sim import ComponentRegistry, GraphEngine
from kernbench.sim.engine import Request
from kernbench.sim.links import link_records
from kernbench.topology.graph import Edge, Node, TopologyGraph

LATENCY = 0.5  # ns on every wire
ROUTER_NS = 2.0  # overhead of the one router in the chain


def _chain(small_graph, test_impls, slow_gbs: float, fast_gbs: float) -> GraphEngine:
    """``s --slow--> r --fast--> d``: a source (no overhead charged), one router, a link-bound sink (no overhead)."""
    nodes = {"s": Node("s", "pe_dma", 0.0, 0.0, {"overhead_ns": 0.0}),
             "r": Node("r", "router", 0.0, 0.0, {"overhead_ns": ROUTER_NS}),
             "d": Node("d", "sram", 0.0, 0.0, {"overhead_ns": 0.0})}
    edges = [Edge("s", "r", "test", slow_gbs, LATENCY, 1.0, 1.0), Edge("r", "d", "test", fast_gbs, LATENCY, 1.0, 1.0)]
    graph = TopologyGraph(small_graph.spec, small_graph.mesh, None, nodes, edges, {})
    return GraphEngine(graph, ComponentRegistry(test_impls))


def _write(eng: GraphEngine, nbytes: int) -> list[float]:
    req = Request(0, None, 0.0, eng.env.event())
    done: list[float] = []
    eng.send(req, eng.route(("s", "r", "d")), nbytes, kind="write", addr=0, t_start=0.0,
             on_done=lambda _tr, t: eng.at(t, lambda _: done.append(eng.now)))  # the clock runs to the landing
    eng.run()
    return done


def test_a_fast_wire_behind_a_slow_one_is_busy_for_the_whole_spread_out_packet(small_graph, test_impls):
    """One 4096 B packet (16 flits of 256 B) over 128 GB/s then 512 GB/s.

    Slow wire: flits leave 2 ns apart from t = 0, the last one done at 4096 / 128 = 32 ns: busy 32 ns.
    The head reaches the router at 2 + 0.5 = 2.5 ns and is forwarded at 2.5 + 2 = 4.5 ns. The last flit reaches
    the router at 32 + 0.5 = 32.5 ns, is forwarded at 34.5 ns and takes 256 / 512 = 0.5 ns: the fast wire is
    busy from 4.5 to 35 ns, 30.5 ns, not the 4096 / 512 = 8 ns its bandwidth alone would need.
    """
    assert (small_graph.spec.fabric.flit_bytes, small_graph.spec.fabric.packet_bytes) == (256, 4096)
    eng = _chain(small_graph, test_impls, 128.0, 512.0)
    done = _write(eng, 4096)
    assert done == [pytest.approx(35.0 + LATENCY)]  # the tail reaches the sink one latency after leaving
    stats = {(s.src, s.dst): s for s in eng.link_stats()}
    assert stats[("s", "r")].busy_ns == pytest.approx(32.0)
    assert stats[("r", "d")].busy_ns == pytest.approx(30.5)
    records = {(r.src, r.dst): r for r in link_records(eng)}
    assert records[("r", "d")].utilisation == pytest.approx(30.5 / 35.5)


def test_equal_wires_are_busy_exactly_bytes_over_bandwidth(small_graph, test_impls):
    """With no slower wire upstream the train is never spread: each wire is busy 4096 / 256 = 16 ns."""
    eng = _chain(small_graph, test_impls, 256.0, 256.0)
    _write(eng, 4096)
    assert [s.busy_ns for s in eng.link_stats()] == [pytest.approx(16.0), pytest.approx(16.0)]
