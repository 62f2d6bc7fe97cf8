"""The compiled event calendar (kernbench-accel, ADR 0046) gives exactly what the pure-Python calendar gives.

Each workload runs twice on fresh engines over the same graph, once with ``accel=True`` and once with
``accel=False``, and everything observable must be equal, not close: every request's submit and end time and hop
trace, every wire's counters, the op log, the event count, the clock and SimPy's next event id (so the two
calendars drew the same ids in the same order). The workloads make packets queue behind each other (flit
catch-up), mix writes, reads (whose replies are paced) and control messages, start at integer and fractional
times, and run with and without hop traces, so both the hops the compiled calendar computes and the ones it hands
to the Python hop are covered. Without kernbench-accel installed these tests skip, unless
``KERNBENCH_REQUIRE_ACCEL`` is set (CI), where they fail.
"""

from __future__ import annotations

import os
import random

import pytest

from kernbench.sim import ComponentRegistry, GraphEngine, MemoryReadMsg, MemoryWriteMsg, PeDmaReadMsg, PeDmaWriteMsg
from kernbench.sim.accel import ENV, compiled_calendar
from kernbench.sim.errors import ComponentError
from kernbench.topology import AddressResolver
from kernbench.topology import naming as nm

if compiled_calendar(True) is None:
    if os.environ.get("KERNBENCH_REQUIRE_ACCEL"):
        raise RuntimeError("kernbench-accel is not importable but KERNBENCH_REQUIRE_ACCEL is set")
    pytest.skip("kernbench-accel is not installed (pip install 'kernbench-sim[accel]')", allow_module_level=True)


def _workload(engine: GraphEngine, seed: int, n: int) -> list:
    """Submit ``n`` random transfers at random times (some of them integers) and return their requests."""
    rng = random.Random(seed)
    res = AddressResolver(engine.graph)
    spec = engine.spec
    cubes, pes = spec.cubes_per_sip, spec.pes_per_cube
    requests = []
    seen_events = engine.seen_events = []
    plan = sorted((rng.choice([0, 1, 2, 5, 7.25, 13.5, rng.uniform(0, 40)]), i) for i in range(n))

    def submit(_, i=None):
        seen_events.append(engine.events)  # what Python code sees of the count, mid-run
        kind = rng.randrange(4)
        cube, pe = rng.randrange(cubes), rng.randrange(pes)
        addr = res.hbm_addr(0, rng.randrange(cubes), rng.randrange(pes), 4096 * rng.randrange(64))
        nbytes = rng.choice([64, 256, 300, 4096, 4097, 16384, 65536 + 128])
        msg = (PeDmaWriteMsg(0, cube, pe, addr, nbytes), PeDmaReadMsg(0, cube, pe, addr, nbytes),
               MemoryWriteMsg(addr, nbytes), MemoryReadMsg(addr, nbytes))[kind]
        requests.append(engine.submit(msg))

    for t, _ in plan:
        engine.at(t, submit)
    return requests


def _observed(engine: GraphEngine, requests: list) -> dict:
    wires = {k: (w.free_at, w.busy_ns, w.bytes, w.packets, w.messages, w.max_wait_ns) for k, w in engine.wires.items()}
    return {
        "requests": [(r.corr_id, r.t_submit, r.t_end, tuple(r.hops), tuple(r.legs)) for r in requests],
        "wires": wires,
        "oplog": [repr(rec) for rec in engine.oplog.records],
        "events": engine.events,
        "seen_events": list(getattr(engine, "seen_events", ())),
        "now": engine.now,
        "next_eid": next(engine.env._eid),
    }


def _run(graph, impls, accel: bool, seed: int, n: int, record_hops: bool) -> tuple[dict, GraphEngine]:
    engine = GraphEngine(graph, ComponentRegistry(impls), record_hops=record_hops, accel=accel)
    assert engine.accelerated is accel
    requests = _workload(engine, seed, n)
    engine.run()
    return _observed(engine, requests), engine


