"""Max-min fair rates of flows over shared links, by progressive filling: flow fidelity's solver (ADR 0039).

:func:`max_min_rates` takes each flow's links and each link's capacity;
:func:`fill_groups` is its core, working on groups of links that carry the
same flows and have the same capacity (the flow scheduler's wire bundles,
:mod:`kernbench.sim.flow`). Both give, float for float, what progressive
filling with one lazy heap entry per link gives. Units are the caller's
(the scheduler's: bytes/ns).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping, Sequence
from heapq import heappop, heappush


def max_min_rates(paths: Sequence[Sequence[Hashable]], capacity: Mapping[Hashable, float],
                  limits: Sequence[float | None] | None = None) -> list[float]:
    """Max-min fair rates of flows over links (progressive filling).

    ``paths[i]`` lists the links flow ``i`` crosses, ``capacity[link]`` is a
    link's capacity and ``limits[i]`` (optional, None for none) caps flow
    ``i`` on its own. Every flow's rate grows at the same pace until a link
    it crosses is full or it reaches its cap; then it is frozen and the
    others keep growing. Returns the rates in the order of ``paths``. A flow
    that crosses no link and has no cap gets ``inf``. Capacities and caps are
    numbers (not NaN), in any one unit (the scheduler's: bytes/ns).

    Each round freezes the flows of the link with the smallest fair share
    (remaining capacity over unfrozen flows, kept in a lazy heap keyed by
    ``(share, link's first appearance)``), or the smallest cap if it is no
    larger. Links that carry exactly the same flows (the same list, in the same
    order) and have the same capacity go through the same floating-point
    operations, so they are solved as one group (:func:`fill_groups`), with the same
    floats and the same freezing order as one heap entry per link.
    """
    n = len(paths)
    on: dict[Hashable, list[int]] = {}
    for i, links in enumerate(paths):
        for link in links:
            users = on.get(link)
            if users is None:
                on[link] = [i]
            else:
                users.append(i)
    groups: dict[tuple[tuple[int, ...], float], list[int]] = {}
    for k, (link, users) in enumerate(on.items()):
        key = (tuple(users), float(capacity[link]))
        ks = groups.get(key)
        if ks is None:
            groups[key] = [k]
        else:
            ks.append(k)
    rem: list[float] = []
    cnt: list[int] = []
    users_of: list[Sequence[int]] = []
    of_flow: list[list[int]] = [[] for _ in range(n)]
    heap: list[tuple[float, int, int, int, int, int]] = []
    order: list[list[int]] = []
    for g, ((users, cap), ks) in enumerate(groups.items()):
        rem.append(cap)
        cnt.append(len(users))
        users_of.append(users)
        for i in users:  # a link a flow crosses twice is subtracted from twice, as the flow's path lists it
            of_flow[i].append(g)
        heap.append((cap / len(users), ks[0], ks[-1], g, 0, len(ks)))
        order.append(ks)
    heap.sort()
    lim = list(limits) if limits is not None else [None] * n
    return fill_groups(n, lim, rem, cnt, users_of, of_flow, heap, order.__getitem__)


def fill_groups(n: int, limits: Sequence[float | None], rem: list[float], cnt: list[int],
                users: Sequence[Sequence[int]], of_flow: Sequence[Sequence[int]],
                heap: list[tuple[float, int, int, int, int, int]],
                member_keys: Callable[[int], Sequence[int]]) -> list[float]:
    """Progressive filling over groups of identical links: the rates of flows ``0 .. n-1``.

    A group ``g`` is a set of links that carry the same flows ``users[g]`` (flow indices in increasing order, a
    flow listed once per time its path crosses the link) and have the same capacity ``rem[g]`` (its remaining
    capacity, consumed in place); ``cnt[g]`` is ``len(users[g])`` and ``of_flow[i]`` lists the groups of flow ``i``
    (with the same repetition). Every link of a group has the same remaining capacity and unfrozen count after
    every freeze, so the same fair share.

    It reproduces, float for float, progressive filling with one lazy heap entry ``(share, k)`` per link, ``k``
    the link's first appearance over the paths: each round, the entry at the top is dropped if its link has no
    unfrozen flow, re-pushed with its current share if that share is larger than its key, and else gives the
    round's share (a cap no larger is frozen first, leaving the entry in place; otherwise every unfrozen flow of
    the link freezes at the share). Here a heap entry is a *bucket*: the links of group ``g`` whose entries have
    the same key, ``member_keys(g)[lo:hi]`` (their ``k`` in increasing order; ``kmin`` and ``kmax`` are the first
    and last). Re-pushing a bucket re-pushes all its links' entries, which is what the per-link heap does when no
    other entry lies between its first and last: those entries are examined one after the other with nothing
    changed in between. Otherwise the bucket is split at the first entry in between (only an entry with the
    same key can be), and the links before it re-pushed: the per-link order, bucket by bucket.
    """
    rates = [0.0] * n
    frozen = [False] * n

    def freeze(i: int, rate: float) -> None:
        """Flow ``i`` gets ``rate``; every group it crosses loses that much capacity and one unfrozen flow."""
        frozen[i] = True
        rates[i] = rate
        for g in of_flow[i]:
            rem[g] -= rate
            cnt[g] -= 1

    capped = sorted((c, i) for i, c in enumerate(limits) if c is not None)
    ncap = len(capped)
    ci = 0
    left = n
    while left:
        while ci < ncap and frozen[capped[ci][1]]:
            ci += 1
        share = None
        while heap:
            top = heap[0]
            g = top[3]
            c = cnt[g]
            if c == 0:
                heappop(heap)
                continue
            r = rem[g]
            if r < 0.0:  # max(r, 0.0), bit for bit (-0.0 stays -0.0)
                r = 0.0
            actual = r / c
            key = top[0]
            if actual > key:
                heappop(heap)
                kmax = top[2]
                if heap and heap[0][0] == key and heap[0][1] < kmax:  # another entry between its links: split
                    ks = member_keys(g)
                    lo, hi = top[4], top[5]
                    j = bisect_left(ks, heap[0][1], lo, hi)
                    heappush(heap, (actual, top[1], ks[j - 1], g, lo, j))
                    heappush(heap, (key, ks[j], kmax, g, j, hi))
                else:
                    heappush(heap, (actual, top[1], kmax, g, top[4], top[5]))
                continue
            share = actual
            break
        if ci < ncap and (share is None or capped[ci][0] <= share):
            rate, i = capped[ci]
            freeze(i, rate)
            left -= 1
            continue
        if share is None:  # flows on no link and uncapped
            for i in range(n):
                if not frozen[i]:
                    freeze(i, float("inf"))
                    left -= 1
            break
        for i in users[heappop(heap)[3]]:
            if not frozen[i]:
                freeze(i, share)
                left -= 1
    return rates


__all__ = ["fill_groups", "max_min_rates"]
