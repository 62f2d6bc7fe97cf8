"""Flow-level fidelity: a transfer is one fluid flow sharing its links max-min fairly (ADR 0039).

In packet fidelity (the default, :mod:`kernbench.sim.fabric`) a payload is
cut into packets and every packet is an event on every wire it crosses. In
flow fidelity (``GraphEngine(..., fidelity="flow")``) every transfer the
engine's ``send`` carries (a write, a read command, a read's data coming
back, hence every DMA, host access and IPCQ message) is **one flow** over
its route:

* all flows present share every link **max-min fairly**
  (:func:`max_min_rates`, progressive filling over the links' ``bw_gbs``);
  a flow whose source paces its data (a memory read's reply) is also
  capped at the rate the source delivers it;
* rates are recomputed when a flow starts or ends (only for the flows
  linked to it through shared links: disjoint groups do not affect each
  other), and a flow drains its bytes at its current rate;
* a flow's data reaches the destination ``fixed`` ns after it has drained,
  where ``fixed`` is the head latency of the route (the overheads of the
  nodes in between, the wires' propagation, the first flit's serialisation
  on every wire) less the first flit's serialisation at the bottleneck,
  which the drain already counts. Alone on its route a transfer therefore
  takes ``head + (N - flit) / bottleneck``: the packet model's closed form
  (``kernbench probe``'s ``overhead + wire + fill + drain``).

The destination component then receives the whole transfer as one packet
(``Transfer.packets`` has one entry) whose first flit arrived at ``t_head``
and last at ``t_tail``, its flits evenly spaced in between; its own service
(HBM channels, TCM write channel, access overheads) is computed by the
component exactly as in packet fidelity. Transfers of one flit or less (read
commands) take their uncontended head latency and do not enter the solver.

Control messages keep their times (node overheads and wire propagation, no
bandwidth) but cost one event each: the arrival, fixed when the message is
sent, instead of one event per node of the path. Compute, DMA issue and
launch costs are unchanged. Link counters are kept: a flow adds its bytes,
its packet count (as packet fidelity would cut it), one message and
``bytes / bw`` of busy time to every wire of its route when it starts
(a control message or a one-flit transfer when it is sent); ``max_wait_ns``
stays 0 (flows do not queue, they share).

Events per transfer (ADR 0039 has the measurements): a one-flit transfer or
a control message is its arrival only; a bulk transfer is its start, one
wake-up shared by every flow that ends at that time, and its arrival at the
destination (one per piece), plus a solve only when it shares a wire with
another flow when it starts, or when a flow on one of its wires starts or
ends: a flow alone on every wire of its route takes its bottleneck (or its
source's pace) at once, which is what the solver would give it.
"""

from __future__ import annotations

from heapq import heappop, heappush
from itertools import count

from kernbench.sim.errors import MessageError
from kernbench.sim.fabric import Packet, Route, Transfer, Wire, cross_control, cross_flow
from kernbench.sim.maxmin import fill_groups, max_min_rates

#: The engine's fidelities: ``packet`` (every packet an event on every wire) and ``flow`` (this module).
FIDELITIES = ("packet", "flow")
#: Completion times within this many ns of a wake-up complete at it (float rounding of drained bytes).
_EPS_NS = 1e-9


def check_fidelity(fidelity: object) -> str:
    """``fidelity`` if it is one of :data:`FIDELITIES`, else ``ValueError`` naming them."""
    if not isinstance(fidelity, str) or fidelity not in FIDELITIES:
        raise ValueError(f"fidelity {fidelity!r} is not one of {', '.join(FIDELITIES)}: 'packet' simulates every "
                         f"packet on every link, 'flow' every transfer as one flow sharing links max-min fairly")
    return fidelity