@pytest.mark.parametrize("record_hops", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_compiled_calendar_gives_what_the_python_calendar_gives(small_graph, test_impls, seed, record_hops):
    want, _ = _run(small_graph, test_impls, False, seed, 60, record_hops)
    got, engine = _run(small_graph, test_impls, True, seed, 60, record_hops)
    assert engine.accelerated and engine._cal.hops_run > 500  # the C hop did most of the work
    assert any(w[5] > 0 for w in got["wires"].values())  # packets queued: flit catch-up was exercised
    for key in want:
        assert got[key] == want[key], key


def test_times_keep_their_python_type(small_graph, test_impls):
    """An integer start time stays an int in hop traces where Python keeps it one (int + int overheads)."""
    want, _ = _run(small_graph, test_impls, False, 4, 20, True)
    got, _ = _run(small_graph, test_impls, True, 4, 20, True)
    types = [tuple(type(x).__name__ for x in hop[2:]) for r in got["requests"] for hop in r[3]]
    assert types == [tuple(type(x).__name__ for x in hop[2:]) for r in want["requests"] for hop in r[3]]


def test_a_run_stopped_by_until_resumes_identically(small_graph, test_impls):
    """run(until=...) stops inside the compiled loop (SimPy's URGENT stop event) and a second run goes on from
    there, exactly as on the pure-Python calendar."""
    seen = []
    for accel in (False, True):
        engine = GraphEngine(small_graph, ComponentRegistry(test_impls), record_hops=False, accel=accel)
        requests = _workload(engine, 5, 40)
        engine.run(until=37.5)
        assert engine.now == 37.5
        middle = _observed(engine, requests)
        engine.run()
        seen.append((middle, _observed(engine, requests)))
    assert seen[1] == seen[0]
    assert seen[0][0]["events"] < seen[0][1]["events"]  # the first run stopped with work left


def test_the_environment_variable_picks_the_calendar(small_graph, test_impls, monkeypatch):
    monkeypatch.setenv(ENV, "0")
    assert not GraphEngine(small_graph, ComponentRegistry(test_impls)).accelerated
    monkeypatch.setenv(ENV, "1")
    assert GraphEngine(small_graph, ComponentRegistry(test_impls)).accelerated
    assert not GraphEngine(small_graph, ComponentRegistry(test_impls), accel=False).accelerated
    monkeypatch.setenv(ENV, "yes")
    with pytest.raises(ComponentError, match="KERNBENCH_ACCEL='yes' is not 0 or 1"):
        GraphEngine(small_graph, ComponentRegistry(test_impls))


@pytest.mark.parametrize("nbytes", [0, 1, 255, 256, 257, 4095, 4096, 4097, 3 * 4096, 65536 + 300, -5])
def test_the_compiled_cut_makes_the_same_packets(small_graph, test_impls, nbytes):
    """kernbench-accel's split_packets gives the packets fabric.split_packets gives: every slot, same types."""
    from kernbench.sim.accel import compiled_module
    from kernbench.sim.fabric import Transfer, split_packets

    engine = GraphEngine(small_graph, ComponentRegistry(test_impls), accel=True)
    route = engine.route(engine.router.control_path(*_ends(engine)))
    tr = Transfer(None, route, nbytes, "write", 0, None)
    slots = ("transfer", "route", "hop", "index", "nbytes", "nflits", "offset", "delta", "t_head", "t_tail")
    for packet_bytes, flit in ((4096, 256), (4096, 300), (1000, 64)):
        want = split_packets(tr, packet_bytes, flit)
        got = compiled_module(engine).split_packets(tr, packet_bytes, flit)
        assert [type(p) for p in got] == [type(p) for p in want]
        assert [[(getattr(p, s), type(getattr(p, s))) for s in slots] for p in got] == \
            [[(getattr(p, s), type(getattr(p, s))) for s in slots] for p in want]


def _ends(engine: GraphEngine) -> tuple[str, str]:
    res = AddressResolver(engine.graph)
    return nm.HOST, engine.resolve(res.hbm_addr(0, 1, 2), 64)
