"""Component base class and the registry that binds node types to implementations and messages to kinds.

A topology's ``components:`` section maps each node type (``router``,
``hbm_ctrl``, …) to an implementation *name*; a :class:`ComponentRegistry`
maps names to classes, and message types to the
:class:`~kernbench.sim.messages.MessageKind` that starts and completes them.
Swapping an implementation is a one-line YAML change (or a different
registry) and never touches the engine or the tests.

A component holds the engine that built it (``self.engine``), typed as the
:class:`~kernbench.sim.protocol.Engine` protocol: the members listed there
are all a component may use. This module does not import the engine, which
imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kernbench.sim.errors import ComponentError
from kernbench.sim.fabric import Packet
from kernbench.sim.messages import MessageKind
from kernbench.topology.graph import Node, TopologyGraph
from kernbench.topology.safe_yaml import quote

if TYPE_CHECKING:
    from kernbench.sim.protocol import Engine


class Component:
    """A modeled hardware block at one graph node.

    ``overhead_ns`` is the fixed processing delay a packet's head pays when
    it passes through or starts at this node (ns). Terminal components
    override :meth:`on_packet`.
    """

    __slots__ = ("engine", "id", "node", "overhead_ns")

    def __init__(self, engine: Engine, node: Node) -> None:
        self.engine = engine
        self.node = node
        self.id = node.id
        self.overhead_ns = node.overhead_ns

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Handle a packet whose head arrived here at ``t_head`` as its final hop."""
        raise ComponentError(f"{self.id} ({type(self).__name__}) is not a terminal: a "
                             f"{pkt.transfer.kind} transfer cannot end at a {self.node.type} node")

    def on_control(self, payload: object, t: float, transfer) -> None:
        """Handle a control message (launch, completion, command) that arrived at ``t``."""
        raise ComponentError(f"{self.id} ({type(self).__name__}) does not accept control messages "
                  f"({type(payload).__name__})")

    def blocked(self) -> str | None:
        """What this component is stuck waiting for, if anything (used in deadlock reports)."""
        return None

    def activity(self) -> str | None:
        """What this component is running, if anything, starting with its PE (used when a run hits a budget)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id})"


#: ``factory(engine, node) -> Component``: a component class, or anything that builds one.
ComponentFactory = Callable[["Engine", Node], Component]


class ComponentRegistry:
    """Implementation name -> component factory, and message type -> message kind. Explicit instance, no global
    state."""

    __slots__ = ("_impls", "_messages", "_serves")

    def __init__(self, impls: Iterable[tuple[str, ComponentFactory]] = (), messages: Iterable[MessageKind] = (),
                 serves: Mapping[str, Iterable[str]] | None = None) -> None:
        self._impls: dict[str, ComponentFactory] = {}
        self._messages: dict[type, MessageKind] = {}
        self._serves: dict[str, frozenset[str]] = {}
        for name, cls in impls:
            self.register(name, cls, (serves or {}).get(name))
        for kind in messages:
            self.register_message(kind)

    def register(self, name: str, cls: ComponentFactory, node_types: Iterable[str] | None = None) -> None:
        """Add an implementation; a duplicate name is an error. ``node_types`` (else the factory's own
        ``node_types`` attribute, if any) are the node types it may be bound to; without them, any."""
        if name in self._impls:
            raise ComponentError(f"component implementation {name!r} is already registered")
        self._impls[name] = cls
        types = node_types if node_types is not None else getattr(cls, "node_types", None)
        if types is not None:
            self._serves[name] = frozenset(types)

    def register_message(self, kind: MessageKind) -> None:
        """Add a message kind; a second kind for the same message type is an error."""
        if kind.msg_type in self._messages:
            raise ComponentError(f"message type {kind.msg_type.__name__} already has a registered kind")
        self._messages[kind.msg_type] = kind

    @property
    def message_kinds(self) -> tuple[MessageKind, ...]:
        """The registered message kinds, in registration order."""
        return tuple(self._messages.values())

    def replace(self, name: str, cls: ComponentFactory) -> ComponentRegistry:
        """A copy of this registry with ``name`` bound to ``cls`` (added if new)."""
        return ComponentRegistry({**self._impls, name: cls}.items(), self._messages.values(), self._serves)

    @property
    def names(self) -> list[str]:
        """Registered implementation names, sorted."""
        return sorted(self._impls)

    def get(self, name: str) -> ComponentFactory:
        """The implementation registered under ``name``."""
        try:
            return self._impls[name]
        except KeyError:
            raise ComponentError(f"unknown component implementation {name!r}; known: "
                                 f"{', '.join(self.names)}") from None

    def check(self, spec: Any) -> dict[str, ComponentFactory]:
        """The factory bound to each node type of ``spec``; :class:`ComponentError` naming the first binding to
        an unknown implementation (every command checks this, not only those that build an engine)."""
        factories = {}
        for node_type, name in spec.component_bindings.items():
            if name not in self._impls:
                raise ComponentError(f"{spec.source}: components.{node_type} = {quote(name)} is an unknown "
                                     f"component implementation; known: {', '.join(self.names)}")
            if name in self._serves and node_type not in self._serves[name]:
                # `pe_gemm: pe_math` failed deep in the engine (KeyError: 'lanes'); `router: sram` ran silently
                fits = [n for n in self.names if node_type in self._serves.get(n, (node_type,))]
                raise ComponentError(f"{spec.source}: components.{node_type} = {quote(name)} is an implementation "
                                     f"for {' / '.join(sorted(self._serves[name]))} nodes, not {node_type} nodes; "
                                     f"implementations for {node_type}: {', '.join(fits) or 'none'}")
            factories[node_type] = self._impls[name]
        return factories

    def build(self, engine: Any, graph: TopologyGraph) -> ComponentMap:
        """One component per node whose type has a binding, each created on first access."""
        return ComponentMap(engine, graph, self.check(graph.spec))


class ComponentMap(Mapping):
    """Node id -> component for every bound node; instances are created lazily on first lookup.

    Building thousands of components an engine never touches would dominate
    short runs (the probe builds one engine per case), so creation waits
    until a route or a lookup needs the node.
    """

    __slots__ = ("_engine", "_factories", "_graph", "_ids", "_made")

    def __init__(self, engine: Any, graph: TopologyGraph, factories: dict[str, ComponentFactory]) -> None:
        self._engine = engine
        self._graph = graph
        self._factories = factories
        self._made: dict[str, Component] = {}
        self._ids: list[str] | None = None

    def __getitem__(self, node_id: str) -> Component:
        comp = self._made.get(node_id)
        if comp is None:
            node = self._graph.nodes.get(node_id)
            factory = self._factories.get(node.type) if node is not None else None
            if factory is None:
                raise KeyError(node_id)
            comp = self._made[node_id] = factory(self._engine, node)
        return comp

    def get(self, node_id: str, default: Any = None) -> Any:
        """The component at ``node_id`` (created on first use), or ``default`` for a node without one: the
        ``Mapping.get`` every route build calls per node, without its exception round trip for made ones."""
        comp = self._made.get(node_id)
        if comp is not None:
            return comp
        try:
            return self[node_id]
        except KeyError:
            return default

    def __iter__(self):
        if self._ids is None:
            self._ids = [n.id for n in self._graph.nodes.values() if n.type in self._factories]
        return iter(self._ids)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, node_id: object) -> bool:
        node = self._graph.nodes.get(node_id) if isinstance(node_id, str) else None
        return node is not None and node.type in self._factories

    def created(self) -> dict[str, Component]:
        """The components instantiated so far (insertion order)."""
        return dict(self._made)
