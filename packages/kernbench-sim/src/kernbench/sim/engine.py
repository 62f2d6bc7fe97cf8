"""The discrete-event engine: SimPy environment, fabric, requests and completion.

:class:`GraphEngine` owns one SimPy environment, one :class:`Wire` per graph
edge, one component per bound node, the op log and the correlation-id
counter. ``submit(msg)`` turns a message into transfers along routed paths
and returns a :class:`Request` (a completion future); ``run()`` drains the
event queue and raises :class:`DeadlockError` if any request is left waiting.
Every way of running the queue checks the run's budgets (:mod:`kernbench.sim.limits`)
between chunks of events and ends a runaway run with :class:`SimulationLimitError`.

Every nanosecond a request reports is a scheduled event on a node or wire:
node overheads, wire serialisation and propagation, and terminal service.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappush
from itertools import pairwise

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, URGENT, Event

from kernbench.sim.component import ComponentRegistry
from kernbench.sim.errors import ComponentError, DeadlockError, MessageError, SimulationLimitError
from kernbench.sim.fabric import Packet, Route, Transfer, Wire, split_packets
from kernbench.sim.limits import CHECK_EVERY, Limits, WallClockExpired
from kernbench.sim.memory_store import MemoryStore
from kernbench.sim.messages import TRANSFER_KINDS, MessageKind, record_transfer
from kernbench.sim.oplog import OpLog
from kernbench.topology.address import PhysAddr
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.routing import AddressResolver, PathRouter


class _Fire(Event):
    """An already-triggered event that hands one value to one callback when its time comes."""

    def __init__(self, env: simpy.Environment, value: object, callback: Callable) -> None:
        # NOTE: inlined from Event.__init__ plus succeed(), for performance.
        self.env = env
        self.callbacks = [callback]
        self._value = value
        self._ok = True


class Request:
    """A submitted message: correlation id, timing, hop trace and completion event.

    ``trace`` holds ``(leg, node, t_in, t_out)`` for the first packet of each
    leg, in ns; ``leg`` is the transfer kind: ``"write"``, or ``"read_cmd"``
    then ``"read_data"`` for a read.
    """

    __slots__ = ("complete", "corr_id", "done", "error", "legs", "msg", "op_name", "pending", "read_nbytes",
                 "result", "source", "t_end", "t_submit", "trace")

    def __init__(self, corr_id: int, msg: object, t_submit: float, done: simpy.Event) -> None:
        self.corr_id = corr_id
        self.msg = msg
        self.t_submit = t_submit
        self.t_end: float | None = None
        self.done = done
        self.trace: list[tuple[str, str, float, float]] = []
        self.source = ""
        self.op_name = ""
        self.read_nbytes = 0
        self.legs: list[tuple[str, ...]] = []
        self.result: object = None
        self.error: BaseException | None = None
        self.pending = 0
        self.complete = record_transfer  # the message kind's completion step

    @property
    def latency_ns(self) -> float:
        """Completion time minus submit time, ns (``RuntimeError`` before completion)."""
        if self.t_end is None:
            raise RuntimeError(f"request {self.corr_id} has not completed")
        return self.t_end - self.t_submit


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Counters of one directed wire after a run (bytes, ns).

    ``busy_ns`` is the time the wire was held by packets (first flit start to
    last flit end), which exceeds ``bytes / bw`` when flits arrived spaced by
    a slower upstream link; ``max_wait_ns`` is the worst queueing delay."""

    src: str
    dst: str
    kind: str
    bytes: int
    busy_ns: float
    packets: int
    messages: int
    max_wait_ns: float


