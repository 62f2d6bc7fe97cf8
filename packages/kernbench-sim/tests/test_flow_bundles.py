"""The flow solver's grouped links and the scheduler's wire bundles (``kernbench.sim.flow``, ADR 0039) against
straightforward references.

Flow fidelity's digests depend on every bit of every rate, so the grouped solver (:func:`max_min_rates`,
``fill_groups``, ``_rates``) must give the floats that progressive filling with one lazy heap entry per link gives,
in the same freezing order. ``per_link_rates`` below is that per-link solver, written out plainly; the tests
compare bit for bit (``float.hex``) on instances built to tie (equal capacities, equal caps, shares like 10/3
whose rounding makes a link's share drop by an ulp after a freeze). The scheduler's bundles (wires carrying
the same flows at the same bandwidth), kept up to date as flows start and end, are compared with a fresh
grouping after every step of random start/end sequences.
"""

from __future__ import annotations

import random
from fractions import Fraction
from heapq import heappop, heappush

import pytest

import kernbench.sim.flow as flow
import kernbench.sim.maxmin as maxmin
from kernbench.sim.flow import Flow, FlowScheduler, max_min_rates


def per_link_rates(paths, capacity, limits=None, seen=None):
    """Progressive filling, one lazy heap entry ``(share, first appearance, link)`` per link: the reference.

    Each round: drop the top entry if its link has no unfrozen flow, re-push it with its current share if that
    is larger than its key, else that share is the round's; a cap no larger freezes first (the entry stays),
    otherwise every unfrozen flow on the link freezes at the share. ``seen["drop"]`` counts rounds whose
    share was smaller than its entry's key (a share that dropped by rounding after a freeze).
    """
    n = len(paths)
    rates = [0.0] * n
    lim = list(limits) if limits is not None else [None] * n
    on = {}
    for i, links in enumerate(paths):
        for link in links:
            on.setdefault(link, []).append(i)
    rem = {link: float(capacity[link]) for link in on}
    cnt = {link: len(users) for link, users in on.items()}
    frozen = [False] * n
    heap = sorted((rem[link] / cnt[link], k, link) for k, link in enumerate(on))
    capped = sorted((c, i) for i, c in enumerate(lim) if c is not None)
    ci = 0
    left = n

    def freeze(i, rate):
        nonlocal left
        frozen[i] = True
        rates[i] = rate
        left -= 1
        for link in paths[i]:
            rem[link] -= rate
            cnt[link] -= 1

    while left:
        while ci < len(capped) and frozen[capped[ci][1]]:
            ci += 1
        share = None
        while heap:
            key, k, link = heap[0]
            if cnt[link] == 0:
                heappop(heap)
                continue
            actual = max(rem[link], 0.0) / cnt[link]
            if actual > key:
                heappop(heap)
                heappush(heap, (actual, k, link))
                continue
            if seen is not None and actual < key:
                seen["drop"] = seen.get("drop", 0) + 1
            share = actual
            break
        if ci < len(capped) and (share is None or capped[ci][0] <= share):
            freeze(capped[ci][1], capped[ci][0])
            continue
        if share is None:
            for i in range(n):
                if not frozen[i]:
                    freeze(i, float("inf"))
            break
        link = heappop(heap)[2]
        for i in on[link]:
            if not frozen[i]:
                freeze(i, share)
    return rates


def exact_rates(paths, capacity, limits):
    """Max-min fair rates in exact rational arithmetic: all unfrozen flows grow together from 0; at the first
    link to fill or cap to be reached, the flows it stops freeze (a flow crossing a link twice loads it twice).
    Independent of the code under test."""
    n = len(paths)
    rates: list[Fraction | None] = [None] * n
    while any(r is None for r in rates):
        events = []
        for link, c in capacity.items():
            active = [i for i in range(n) if rates[i] is None and link in paths[i]]
            if active:
                used = sum(rates[i] * paths[i].count(link) for i in range(n) if rates[i] is not None)
                events.append(((Fraction(c) - used) / sum(paths[i].count(link) for i in active), active))
        for i in range(n):
            if rates[i] is None and limits[i] is not None:
                events.append((Fraction(limits[i]), [i]))
        level = min(t for t, _ in events)
        for t, active in events:
            if t == level:
                for i in active:
                    if rates[i] is None:
                        rates[i] = level
    return [float(r) for r in rates]


