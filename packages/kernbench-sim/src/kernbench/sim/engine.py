"""The discrete-event engine: SimPy environment, fabric, requests and completion.

:class:`GraphEngine` owns one SimPy environment, one :class:`Wire` per graph
edge, one component per bound node, the op log and the correlation-id
counter. ``submit(msg)`` turns a message into transfers along routed paths
and returns a :class:`Request` (a completion future); ``run()`` drains the
event queue and raises :class:`DeadlockError` if any request is left waiting.
Every way of running the queue enforces the run's budgets, wall clock
included (:mod:`kernbench.sim.limits`), and ends a runaway run with
:class:`SimulationLimitError`. What code outside ``kernbench.sim`` may use
of the engine is the :class:`~kernbench.sim.protocol.Engine` protocol; the
wire formula is :func:`kernbench.sim.fabric.cross`; the per-link counters
are read with :mod:`kernbench.sim.links`.

Every nanosecond a request reports is a scheduled event on a node or wire:
node overheads, wire serialisation and propagation, and terminal service.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from heapq import heappop, heappush
from itertools import pairwise
from typing import TypeVar

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, URGENT, Event

from kernbench.sim import limits as budget
from kernbench.sim.accel import compiled_calendar, compiled_module
from kernbench.sim.collector import RunCollector, keep_graph
from kernbench.sim.component import ComponentRegistry
from kernbench.sim.errors import ComponentError, MessageError, SimulationLimitError
from kernbench.sim.fabric import Packet, Route, Transfer, Wire, cross, cross_control, split_packets
from kernbench.sim.flow import FlowScheduler, check_fidelity
from kernbench.sim.limits import CHECK_EVERY, Limits, WallClockExpired
from kernbench.sim.links import LinkRecord, link_records
from kernbench.sim.memory_store import MemoryStore
from kernbench.sim.messages import TRANSFER_KINDS, MessageKind
from kernbench.sim.oplog import OpLog
from kernbench.sim.protocol import Completion, Request
from kernbench.topology.address import PhysAddr
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.resolver import AddressResolver
from kernbench.topology.routing import PathRouter

T = TypeVar("T")


class GraphEngine:
    """Runs messages through a compiled topology on SimPy.

    ``registry`` binds implementation names to component classes (see
    ``kernbench.components.default_registry()``). ``record_hops`` keeps per-hop
    timestamps of each leg's first packet in :attr:`Request.hops`. ``router`` is the memoised
    :class:`PathRouter` to use (default: the one every engine on ``graph`` shares in this thread,
    :meth:`PathRouter.shared`). ``limits`` are the run's budgets (default:
    :class:`~kernbench.sim.limits.Limits`). ``fidelity`` is ``"packet"`` (every packet an
    event on every wire) or ``"flow"`` (every transfer one flow sharing its links max-min fairly,
    :mod:`kernbench.sim.flow`, ADR 0039). ``accel`` picks the event calendar: kernbench-accel's compiled one
    (True, when installed), the pure-Python one (False), or as ``KERNBENCH_ACCEL`` says (None, the default;
    :mod:`kernbench.sim.accel`); both give identical results (ADR 0046).
    """

    def __init__(self, graph: TopologyGraph, registry: ComponentRegistry, *, record_hops: bool = True,
                 router: PathRouter | None = None, data: bool = False, limits: Limits | None = None,
                 fidelity: str = "packet", accel: bool | None = None) -> None:
        spec = graph.spec
        self.graph = graph
        self.spec = spec
        self.env = simpy.Environment()
        _check_simpy_internals(self.env)
        self.resolver = AddressResolver(graph)
        keep_graph(graph)  # a second engine on a large graph freezes it out of the garbage collector
        self.router = router if router is not None else PathRouter.shared(graph)
        self.flit_bytes = spec.fabric.flit_bytes
        self.packet_bytes = spec.fabric.packet_bytes
        self.control_bytes = spec.fabric.control_bytes
        self.record_hops = record_hops
        self.oplog = OpLog()
        self.data = data
        self.memory: MemoryStore | None = MemoryStore() if data else None
        self.events = 0
        self.submitted = 0
        self.limits = limits if limits is not None else Limits()
        self.max_events = self.limits.max_events or math.inf
        self.max_sim_ns = self.limits.max_sim_ns or math.inf
        self.max_records = self.limits.max_records or math.inf
        # The wall clock: time.monotonic() past which the run stops, and the limit it came from (a watchdog may
        # narrow both for a block).
        self.timeout_s: float | None = self.limits.timeout_s
        self.deadline: float | None = self.limits.deadline()
        # Why this engine cannot run on (a budget ran out, or an interrupt unwound it mid-step), else None: the
        # runtime refuses further work and a session closes without simulating (see limit_error and _drive).
        self.halted: str | None = None
        self.wires: dict[tuple[str, str], Wire] = {}  # created on first use by route()
        self._memos: dict[Callable, object] = {}  # maker -> what memo() made
        self.components = registry.build(self, graph)
        self._routes: dict[tuple[str, ...], Route] = {}
        self._pending: dict[int, Request] = {}
        self._next_corr = 1
        self._kinds: dict[type, MessageKind] = {k.msg_type: k for k in (*TRANSFER_KINDS, *registry.message_kinds)}
        self._on_hop, self._on_arrive = self._hop, self._arrive  # bound once: the hot path schedules them per packet
        # The engine's own calendar: (t, NORMAL, eid, callback, value) entries, eids drawn from SimPy's counter, so
        # merged with SimPy's queue by _drive in exactly the order SimPy would process them (see _at). A list under
        # heapq, or kernbench-accel's compiled Calendar, which also runs _drive's loop and the common packet hop.
        calendar = compiled_calendar(accel)
        self.accelerated = calendar is not None
        if calendar is not None:
            self._cal = calendar(self, self.env, self._on_hop, self._on_arrive, record_hops)
            self._push = self._cal.push
        else:
            self._cal: list[tuple[float, int, int, Callable, object]] = []
            self._push = partial(heappush, self._cal)
        compiled = compiled_module(self)  # the same packets, cut in C on the compiled calendar
        self._split = compiled.split_packets if compiled is not None else split_packets
        self.fidelity = check_fidelity(fidelity)
        self.flows: FlowScheduler | None = None
        if fidelity == "flow":  # the flow scheduler's send and send_control replace the packet path's
            self.flows = FlowScheduler(self)
            self.send = self.flows.send
            self.send_control = self.flows.send_control

    # ------------------------------------------------------------------ public API
    @property
    def now(self) -> float:
        """Current simulated time, ns."""
        return self.env.now

    def completion(self) -> Completion:
        """A fresh, unfired :class:`~kernbench.sim.protocol.Completion`."""
        return Completion(self.env)

    def memo(self, make: Callable[[GraphEngine], T]) -> T:
        """``make(self)``, made on first use and kept with this engine: state that the components of one engine
        share and no other engine may see (a memo of derived data, such as the PE MMU's last split entries)."""
        got = self._memos.get(make)
        if got is None:
            got = self._memos[make] = make(self)
        return got  # type: ignore[return-value]

    def submit(self, msg: object) -> Request:
        """Validate a message, stamp a correlation id, and inject it now."""
        kind = self._kinds.get(type(msg))
        if kind is None:
            raise MessageError(f"cannot submit {type(msg).__name__}; supported: "
                               f"{', '.join(t.__name__ for t in self._kinds)}")
        nbytes = getattr(msg, "nbytes", 1)
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise MessageError(f"{type(msg).__name__}.nbytes must be a positive integer, got {nbytes!r}")
        req = Request(self._next_corr, msg, self.env.now, Completion(self.env))
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
                raise budget.deadlock_error(self, self._pending, "event queue empty")

    def wait(self, request: Request) -> None:
        """Run until ``request`` completes; :class:`DeadlockError` if the event queue empties first."""
        if request.t_end is not None:
            return
        if not self._drive(request.done) and request.t_end is None:
            raise budget.deadlock_error(self, self._pending, f"event queue empty while waiting for corr "
                                                             f"{request.corr_id}")

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
            raise budget.deadlock_error(self, self._pending, f"event queue empty while waiting for corr {ids}")

    def _drive(self, stop: Event | None) -> bool:
        """Step SimPy until ``stop`` has been processed (True) or the queue is empty (False, or always with
        ``stop=None``), checking the budgets once per :data:`CHECK_EVERY` steps (more often when the event or
        record budget is nearly used up, so a small budget stops the run close to it), with the wall-clock
        alarm armed while it steps when the run has a wall-clock limit (:func:`~kernbench.sim.limits.arm_alarm`).

        This replaces ``Environment.run``: the same steps in the same order, so
        results are identical; the budget check between chunks costs nothing
        per event, the alarm a few microseconds per call.
        """
        if stop is not None:
            if stop.callbacks is None:  # already processed
                return True
            stop.callbacks.append(StopSimulation.callback)
        # NOTE: SimPy's own loop is `while True: self.step()`. Here each step takes the earliest entry of SimPy's
        # queue and the engine's calendar, compared as SimPy orders its queue: (time, priority, event id). A
        # calendar entry is a plain callback: no Event object, no callbacks list.
        env = self.env
        step = env.step
        queue = env._queue
        cal = self._cal
        run = cal.run if self.accelerated else None
        pop = heappop
        oplog = self.oplog
        check = budget.check_budget
        collector = RunCollector()
        try:
            alarm = budget.arm_alarm(self) if self.deadline is not None else None
            try:  # disarmed inside the outer try: an alarm that lands while disarming is still this run's limit
                collector.__enter__()
                while True:
                    left = min(self.max_events - self.events, self.max_records - len(oplog))
                    steps = CHECK_EVERY if left >= CHECK_EVERY else max(1, int(left) + 1)
                    if run is not None:  # the compiled calendar takes the same steps
                        run(steps)
                    else:
                        for _ in range(steps):
                            if cal and (not queue or cal[0] < queue[0]):
                                entry = pop(cal)
                                env._now = entry[0]
                                entry[3](entry[4])
                            else:
                                step()
                    check(self)
            finally:
                collector.__exit__()
                if alarm is not None:
                    budget.disarm_alarm(alarm)
        except StopSimulation:
            check(self)  # a run that ends between two checks is held to its budget too
            return True
        except EmptySchedule:
            check(self)
            return False
        except WallClockExpired as exc:  # the alarm landed in a step: the same error as a budget
            if self.timeout_s is None:  # not this engine's alarm
                raise
            raise budget.timeout_error(self, exc.where) from None
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: the step was cut short
            if not isinstance(exc, Exception) and type(exc).__name__ != "GreenletExit" and self.halted is None:
                self.halted = f"{type(exc).__name__} interrupted the simulation at {self.env._now:,.1f} ns"
            raise

    def limit_error(self, what: str, knob: str, where: str | None = None) -> SimulationLimitError:
        """A :class:`SimulationLimitError` for ``what`` that halts this engine
        (:func:`kernbench.sim.limits.limit_error`)."""
        return budget.limit_error(self, what, knob, where)

    def link_stats(self, include_idle: bool = False) -> list[LinkRecord]:
        """Per-link counters in graph edge order, utilisation over ``[0, now]``: every link that carried traffic,
        or every edge (:func:`kernbench.sim.links.link_records`)."""
        return link_records(self, include_idle)

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
        tr.packets = self._split(tr, self.packet_bytes, self.flit_bytes)
        tr.ready = ready
        first = tr.packets[0]
        if ready is not None:
            first.delta = ready[0][1]
        self._at(t_start, first, self._on_hop)
        return tr

    def _at(self, t: float, value: object, callback: Callable[[object], None]) -> None:
        """Call ``callback(value)`` at ``t``: one entry in the engine's calendar, ordered against SimPy's queue as
        a normal-priority SimPy event scheduled now would be (same clock, same event-id counter), so the order of
        every step is the one a pre-triggered SimPy event per call gave; it counts as one engine event."""
        self._push((t, NORMAL, next(self.env._eid), callback, value))
        self.events += 1

    def _hop(self, pkt: Packet) -> None:
        env = self.env
        now = env._now
        route = pkt.route
        h = pkt.hop
        wire = route.wires[h]
        ready = now + route.overheads[h] if h else now
        pkt.hop = h + 1
        if not pkt.nflits:  # control message: sideband, pays node overheads and propagation, occupies no bandwidth
            cross_control(wire, pkt, ready)
            if self.record_hops:
                pkt.transfer.request.hops.append(("control", route.nodes[h], now, ready))
            self._at(pkt.t_head, pkt, self._on_hop if h + 1 < route.hops else self._on_arrive)
            return
        start = cross(wire, pkt, ready)  # the wire formula (kernbench.sim.fabric)
        tr = pkt.transfer
        index = pkt.index
        if not index and self.record_hops:
            tr.request.hops.append((tr.kind, route.nodes[h], now, start))
        if not h and index + 1 < len(tr.packets):
            nxt = tr.packets[index + 1]
            t_next = wire.free_at
            if tr.ready is not None:
                r0, nxt.delta = tr.ready[nxt.index]
                if r0 > t_next:
                    t_next = r0
            self._at(t_next, nxt, self._on_hop)
        # NOTE: _at inlined on the hottest line of the simulator; the callbacks are bound once (_on_hop).
        self._push((pkt.t_head, NORMAL, next(env._eid), self._on_hop if h + 1 < route.hops else self._on_arrive, pkt))
        self.events += 1

    def _arrive(self, pkt: Packet) -> None:
        tr = pkt.transfer
        now = self.env._now
        if tr.t_first < 0:
            tr.t_first = now
        if pkt.index == 0 and self.record_hops:
            tr.request.hops.append((tr.kind, pkt.route.nodes[-1], now, now))
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

    def _complete(self, req: Request) -> None:
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
        tr.packets = self._split(tr, self.packet_bytes, self.flit_bytes)
        self._at(t0, tr.packets[0], self._on_hop)
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
        self._at(max(t, self.env._now), value, callback)

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


__all__ = ["GraphEngine", "Request"]