class GraphEngine:
    """Runs messages through a compiled topology on SimPy.

    ``registry`` binds implementation names to component classes (see
    ``kernbench.components.default_registry()``). ``trace`` records per-hop
    timestamps of each leg's first packet. ``router`` lets several engines on
    one graph share a memoised :class:`PathRouter`. ``limits`` are the run's
    budgets (default: :class:`~kernbench.sim.limits.Limits`).
    """

    def __init__(self, graph: TopologyGraph, registry: ComponentRegistry, *, trace: bool = True,
                 router: PathRouter | None = None, data: bool = False, limits: Limits | None = None) -> None:
        spec = graph.spec
        self.graph = graph
        self.spec = spec
        self.env = simpy.Environment()
        _check_simpy_internals(self.env)
        self.resolver = AddressResolver(graph)
        self.router = router if router is not None else PathRouter(graph)
        self.flit_bytes = spec.fabric.flit_bytes
        self.packet_bytes = spec.fabric.packet_bytes
        self.control_bytes = spec.fabric.control_bytes
        self.trace_enabled = trace
        self.oplog = OpLog()
        self.data = data
        self.memory: MemoryStore | None = MemoryStore() if data else None
        self.events = 0
        self.submitted = 0
        self.limits = limits if limits is not None else Limits()
        self.max_events = self.limits.max_events or math.inf
        self.max_sim_ns = self.limits.max_sim_ns or math.inf
        self.max_records = self.limits.max_records or math.inf
        self.deadline: float | None = None  # time.monotonic() past which the run stops (set by limits.watchdog)
        self.timeout_s: float | None = None
        # Why this engine cannot run on (a budget ran out, or an interrupt unwound it mid-step), else None: the
        # runtime refuses further work and a session closes without simulating (see limit_error and _drive).
        self.halted: str | None = None
        self.wires: dict[tuple[str, str], Wire] = {}  # created on first use by route()
        self.components = registry.build(self, graph)
        self._routes: dict[tuple[str, ...], Route] = {}
        self._pending: dict[int, Request] = {}
        self._next_corr = 1
        self._kinds: dict[type, MessageKind] = {k.msg_type: k for k in (*TRANSFER_KINDS, *registry.message_kinds)}

    # ------------------------------------------------------------------ public API
    @property
    def now(self) -> float:
        """Current simulated time, ns."""
        return self.env.now

    def submit(self, msg: object) -> Request:
        """Validate a message, stamp a correlation id, and inject it now."""
        kind = self._kinds.get(type(msg))
        if kind is None:
            raise MessageError(f"cannot submit {type(msg).__name__}; supported: "
                               f"{', '.join(t.__name__ for t in self._kinds)}")
        nbytes = getattr(msg, "nbytes", 1)
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise MessageError(f"{type(msg).__name__}.nbytes must be a positive integer, got {nbytes!r}")
        req = Request(self._next_corr, msg, self.env.now, self.env.event())
        kind.start(self, req)  # raises before anything is scheduled if the message cannot be routed
        if kind.complete is not None:
            req.complete = kind.complete
        self._next_corr += 1
        self.submitted += 1
        self._pending[req.corr_id] = req
        return req

    def run(self, until: float | None = None) -> None:
        """Process events until the queue is empty (or ``until`` ns); detect stuck requests."""
        if until is not None:
            at = float(until)
            if at <= self.env.now:
                raise ValueError(f"until ({at}) must be greater than the current simulation time")
            stop = Event(self.env)
            stop._ok, stop._value = True, None
            self.env.schedule(stop, URGENT, at - self.env.now)  # before every regular event at that time
            self._drive(stop)
        else:
            self._drive(None)
            if self._pending:
                raise self._deadlock("event queue empty")

    def wait(self, request: Request) -> None:
        """Run until ``request`` completes; :class:`DeadlockError` if the event queue empties first."""
        if request.t_end is not None:
            return
        if not self._drive(request.done) and request.t_end is None:
            raise self._deadlock(f"event queue empty while waiting for corr {request.corr_id}")

    def wait_any(self, groups: list[list[Request]]) -> None:
        """Run until every request of at least one group has completed; :class:`DeadlockError` if the event queue
        empties first."""
        open_groups = [[r for r in g if r.t_end is None] for g in groups]
        if not groups or any(not g for g in open_groups):
            return
        env = self.env
        stop = simpy.AnyOf(env, [simpy.AllOf(env, [r.done for r in g]) for g in open_groups])
        if not self._drive(stop) and not any(all(r.t_end is not None for r in g) for g in open_groups):
            ids = ", ".join(str(r.corr_id) for g in open_groups for r in g if r.t_end is None)
            raise self._deadlock(f"event queue empty while waiting for corr {ids}")

    def _drive(self, stop: Event | None) -> bool:
        """Step SimPy until ``stop`` has been processed (True) or the queue is empty (False, or always with
        ``stop=None``), checking the budgets once per :data:`CHECK_EVERY` steps (more often when the event or
        record budget is nearly used up, so a small budget stops the run close to it).

        This replaces ``Environment.run``: the same steps in the same order, so
        results are identical; the budget check between chunks costs nothing
        per event.
        """
        if stop is not None:
            if stop.callbacks is None:  # already processed
                return True
            stop.callbacks.append(StopSimulation.callback)
        # NOTE: SimPy's own loop is `while True: self.step()`; a local `step` over a range is no slower.
        step = self.env.step
        oplog = self.oplog
        try:
            while True:
                left = min(self.max_events - self.events, self.max_records - len(oplog))
                for _ in range(CHECK_EVERY if left >= CHECK_EVERY else max(1, int(left) + 1)):
                    step()
                self._check_budget()
        except StopSimulation:
            self._check_budget()  # a run that ends between two checks is held to its budget too
            return True
        except EmptySchedule:
            self._check_budget()
            return False
        except WallClockExpired as exc:  # the watchdog's alarm landed in a step: the same error as a budget
            if self.timeout_s is None:  # not this engine's watchdog
                raise
            raise self.limit_error(f"the run took more than the wall-clock timeout of {self.timeout_s:g} s",
                                   "--timeout SECONDS / timeout_s=", where=exc.where) from None
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: the step was cut short
            if not isinstance(exc, Exception) and type(exc).__name__ != "GreenletExit" and self.halted is None:
                self.halted = f"{type(exc).__name__} interrupted the simulation at {self.env._now:,.1f} ns"
            raise

    def _check_budget(self) -> None:
        """:class:`SimulationLimitError` when the run has used up its events, simulated time, op-log records or
        wall-clock time."""
        if self.events > self.max_events:
            raise self.limit_error(f"the run processed {self.events:,} events, more than max_events = "
                                   f"{self.limits.max_events:,}", "--max-events N / max_events=")
        if self.env._now > self.max_sim_ns:
            raise self.limit_error(f"the simulated clock reached {self.env._now:,.1f} ns, beyond max_sim_ns = "
                                   f"{self.limits.max_sim_ns:,.0f}", "--max-sim-ns NS / max_sim_ns=")
        if len(self.oplog) > self.max_records:
            raise self.limit_error(f"the op log holds {len(self.oplog):,} records, more than max_records = "
                                   f"{self.limits.max_records:,}", "--max-records N / max_records=")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self.limit_error(f"the run took more than the wall-clock timeout of {self.timeout_s:g} s",
                                   "--timeout SECONDS / timeout_s=")

    def limit_error(self, what: str, knob: str, where: str | None = None) -> SimulationLimitError:
        """A :class:`SimulationLimitError` for ``what``, naming the last op, the PE and kernel it belongs to, where
        Python was executing (``where``, for the wall-clock watchdog) and the ``knob`` that raises the budget."""
        last = self.oplog.last()
        running = [b for c in self.components.created().values() if (b := c.activity()) is not None]
        if last is not None:
            op = f"last op {last.op_name!r} on {last.component_id} at {last.t_start:,.1f} ns"
            mine = [b for b in running if b.startswith(last.component_id.rsplit(".", 1)[0] + " ")]
            running = mine or running
        else:
            op = "no op logged yet"
        kernel = f"; {running[0]}" + (f" (and {len(running) - 1} more PE(s))" if len(running) > 1 else "") \
            if running else "; no kernel was running"
        at = f"; Python was executing {where}" if where else ""
        self.halted = what  # the run is over: whoever catches the error, the engine is not driven again
        return SimulationLimitError(f"simulation stopped: {what}; {op}{kernel}{at}; if the run is meant to be "
                                    f"this long raise the budget ({knob}), else look for a loop that never ends")

    def _deadlock(self, what: str) -> DeadlockError:
        """A DeadlockError naming every stuck request and every component that reports itself blocked."""
        stuck = "; ".join(f"corr {r.corr_id} {type(r.msg).__name__} from {r.source}" for r in self._pending.values())
        blocked = [b for c in self.components.created().values() if (b := c.blocked()) is not None]
        detail = f"; blocked: {'; '.join(blocked)}" if blocked else ""
        return DeadlockError(f"{what}: {len(self._pending)} request(s) never completed: {stuck}{detail}")

    def link_stats(self, include_idle: bool = False) -> list[LinkStats]:
        """Per-wire counters in graph edge order: every wire that carried traffic, or every edge."""
        if include_idle:
            out = []
            for e in self.graph.edges:
                w = self.wires.get((e.src, e.dst))
                out.append(LinkStats(e.src, e.dst, e.kind, w.bytes, w.busy_ns, w.packets, w.messages, w.max_wait_ns)
                           if w is not None else LinkStats(e.src, e.dst, e.kind, 0, 0.0, 0, 0, 0.0))
            return out
        order = self.graph.edge_index
        used = sorted((w for w in self.wires.values() if w.packets), key=lambda w: order(w.edge.src, w.edge.dst))
        return [LinkStats(w.edge.src, w.edge.dst, w.edge.kind, w.bytes, w.busy_ns, w.packets, w.messages,
                          w.max_wait_ns) for w in used]

    def route(self, nodes: tuple[str, ...]) -> Route:
        """The memoised :class:`Route` for a node path (every node must have a component)."""
        r = self._routes.get(nodes)
        if r is None:
            comps = []
            for n in nodes:
                c = self.components.get(n)
                if c is None:
                    t = self.graph.nodes[n].type
                    raise ComponentError(f"node {n} (type {t}) lies on the path {nodes[0]} → {nodes[-1]} but has "
                                         f"no component; bind '{t}' under components: in the topology")
                comps.append(c)
            wires = []
            for a, b in pairwise(nodes):
                w = self.wires.get((a, b))
                if w is None:
                    if not self.graph.has_edge(a, b):
                        raise ComponentError(f"no link for {a} → {b}")
                    w = self.wires[(a, b)] = Wire(self.graph.edge(a, b), self.flit_bytes)
                wires.append(w)
            r = self._routes[nodes] = Route(nodes, tuple(wires), tuple(comps))
        return r

    # ------------------------------------------------------------------ transfers
    def send(self, request: Request, route: Route, nbytes: int, *, kind: str, addr: int, t_start: float,
             on_done: Callable[[Transfer, float], None], ready: list[tuple[float, float]] | None = None,
             read_nbytes: int = 0) -> Transfer:
        """Start a payload along ``route``; its first packet enters the first wire at ``t_start``."""
        tr = Transfer(request, route, nbytes, kind, addr, on_done)
        tr.read_nbytes = read_nbytes
        tr.packets = split_packets(tr, self.packet_bytes, self.flit_bytes)
        tr.ready = ready
        first = tr.packets[0]
        if ready is not None:
            first.delta = ready[0][1]
        self._at(t_start, first, self._hop)
        return tr

    def _at(self, t: float, value: object, callback: Callable) -> None:
        # NOTE: inlined Environment.schedule for a pre-triggered event with one callback -- the cheapest
        # SimPy event (no process per packet); benchmarks/bench_fabric.py shows the cost of anything more.
        env = self.env
        heappush(env._queue, (t, NORMAL, next(env._eid), _Fire(env, value, callback)))
        self.events += 1

    def _hop(self, ev: simpy.Event) -> None:
        pkt: Packet = ev._value
        now = self.env._now
        route = pkt.route
        h = pkt.hop
        wire = route.wires[h]
        ready = now + route.overheads[h] if h else now
        m = pkt.nflits
        if not m:  # control message: sideband, pays node overheads and propagation, occupies no bandwidth
            pkt.hop = h + 1
            pkt.t_head = pkt.t_tail = ready + wire.latency_ns
            wire.messages += 1
            if self.trace_enabled:
                pkt.transfer.request.trace.append(("control", route.nodes[h], now, ready))
            self._at(pkt.t_head, pkt, self._hop if h + 1 < route.hops else self._arrive)
            return
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
        lat = wire.latency_ns
        pkt.delta = delta
        pkt.t_head = head + lat
        pkt.t_tail = end + lat
        pkt.hop = h + 1
        tr = pkt.transfer
        if pkt.index == 0:
            wire.messages += 1
            if self.trace_enabled:
                tr.request.trace.append((tr.kind, route.nodes[h], now, start))
        if h == 0 and pkt.index + 1 < len(tr.packets):
            nxt = tr.packets[pkt.index + 1]
            t_next = end
            if tr.ready is not None:
                r0, nxt.delta = tr.ready[nxt.index]
                if r0 > t_next:
                    t_next = r0
            self._at(t_next, nxt, self._hop)
        # NOTE: _at inlined on the hottest line of the simulator.
        env = self.env
        heappush(env._queue, (pkt.t_head, NORMAL, next(env._eid),
                              _Fire(env, pkt, self._hop if h + 1 < route.hops else self._arrive)))
        self.events += 1

    def _arrive(self, ev: simpy.Event) -> None:
        pkt: Packet = ev._value
        tr = pkt.transfer
        now = self.env._now
        if tr.t_first < 0:
            tr.t_first = now
        if pkt.index == 0 and self.trace_enabled:
            tr.request.trace.append((tr.kind, pkt.route.nodes[-1], now, now))
        if not pkt.nflits:
            pkt.route.comps[-1].on_control(tr.payload, now, tr)
        else:
            pkt.route.comps[-1].on_packet(pkt, now)

    def landed(self, pkt: Packet, t_done: float) -> None:
        """Called by a terminal once it knows when ``pkt`` is fully served (``t_done`` ns)."""
        tr = pkt.transfer
        tr.landed += 1
        if t_done > tr.t_done:
            tr.t_done = t_done
        if tr.landed == len(tr.packets):
            tr.on_done(tr, tr.t_done)

    def finish(self, request: Request, t_end: float) -> None:
        """Complete ``request`` at ``t_end`` (may be in the future: a completion event is scheduled)."""
        self._at(t_end, request, self._complete)

    def _complete(self, ev: simpy.Event) -> None:
        req: Request = ev._value
        req.t_end = self.env._now
        del self._pending[req.corr_id]
        req.complete(self, req)  # data-mode effects and the op-log row of the message's kind
        req.done.succeed(req)

    # ------------------------------------------------------------------ primitives for message kinds
    def start_transfer(self, req: Request, src: str, path: tuple[str, ...], op_name: str, addr: PhysAddr,
                       write: bool) -> None:
        """Start ``req``'s payload from ``src`` along ``path`` after the source's overhead: a write of
        ``req.msg.nbytes`` to ``addr``, or a read command whose terminal replies with the data."""
        if len(path) < 2:
            raise MessageError(f"{type(req.msg).__name__} from {src} targets {src} itself; a transfer needs a "
                               f"destination on another node")
        route = self.route(path)
        req.source = src
        req.op_name = op_name
        req.legs.append(path)
        t0 = self.env.now + self.components[src].overhead_ns
        if write:
            self.send(req, route, req.msg.nbytes, kind="write", addr=addr.offset, t_start=t0,
                      on_done=self._write_done)
        else:
            req.legs.append(tuple(reversed(path)))
            self.send(req, route, self.control_bytes, kind="read_cmd", addr=addr.offset, t_start=t0,
                      on_done=_noop, read_nbytes=req.msg.nbytes)

    def _write_done(self, tr: Transfer, t_done: float) -> None:
        self.finish(tr.request, t_done)

    def send_control(self, request: Request, nodes: tuple[str, ...], payload: object, *, t_start: float | None = None,
                     apply_source_overhead: bool = True) -> Transfer:
        """Send a zero-byte control message along ``nodes``; the last node's ``on_control`` receives ``payload``.

        Control messages pay every node's overhead and every wire's propagation
        latency but occupy no bandwidth (a sideband), so their timing is exact
        and independent of data traffic. The source's overhead is paid first.
        """
        if len(nodes) < 2:
            raise MessageError(f"a control message needs a destination other than its source {nodes[0]}")
        route = self.route(nodes)
        t0 = self.env._now if t_start is None else t_start
        if apply_source_overhead:
            t0 += route.overheads[0]
        tr = Transfer(request, route, 0, "control", 0, _noop)
        tr.payload = payload
        tr.packets = split_packets(tr, self.packet_bytes, self.flit_bytes)
        self._at(t0, tr.packets[0], self._hop)
        return tr

    def control_latency_ns(self, nodes: tuple[str, ...]) -> float:
        """Exact time from a control message leaving its source to arriving at the last node (ns).

        Counts the overheads of the nodes in between and wire propagation; the
        source's and the destination's own overheads are not included.
        """
        route = self.route(nodes)
        return sum(route.overheads[1:-1]) + sum(w.latency_ns for w in route.wires)

    def at(self, t: float, callback: Callable[[object], None], value: object = None) -> None:
        """Call ``callback(value)`` at simulated time ``t`` (ns, not before now)."""
        self._at(max(t, self.env._now), value, lambda ev: callback(ev._value))

    def read_reply(self, cmd: Transfer, ready: list[tuple[float, float]], on_done=None) -> Transfer:
        """Send a read's data back along the reversed command path, paced by ``ready``."""
        nodes = cmd.reply_nodes if cmd.reply_nodes is not None else tuple(reversed(cmd.route.nodes))
        route = self.route(nodes)
        tr = self.send(cmd.request, route, cmd.read_nbytes, kind="read_data", addr=cmd.addr,
                       t_start=ready[0][0], ready=ready, on_done=on_done or cmd.on_reply or self._write_done)
        tr.row_bytes, tr.pitch = cmd.row_bytes, cmd.pitch
        return tr

    def resolve(self, addr: PhysAddr, nbytes: int) -> str:
        """The memory node holding ``nbytes`` at ``addr`` (``MessageError`` for a non-address)."""
        if not isinstance(addr, PhysAddr):
            raise MessageError(f"expected a PhysAddr, got {addr!r}")
        return self.resolver.resolve(addr, nbytes)


def _check_simpy_internals(env: simpy.Environment) -> None:
    """The hot path schedules into SimPy's heap directly (see ``GraphEngine._at``): fail loudly, naming the
    fix, if this SimPy no longer keeps its queue and event-id counter where we push."""
    queue, eid = getattr(env, "_queue", None), getattr(env, "_eid", None)
    if not isinstance(queue, list) or not hasattr(eid, "__next__") or not hasattr(env, "_now"):
        raise ComponentError(f"simpy {simpy.__version__} does not keep Environment._queue/_eid/_now as the "
                             f"engine expects; install the pinned range simpy>=4.1,<4.2 (kernbench-sim's "
                             f"pyproject) or update GraphEngine._at")


def _noop(tr: Transfer, t: float) -> None:
    """Completion of a read command: the terminal's reply carries the request on."""


__all__ = ["GraphEngine", "LinkStats", "Request"]