def hexes(rates):
    return [r.hex() for r in rates]


def tie_heavy(rng: random.Random):
    """A random instance built to tie: few capacity values, shares like 10/3, caps equal to shares, links shared
    by most flows, sometimes a path that crosses a link twice."""
    nl = rng.randint(1, 10)
    base = rng.choice([3.0, 10.0, 7.0, 64.0])
    caps = {f"L{k}": base if rng.random() < 0.75 else rng.choice([1.0, 2.0, 10.0 / 3, 0.1, rng.uniform(0.5, 9)])
            for k in range(nl)}
    paths = []
    for _ in range(rng.randint(0, 10)):
        path = rng.sample(sorted(caps), rng.randint(0, min(nl, 6)))
        if path and rng.random() < 0.05:
            path.insert(rng.randrange(len(path) + 1), rng.choice(path))
        paths.append(path)
    limits = [rng.choice([None] * 5 + [1.0, 10.0 / 3, 7.0 / 3, base / 4, rng.uniform(0.1, 5)]) for _ in paths]
    return paths, caps, limits


def test_grouped_solver_gives_the_per_link_solvers_floats(monkeypatch):
    """Bit for bit, on 4,000 tie-heavy instances; the sample must include rounds whose share dropped below the
    entry's key and buckets split by an entry in between (else it would not test what makes grouping subtle)."""
    splits = []
    real = maxmin.bisect_left
    monkeypatch.setattr(maxmin, "bisect_left", lambda *a: splits.append(1) or real(*a))
    rng = random.Random(24)
    seen: dict[str, int] = {}
    for _ in range(4000):
        paths, caps, limits = tie_heavy(rng)
        want = per_link_rates(paths, caps, limits, seen)
        assert hexes(max_min_rates(paths, caps, limits)) == hexes(want), (paths, caps, limits)
    assert seen.get("drop", 0) >= 20
    assert len(splits) >= 5


def test_grouped_solver_is_max_min_fair_against_exact_arithmetic():
    rng = random.Random(7)
    for _ in range(300):
        paths, caps, limits = tie_heavy(rng)
        paths = [p for p in paths if p]  # a flow on no link and uncapped is inf; exact_rates has no inf
        limits = limits[:len(paths)]
        assert max_min_rates(paths, caps, limits) == pytest.approx(exact_rates(paths, caps, limits), rel=1e-9)


# ---------------------------------------------------------------------------------------------- the bundles
class FakeWire:
    """A wire as the flow scheduler sees it: a bandwidth (bytes/ns) and a propagation latency (ns)."""

    __slots__ = ("bw", "latency_ns", "name")

    def __init__(self, name: str, bw: float) -> None:
        self.name = name
        self.bw = bw
        self.latency_ns = 1.0

    def __repr__(self) -> str:
        return self.name


class FakeRoute:
    """A route as ``_RouteInfo`` reads it: wires, hop count and one overhead (ns) per node."""

    def __init__(self, wires) -> None:
        self.wires = tuple(wires)
        self.hops = len(self.wires)
        self.overheads = (0.0,) * (self.hops + 1)


class FakeEngine:
    flit_bytes = 32
    packet_bytes = 256


class FakeTransfer:
    nbytes = 4096


def make_flow(route: FakeRoute, seq: int, cap: float | None) -> Flow:
    return Flow(FakeTransfer(), route.wires, 0.0, 0.0, cap, seq, flow._RouteInfo(route))


def check_bundles(sched: FlowScheduler, present: list[Flow]) -> None:
    """The scheduler's bundles are exactly a fresh grouping of the wires carrying flows by (flows, bandwidth)."""
    fresh: dict[tuple[frozenset, float], set] = {}
    for f in present:
        for w in f.wires:
            fresh.setdefault(w, set()).add(f)
    groups: dict[tuple[frozenset, float], set] = {}
    for w, flows in fresh.items():
        groups.setdefault((frozenset(flows), w.bw), set()).add(w)
    assert set(sched.bundle_of) == set(fresh)
    assert {key: b.wires for key, b in sched.bundles.items()} == groups
    for key, b in sched.bundles.items():
        assert (b.flows, b.bw) == key and all(sched.bundle_of[w] is b for w in b.wires)
        assert b.first < 0 or (b.first, b.last) == (min(b.ordered[0].info.pos[w] for w in b.wires),
                                                    max(b.ordered[0].info.pos[w] for w in b.wires))