class Flow:
    """One transfer in flight as a fluid flow."""

    __slots__ = ("cap", "done", "fixed", "index", "info", "left", "rate", "sent", "seq", "t_cut", "t_finish",
                 "t_head", "t_ref", "transfer", "wires")

    def __init__(self, transfer: Transfer, wires: tuple[Wire, ...], fixed: float, t_head: float,
                 cap: float | None, seq: int, info: _RouteInfo | None = None) -> None:
        self.transfer = transfer
        self.wires = wires
        self.info = info  # its route's constants (wire positions for the solver)
        self.index = 0  # its index in the solve in progress
        self.fixed = fixed  # ns from the end of the drain to the last byte's arrival
        self.t_head = t_head  # when the first flit arrives (uncontended head latency)
        self.cap = cap  # the source's own pace, bytes/ns (None: unpaced)
        self.left = float(transfer.nbytes)  # bytes still to drain at t_ref
        self.t_ref = 0.0
        self.rate = 0.0
        self.t_finish = float("inf")
        self.seq = seq
        self.done = False
        self.sent = 0  # bytes handed to the terminal so far
        self.t_cut = 0.0  # when the last piece was cut


class _RouteInfo:
    """A route's constants for flows: head latency parts (ns), bottleneck (bytes/ns), each wire's position."""

    __slots__ = ("base", "inv_bw", "min_bw", "pos", "simple")

    def __init__(self, route: Route) -> None:
        # head latency without the first flit's serialisation: the overheads of the nodes in between (the
        # source's is paid before t_start, the terminal's by the terminal) and every wire's propagation
        self.base = sum(route.overheads[1:route.hops]) + sum(w.latency_ns for w in route.wires)
        self.inv_bw = sum(1.0 / w.bw for w in route.wires)
        self.min_bw = min(w.bw for w in route.wires)
        self.pos: dict[Wire, int] = {}  # each wire's first position on the route
        for i, w in enumerate(route.wires):
            self.pos.setdefault(w, i)
        self.simple = len(self.pos) == len(route.wires)  # crosses no wire twice


class _Bundle:
    """Wires that carry exactly the same flows in flight and have the same bandwidth (bytes/ns).

    Such wires go through the same floating-point operations in :func:`max_min_rates`, so the solver treats a
    bundle as one group. :class:`FlowScheduler` keeps every wire that carries a flow in exactly one bundle,
    and at most one bundle per (flows, bandwidth), updating them as flows start and end.
    """

    __slots__ = ("bw", "first", "flows", "last", "ordered", "wires")

    def __init__(self, flows: frozenset[Flow], bw: float) -> None:
        self.flows = flows
        self.bw = bw
        self.wires: set[Wire] = set()
        self.ordered: list[Flow] | None = None  # its flows by seq (made by the first solve that needs it)
        self.first = -1  # the first and last position of its wires on the route of ordered[0] (-1: not known)
        self.last = -1


