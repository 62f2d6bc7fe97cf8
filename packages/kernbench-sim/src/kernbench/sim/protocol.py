"""The seam between the engine and everything built on it: the :class:`Engine` protocol and :class:`Completion`.

Components, message kinds, the runtime and collectives hold an engine typed
as :class:`Engine`: the members listed there are all they may use
(``tests/test_architecture_engine.py`` checks every ``engine.X`` and
``eng.X`` in ``kernbench.components``, ``kernbench.runtime`` and
``kernbench.ccl`` against :data:`ENGINE_MEMBERS`). How the engine keeps its
event queue — SimPy today — stays inside ``kernbench.sim``: no module
outside it imports ``simpy`` or reaches for ``engine.env``.

A :class:`Request` is what ``engine.submit(msg)`` returns (correlation id,
timing, hop trace and its ``done`` completion).

A :class:`Completion` is a one-shot signal with a value: a command's
``done``, a request's ``done``, a DMA's "landed". ``engine.completion()``
makes one; ``succeed(value)`` fires it (its callbacks run at the current
simulated time, after the events already due); ``then(callback)`` asks for
``callback(completion)`` when it fires; ``processed`` says whether it has;
``value`` is what it fired with. It is a SimPy event underneath, so
creating and firing one costs what a bare SimPy event does (ADR 0032).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from simpy.events import Event

from kernbench.sim.messages import record_transfer

if TYPE_CHECKING:
    from kernbench.sim.fabric import Packet, Route, Transfer
    from kernbench.sim.memory_store import MemoryStore
    from kernbench.sim.oplog import OpLog
    from kernbench.topology.address import PhysAddr
    from kernbench.topology.graph import TopologyGraph
    from kernbench.topology.resolver import AddressResolver
    from kernbench.topology.routing import PathRouter
    from kernbench.topology.spec import TopologySpec


class Completion(Event):
    """A one-shot completion with a value, created by :meth:`Engine.completion`.

    Use :meth:`succeed` (inherited) to fire it, :meth:`then` to be called when
    it fires, ``processed`` to ask whether it has, and ``value`` for its value
    once it has. (It is a SimPy event; nothing outside ``kernbench.sim`` may
    rely on that.)
    """

    def then(self, callback: Callable[[Completion], object]) -> None:
        """Call ``callback(self)`` when this completion fires; it must not have fired yet (see ``processed``)."""
        self.callbacks.append(callback)


class Request:
    """A submitted message: correlation id, timing, the hops it took and its completion event.

    ``hops`` holds ``(leg, node, t_in, t_out)`` for the first packet of each
    leg, in ns; ``leg`` is the transfer kind: ``"write"``, or ``"read_cmd"``
    then ``"read_data"`` for a read.
    """

    __slots__ = ("complete", "corr_id", "done", "error", "hops", "legs", "msg", "op_name", "pending", "read_nbytes",
                 "result", "source", "t_end", "t_submit")

    def __init__(self, corr_id: int, msg: object, t_submit: float, done: Completion) -> None:
        self.corr_id = corr_id
        self.msg = msg
        self.t_submit = t_submit
        self.t_end: float | None = None
        self.done = done
        self.hops: list[tuple[str, str, float, float]] = []
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


class Engine(Protocol):
    """What a component, message kind, runtime or collective may use of the engine (times in ns, sizes in bytes).

    The concrete engine is :class:`~kernbench.sim.engine.GraphEngine`; a test
    double needs only these members.
    """

    # ---- what the engine runs on (read only)
    spec: TopologySpec
    graph: TopologyGraph
    router: PathRouter
    resolver: AddressResolver
    components: Mapping[str, Any]  # node id -> kernbench.sim.component.Component
    flit_bytes: int
    packet_bytes: int
    control_bytes: int
    fidelity: str  # "packet" or "flow" (kernbench.sim.flow)
    # ---- what a run produced so far (read only)
    oplog: OpLog
    memory: MemoryStore | None
    data: bool
    events: int
    submitted: int
    halted: str | None

    @property
    def now(self) -> float:
        """The simulated clock."""
        ...

    # ---- time
    def completion(self) -> Completion:
        """A fresh, unfired :class:`Completion`."""
        ...

    def memo(self, make: Callable[[Engine], Any]) -> Any:
        """``make(engine)``, made on first use and kept with this engine (state its components share)."""
        ...

    def at(self, t: float, callback: Callable[[object], None], value: object = None) -> None:
        """Call ``callback(value)`` at time ``t`` (not before now)."""
        ...

    # ---- requests (the runtime's side)
    def submit(self, msg: object) -> Request:
        """Inject a message now; returns its request."""
        ...

    def wait(self, request: Request) -> None:
        """Run until ``request`` completes."""
        ...

    def wait_any(self, groups: list[list[Request]]) -> None:
        """Run until every request of at least one group has completed."""
        ...

    def finish(self, request: Request, t_end: float) -> None:
        """Complete ``request`` at ``t_end``."""
        ...

    # ---- the fabric (the components' side)
    def resolve(self, addr: PhysAddr, nbytes: int) -> str:
        """The memory node holding ``nbytes`` at ``addr``."""
        ...

    def route(self, nodes: tuple[str, ...]) -> Route:
        """The route along a node path."""
        ...

    def start_transfer(self, req: Request, src: str, path: tuple[str, ...], op_name: str, addr: PhysAddr,
                       write: bool) -> None:
        """Start a request's write, or read command, from ``src`` along ``path``."""
        ...

    def send(self, request: Request, route: Route, nbytes: int, *, kind: str, addr: int, t_start: float,
             on_done: Callable[[Transfer, float], None], ready: list[tuple[float, float]] | None = None,
             read_nbytes: int = 0) -> Transfer:
        """Start a payload along ``route`` at ``t_start``."""
        ...

    def send_control(self, request: Request, nodes: tuple[str, ...], payload: object, *,
                     t_start: float | None = None, apply_source_overhead: bool = True) -> Transfer:
        """Send a zero-byte control message along ``nodes``."""
        ...

    def control_latency_ns(self, nodes: tuple[str, ...]) -> float:
        """How long a control message takes along ``nodes``."""
        ...

    def read_reply(self, cmd: Transfer, ready: list[tuple[float, float]],
                   on_done: Callable[[Transfer, float], None] | None = None) -> Transfer:
        """Send a read's data back, paced by ``ready``."""
        ...

    def landed(self, pkt: Packet, t_done: float) -> None:
        """A terminal has served ``pkt`` by ``t_done``."""
        ...


#: Every member of :class:`Engine`: what code outside ``kernbench.sim`` may use of an engine.
ENGINE_MEMBERS: frozenset[str] = frozenset(Engine.__annotations__) | frozenset(
    name for name in vars(Engine) if not name.startswith("_"))

__all__ = ["ENGINE_MEMBERS", "Completion", "Engine", "Request"]