def random_routes(rng: random.Random, wires: list[FakeWire], count: int, repeats: bool) -> list[FakeRoute]:
    routes = []
    for _ in range(count):
        path = rng.sample(wires, rng.randint(1, 7))
        if repeats and rng.random() < 0.1:
            path.append(path[0])
        routes.append(FakeRoute(path))
    return routes


@pytest.mark.parametrize("seed", range(6))
def test_bundles_and_their_rates_match_a_fresh_rebuild_after_every_start_and_end(seed):
    """Random starts and ends of flows over shared wires (a few bandwidths, so bundles tie): after every step
    the bundles equal a fresh grouping, ``_enter`` says alone exactly when no wire of the flow carried a flow,
    ``_leave`` marks dirty exactly the wires still carrying flows, and the rates solved from the bundles equal
    :func:`max_min_rates` over the flows' wires bit for bit."""
    rng = random.Random(seed)
    wires = [FakeWire(f"w{i}", rng.choice([8.0, 8.0, 8.0, 16.0, 10.0 / 3])) for i in range(14)]
    routes = random_routes(rng, wires, 12, repeats=seed % 2 == 1)
    sched = FlowScheduler(FakeEngine())
    present: list[Flow] = []
    for seq in range(160):
        if present and (rng.random() < 0.45 or len(present) > 12):
            f = present.pop(rng.randrange(len(present)))
            sched.dirty.clear()
            sched._leave(f)
            still = {w for g in present for w in g.wires}
            assert sched.dirty == set(f.wires) & still
        else:
            f = make_flow(rng.choice(routes), seq, rng.choice([None, None, None, 2.0, 8.0 / 3]))
            busy = {w for g in present for w in g.wires}
            assert sched._enter(f) == (not busy & set(f.wires) and len(set(f.wires)) == len(f.wires))
            present.append(f)
        check_bundles(sched, present)
        if present:
            flows = sorted(present, key=lambda g: g.seq)
            bundles = {sched.bundle_of[w] for g in flows for w in g.wires}
            want = per_link_rates([g.wires for g in flows], {w: w.bw for w in wires}, [g.cap for g in flows])
            assert hexes(flow._rates(flows, bundles)) == hexes(want)


def test_bundles_order_their_wires_by_first_appearance():
    """Two bundles with the same fair share tie; the one whose wire comes first on the first flow's route is
    solved first, as the per-link solver's first-appearance order does. Rates differ by order here: flow A
    freezes at the share of whichever bundle goes first."""
    rng = random.Random(3)
    fails = 0
    for _ in range(300):
        wires = [FakeWire(f"w{i}", rng.choice([3.0, 10.0 / 3, 7.0])) for i in range(6)]
        sched = FlowScheduler(FakeEngine())
        flows = [make_flow(FakeRoute(rng.sample(wires, rng.randint(2, 5))), s, None) for s in range(5)]
        for f in flows:
            sched._enter(f)
        bundles = {sched.bundle_of[w] for f in flows for w in f.wires}
        want = per_link_rates([f.wires for f in flows], {w: w.bw for w in wires}, [None] * 5)
        fails += hexes(flow._rates(flows, bundles)) != hexes(want)
    assert fails == 0


def test_a_flow_whose_route_crosses_a_wire_twice_is_not_alone_and_is_solved_wire_by_wire():
    """As before bundles: a route that crosses a wire twice counts as sharing it (with itself), so its flow is
    solved rather than given its bottleneck, and ``_rates`` hands such a component to :func:`max_min_rates`, which
    counts the wire twice: the flow gets half of it."""
    a, b = FakeWire("a", 8.0), FakeWire("b", 16.0)
    sched = FlowScheduler(FakeEngine())
    f = make_flow(FakeRoute([a, b, a]), 0, None)
    assert sched._enter(f) is False
    check_bundles(sched, [f])
    assert flow._rates([f], {sched.bundle_of[a], sched.bundle_of[b]}) == [4.0]
    g = make_flow(FakeRoute([b]), 1, None)
    assert sched._enter(g) is False
    assert flow._rates([f, g], {sched.bundle_of[w] for w in (a, b)}) == [4.0, 12.0]