class FlowScheduler:
    """The flow fidelity of one :class:`~kernbench.sim.engine.GraphEngine`: its ``send`` and ``send_control``, and
    the solver state."""

    __slots__ = ("bundle_of", "bundles", "dirty", "engine", "flit", "flows", "heap", "info", "packet_bytes",
                 "piece_bytes", "seq", "solves", "solving", "tick_due", "wake_at")

    def __init__(self, engine) -> None:
        self.engine = engine
        self.flit = engine.flit_bytes
        self.packet_bytes = engine.packet_bytes
        self.bundle_of: dict[Wire, _Bundle] = {}  # the bundle of each wire carrying flows (see _Bundle)
        self.bundles: dict[tuple[frozenset[Flow], float], _Bundle] = {}  # each bundle by (flows, bandwidth)
        self.dirty: set[Wire] = set()  # wires whose flows changed since the last solve
        self.heap: list[tuple[float, int, Flow]] = []  # (predicted finish, seq, flow); stale entries skipped
        self.wake_at = float("inf")  # the time of the pending wake-up (inf: none)
        self.solving = False  # a solve is scheduled at the current time
        self.info: dict[Route, _RouteInfo] = {}  # per route (routes are memoised per node path by the engine)
        self.seq = count()
        self.flows = 0  # flows that entered the solver
        self.tick_due: dict[Wire, float] = {}  # the next cut of the flows sharing a last wire (see _ticks)
        self.piece_bytes = engine.packet_bytes  # flows sharing their last wire arrive in pieces this big (_ticks)
        self.solves = 0

    # ------------------------------------------------------------------ the engine's send
    def send(self, request, route: Route, nbytes: int, *, kind: str, addr: int, t_start: float, on_done,
             ready: list[tuple[float, float]] | None = None, read_nbytes: int = 0) -> Transfer:
        """``GraphEngine.send`` in flow fidelity: the same Transfer, started as one flow at ``t_start`` (ns).

        A transfer of one flit or less (a read command) takes its uncontended head latency and never enters the
        solver, so it is settled here: its link counters are added now and its arrival (``t_start`` plus the
        head latency, ns) is the one event it costs.
        """
        tr = Transfer(request, route, nbytes, kind, addr, on_done)
        tr.read_nbytes = read_nbytes
        tr.ready = ready
        eng = self.engine
        now = eng.env._now
        t0 = t_start if t_start > now else now
        if nbytes <= self.flit:  # one flit: its head latency is the whole transfer
            pkt = Packet(tr, 0, nbytes, -(-nbytes // self.flit), 0)
            tr.packets = [pkt]
            info = self.info.get(route)
            if info is None:
                info = self.info[route] = _RouteInfo(route)
            t_head = t0 + info.base + nbytes * info.inv_bw
            npk = -(-nbytes // self.packet_bytes)
            for w in route.wires:
                cross_flow(w, nbytes, npk)
            if eng.record_hops:
                self._record_hops(tr, t0, nbytes)
            eng._at(t_head, (pkt, t_head, t_head), self._arrive)
            return tr
        tr.packets = [Packet(tr, 0, nbytes, -(-nbytes // self.flit), 0)]
        eng._at(t0, tr, self._start)
        return tr

    def send_control(self, request, nodes: tuple[str, ...], payload: object, *, t_start: float | None = None,
                     apply_source_overhead: bool = True) -> Transfer:
        """``GraphEngine.send_control`` in flow fidelity: the same times, one event instead of one per hop.

        A control message occupies no bandwidth, so its arrival is fixed when it is sent: starting at ``t_start``
        (default now, ns) plus the source's overhead, it pays every wire's propagation latency and the overhead of
        every node in between, added in the order the packet path adds them hop by hop (the same float result).
        Its wires count one message each now, and the hops it would record are recorded now.
        """
        eng = self.engine
        if len(nodes) < 2:
            raise MessageError(f"a control message needs a destination other than its source {nodes[0]}")
        route = eng.route(nodes)
        t = eng.env._now if t_start is None else t_start
        overheads = route.overheads
        if apply_source_overhead:
            t += overheads[0]
        tr = Transfer(request, route, 0, "control", 0, _noop)
        tr.payload = payload
        pkt = Packet(tr, 0, 0, 0, 0)
        tr.packets = [pkt]
        hops = request.hops if eng.record_hops else None
        for h, w in enumerate(route.wires):
            ready = t + overheads[h] if h else t
            if hops is not None:
                hops.append(("control", route.nodes[h], t, ready))
            cross_control(w, pkt, ready)  # the packet path's wire step: counts the message, t_head = ready + latency
            t = pkt.t_head
        pkt.hop = route.hops
        eng._at(t, pkt, self._arrive_control)
        return tr

    def _arrive_control(self, pkt: Packet) -> None:
        """A control message has arrived: hand its payload to the last node, as the packet path's arrival does."""
        tr = pkt.transfer
        route = tr.route
        now = pkt.t_head
        if tr.t_first < 0:
            tr.t_first = now
        if self.engine.record_hops:
            tr.request.hops.append((tr.kind, route.nodes[-1], now, now))
        route.comps[-1].on_control(tr.payload, now, tr)

    def _start(self, tr: Transfer) -> None:
        eng = self.engine
        now = eng.env._now
        route = tr.route
        info = self.info.get(route)
        if info is None:
            info = self.info[route] = _RouteInfo(route)
        nbytes = tr.nbytes
        head = self.flit
        npk = -(-nbytes // self.packet_bytes)
        for w in route.wires:
            cross_flow(w, nbytes, npk)
        if eng.record_hops:
            self._record_hops(tr, now, head)
        cap = None
        ready = tr.ready
        if ready is not None:
            r0, d = ready[-1]
            last = nbytes - (len(ready) - 1) * self.packet_bytes
            t_last = r0 + (-(-last // self.flit) - 1) * d  # when the last flit is ready at the source
            span = t_last - now + head / info.min_bw
            if span > 0 and nbytes / span < info.min_bw:
                cap = nbytes / span
        f = Flow(tr, route.wires, info.base + head * (info.inv_bw - 1.0 / info.min_bw),
                 now + info.base + head * info.inv_bw, cap, next(self.seq), info)
        f.t_ref = now
        self.flows += 1
        if self._enter(f):
            # Alone on every wire: max-min gives it its bottleneck (or its source's pace), so it needs no solve.
            # A flow that joins any of its wires later marks that wire dirty, and that solve includes this one.
            f.rate = r = cap if cap is not None else info.min_bw
            f.t_finish = now + f.left / r
            heappush(self.heap, (f.t_finish, f.seq, f))
            self._arm()
            return
        dirty = self.dirty
        for w in f.wires:
            dirty.add(w)
        self._request_solve()

    # ------------------------------------------------------------------ bundles
    def _bundle(self, flows: frozenset[Flow], bw: float) -> _Bundle:
        """The bundle of wires carrying exactly ``flows`` at bandwidth ``bw`` (made empty if there is none)."""
        b = self.bundles.get((flows, bw))
        if b is None:
            b = self.bundles[flows, bw] = _Bundle(flows, bw)
        return b

    def _drop(self, b: _Bundle) -> None:
        """Forget ``b``, left without wires."""
        del self.bundles[b.flows, b.bw]

    def _enter(self, f: Flow) -> bool:
        """Put ``f`` on its wires: each wire moves to the bundle of its flows plus ``f``. True if every wire of
        ``f`` carried no flow before (it is alone)."""
        bundle_of = self.bundle_of
        moved: dict[object, _Bundle] = {}  # bundle a wire was in (or its bandwidth, if it was in none) -> new one
        alone = True
        for w in f.wires:
            old = bundle_of.get(w)
            if old is None:
                new = moved.get(w.bw)
                if new is None:
                    new = moved[w.bw] = self._bundle(frozenset((f,)), w.bw)
            else:
                alone = False  # (a route crossing this wire twice is not alone either, as ever)
                if f in old.flows:  # the route crosses this wire twice
                    continue
                new = moved.get(old)
                if new is None:
                    new = moved[old] = self._bundle(old.flows | {f}, old.bw)
                old.wires.discard(w)
                old.first = -1
                if not old.wires:
                    self._drop(old)
            new.wires.add(w)  # (new holds f, so it was made by this call: its positions are not known yet)
            bundle_of[w] = new
        return alone

    def _leave(self, f: Flow) -> None:
        """Take ``f`` off its wires: each wire moves to the bundle of its other flows, and is marked dirty; a
        wire left without flows leaves its bundle and is not (it has nothing to solve)."""
        bundle_of = self.bundle_of
        dirty = self.dirty
        moved: dict[_Bundle, _Bundle | None] = {}
        for w in f.wires:
            old = bundle_of.get(w)
            if old is None or f not in old.flows:  # the route crosses this wire twice
                if old is not None:
                    dirty.add(w)
                continue
            if old in moved:
                new = moved[old]
            else:
                rest = old.flows - {f}
                new = moved[old] = self._bundle(rest, old.bw) if rest else None
            old.wires.discard(w)
            old.first = -1
            if not old.wires:
                self._drop(old)
            if new is None:
                del bundle_of[w]
            else:
                new.wires.add(w)
                new.first = -1
                bundle_of[w] = new
                dirty.add(w)

    def _record_hops(self, tr: Transfer, now: float, head: int) -> None:
        route = tr.route
        hops = tr.request.hops
        t = now
        for h, w in enumerate(route.wires):
            start = t + route.overheads[h] if h else t
            hops.append((tr.kind, route.nodes[h], t, start))
            t = start + head / w.bw + w.latency_ns
        hops.append((tr.kind, route.nodes[-1], t, t))

    # ------------------------------------------------------------------ the solver
    def _request_solve(self) -> None:
        if not self.solving:
            self.solving = True
            self.engine._at(self.engine.env._now, None, self._solve)

    def _solve(self, _: object) -> None:
        """Recompute the rates of every flow linked (through shared wires) to a wire whose flows changed."""
        self.solving = False
        now = self.engine.env._now
        self.solves += 1
        bundle_of = self.bundle_of
        seen_b = {b for w in self.dirty if (b := bundle_of.get(w)) is not None}  # bundles of the component
        self.dirty.clear()
        stack = list(seen_b)
        flows: list[Flow] = []
        seen_f: set[Flow] = set()
        get = bundle_of.__getitem__
        while stack:
            for f in stack.pop().flows:
                if f not in seen_f:
                    seen_f.add(f)
                    flows.append(f)
                    more = set(map(get, f.wires))
                    more -= seen_b
                    seen_b |= more
                    stack.extend(more)
        if flows:
            flows.sort(key=_by_seq)
            rates = _rates(flows, seen_b)
            heap = self.heap
            cut = self._cut
            for f, r in zip(flows, rates, strict=True):
                if f.t_ref < now and f.rate:
                    f.left -= f.rate * (now - f.t_ref)
                    cut(f, now, False)  # what it drained so far reaches the terminal in its own order
                f.t_ref = now
                if r == f.rate:
                    continue
                f.rate = r
                f.t_finish = now + (f.left / r if f.left > 0 else 0.0)
                heappush(heap, (f.t_finish, f.seq, f))
            self._ticks(flows, now)
        self._arm()

    def _ticks(self, flows: list[Flow], now: float) -> None:
        """Keep cutting flows that share their last wire into pieces of about ``piece_bytes``.

        A terminal serves what arrives in the order it is handed over, keeping one "free at" time per channel; two
        flows handed over whole, each spread over the same window, would be served one after the other. Cut
        every :attr:`piece_bytes` of the slowest of them, their pieces interleave at the terminal as their
        packets would, up to one piece's time.
        """
        due = self.tick_due
        bundle_of = self.bundle_of
        for f in flows:
            last = f.wires[-1]
            if len(bundle_of[last].flows) < 2 or f.done:
                continue
            t = now + self.piece_bytes / f.rate
            if t < due.get(last, float("inf")) or due[last] <= now:
                due[last] = t
                self.engine._at(t, (last, t), self._tick)

    def _tick(self, item: tuple[Wire, float]) -> None:
        last, t = item
        if self.tick_due.get(last) != t:  # superseded by an earlier one
            return
        del self.tick_due[last]
        b = self.bundle_of.get(last)
        if b is not None and len(b.flows) >= 2:
            self.dirty.add(last)
            self._request_solve()

    def _arm(self) -> None:
        heap = self.heap
        while heap and (heap[0][2].done or heap[0][0] != heap[0][2].t_finish):
            heappop(heap)
        if heap and heap[0][0] < self.wake_at:
            self.wake_at = t = heap[0][0]
            self.engine._at(t, t, self._wake)

    def _wake(self, t: float) -> None:
        if t != self.wake_at:  # superseded by an earlier wake-up
            return
        self.wake_at = float("inf")
        now = self.engine.env._now
        heap = self.heap
        while heap and heap[0][0] <= now + _EPS_NS:
            t_finish, _, f = heappop(heap)
            if f.done or t_finish != f.t_finish:
                continue
            f.done = True
            self._leave(f)  # the flows left on its wires may speed up
            self._cut(f, now, True)
        if self.dirty:
            self._request_solve()
        else:
            self._arm()

    # ------------------------------------------------------------------ delivery
    def _cut(self, f: Flow, now: float, final: bool) -> None:
        """Deliver what ``f`` drained since its last cut as one packet, ``f.fixed`` ns later.

        A flow alone for its whole life is one packet (first flit at ``t_head``, last at ``t_tail``). A flow
        whose rate changed is cut at each change, so a terminal that serves arrivals in order (the HBM
        controller's channels, the TCM's write channel) sees the flows that share it interleaved as they
        drained, not one whole flow after another. ``Transfer.packets`` keeps one slot more than has been
        delivered until the last piece, so ``engine.landed`` completes the transfer with its last piece.
        """
        tr = f.transfer
        sent = f.sent
        upto = tr.nbytes if final else min(tr.nbytes, int(tr.nbytes - f.left))
        n = upto - sent
        if n <= 0 and not final:
            return
        t0 = f.t_head if not sent else f.t_cut + f.fixed
        t1 = now + f.fixed
        if t0 > t1:
            t0 = t1
        pkts = tr.packets
        pkt = Packet(tr, len(pkts) - 1, n, -(-n // self.flit) if n > 0 else 1, sent)
        if final:
            pkts[-1] = pkt
        else:
            pkts.insert(len(pkts) - 1, pkt)
        f.sent = upto
        f.t_cut = now
        self.engine._at(t1, (pkt, t0, t1), self._arrive)

    def _arrive(self, item: tuple) -> None:
        """A piece of a transfer has fully arrived: hand it, as one packet, to the route's last component."""
        pkt, t_head, t_tail = item
        tr = pkt.transfer
        route = tr.route
        pkt.hop = route.hops
        pkt.t_head = t_head
        pkt.t_tail = t_tail
        pkt.delta = (t_tail - t_head) / (pkt.nflits - 1) if pkt.nflits > 1 else 0.0
        if tr.t_first < 0:
            tr.t_first = t_head
        route.comps[-1].on_packet(pkt, t_head)


def _noop(tr: Transfer, t: float) -> None:
    """Completion of a control transfer: its destination's ``on_control`` carries the request on."""


def _by_seq(f: Flow) -> int:
    return f.seq


def _rates(flows: list[Flow], bundles: set[_Bundle]) -> list[float]:
    """``max_min_rates([f.wires for f in flows], wire bandwidths, [f.cap for f in flows])`` (bytes/ns), float for
    float, from the bundles the flows' wires are in (``bundles``: all of them) instead of wire by wire.

    ``flows`` are sorted by ``seq``. A bundle is a group of :func:`_fill`: its flows in the order of ``flows``,
    its bandwidth, and as its links' first appearances the positions of its wires in the route of its first
    flow (a wire first appears in the first flow that crosses it, at its position there), as
    ``index << 32 | position``. A flow whose route crosses a wire twice takes :func:`max_min_rates` itself.
    """
    for i, f in enumerate(flows):
        if not f.info.simple:
            return max_min_rates([f.wires for f in flows], _Capacity, [f.cap for f in flows])
        f.index = i
    order = list(bundles)
    rem: list[float] = []
    cnt: list[int] = []
    users: list[list[int]] = []
    of_flow: list[list[int]] = [[] for _ in flows]
    heap: list[tuple[float, int, int, int, int, int]] = []
    for g, b in enumerate(order):
        ordered = b.ordered
        if ordered is None:
            ordered = b.ordered = sorted(b.flows, key=_by_seq)
        us = [f.index for f in ordered]
        for i in us:
            of_flow[i].append(g)
        cap = float(b.bw)
        rem.append(cap)
        cnt.append(len(us))
        users.append(us)
        if b.first < 0:
            pos = list(map(ordered[0].info.pos.__getitem__, b.wires))
            b.first = min(pos)
            b.last = max(pos)
        base = us[0] << 32
        heap.append((cap / len(us), base | b.first, base | b.last, g, 0, len(b.wires)))
    heap.sort()

    def member_keys(g: int) -> list[int]:
        b = order[g]
        base = users[g][0] << 32
        return sorted([base | p for p in map(b.ordered[0].info.pos.__getitem__, b.wires)])

    return fill_groups(len(flows), [f.cap for f in flows], rem, cnt, users, of_flow, heap, member_keys)


class _WireCapacity:
    """``capacity[wire]`` for :func:`max_min_rates`: a wire's bandwidth."""

    __slots__ = ()

    def __getitem__(self, w: Wire) -> float:
        return w.bw


_Capacity = _WireCapacity()

__all__ = ["FIDELITIES", "Flow", "FlowScheduler", "check_fidelity"]
