"""The host runtime: a PyTorch-like object that deploys tensors and launches kernels on one SIP.

``RuntimeContext`` owns the engine for a compiled topology, per-PE
allocators and the tensors it created. Tensors are placed by a
:class:`DPPolicy` into shards, each a physical-address range tagged with its
``(sip, cube, pe)``; creating one allocates every shard and writes it over
the host memory path (H2D), and reading one back issues D2H reads. Every
call that touches the device runs the simulation until its requests
complete, so host code reads top to bottom like a synchronous script; the
simulated clock (:attr:`now_ns`) advances accordingly.

With virtual addressing (the default) every tensor also gets a range of
virtual addresses, installed in the MMUs of the PEs that hold it with
``MmuMapMsg`` requests through the fabric (their latency is part of
deployment); kernels may then address a tensor by virtual address,
including other PEs' shards (``tl.global_ref``).

A launch targets the PEs holding the first tensor argument's shards; every
tensor argument must have a shard on each of those PEs, which the kernel
receives as a :class:`~kernbench.tl.TensorArg` (its local shard). Other
arguments (numbers, strings) pass through unchanged.

A tensor and a launch handle belong to the context that created them: passing
one to another context, or using a context after :meth:`RuntimeContext.close`
(the end of a ``with session(...)`` block), raises :class:`RuntimeApiError`
naming both, before anything changes. The same holds inside kernels: every
:class:`~kernbench.tl.TensorArg` carries its tensor's
:class:`~kernbench.tl.TensorLease`, so a kernel using an argument whose tensor
was freed, or one kept from a kernel of another session, fails before it
issues anything. Host calls (``torch.*``) made from inside a running kernel
are refused.

A session whose run stopped (a simulation budget ran out, or an interrupt
such as Ctrl-C unwound the simulator mid-step) stays stopped: it refuses
further work with a message saying why, and closing it frees its memory
without simulating, so the limit is not raised again at the end of the
``with`` block. A kernel that raises ``SystemExit`` fails its launch like any
other error; ``KeyboardInterrupt`` still interrupts the program.

The jobs are spread over modules, composed here into :class:`RuntimeContext`:
tensors and their transfers in :mod:`kernbench.runtime.tensors`, allocators
in :mod:`kernbench.runtime.memory`, virtual ranges in
:mod:`kernbench.runtime.mapping`, device binding and waiting in
:mod:`kernbench.runtime.devices`, launches in
:mod:`kernbench.runtime.launching`, open/stopped/closed states in
:mod:`kernbench.runtime.lifecycle` and ``torch.<name>`` namespaces in
:mod:`kernbench.runtime.extensions`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

from kernbench.components import default_registry
from kernbench.runtime.allocator import FreeList, PEMemAllocator, VirtualAllocator
from kernbench.runtime.devices import DeviceBinding, WaitHook
from kernbench.runtime.extensions import EXTENSIONS, ExtensionAccess, ExtensionRegistry
from kernbench.runtime.launching import LaunchHandle, LaunchOps
from kernbench.runtime.lifecycle import SessionLifecycle
from kernbench.runtime.mapping import VirtualMapping
from kernbench.runtime.memory import MemoryOps
from kernbench.runtime.tensors import RuntimeApiError, Tensor, TensorOps
from kernbench.sim import ComponentRegistry, GraphEngine
from kernbench.sim.collector import RunCollector
from kernbench.sim.flow import check_fidelity
from kernbench.sim.limits import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_RECORDS,
    DEFAULT_MAX_SIM_NS,
    DEFAULT_SESSION_TIMEOUT_S,
    Limits,
)
from kernbench.sim.links import LinkRecord, link_records
from kernbench.topology import TopologyGraph, resolve

__all__ = ["LaunchHandle", "RuntimeApiError", "RuntimeContext", "Tensor", "WaitHook", "session"]


class RuntimeContext(TensorOps, MemoryOps, VirtualMapping, DeviceBinding, LaunchOps, SessionLifecycle,
                     ExtensionAccess):
    """Host API over one simulated device (SIP ``device``) of a compiled topology.

    ``limits`` go to the engine as they are, which enforces them all (the wall clock from when the context is
    built, or from ``limits.started``); by default there is no wall-clock limit, while :func:`session` has one.

    ``device`` is per host thread of control: worker greenlets started by a
    launcher can each bind their own SIP (:meth:`bind_device`); everything
    else uses the device given here. ``fidelity`` is the engine's: ``"packet"``
    or ``"flow"`` (:mod:`kernbench.sim.flow`).
    """

    _numbers = itertools.count(1)

    def __init__(self, graph: TopologyGraph, *, device: int = 0, data: bool = False,
                 registry: ComponentRegistry | None = None, record_hops: bool = False, virtual: bool = True,
                 extensions: ExtensionRegistry | None = None, limits: Limits | None = None,
                 fidelity: str = "packet") -> None:
        self.number = next(self._numbers)
        self.closed = False
        self._thread = threading.current_thread()
        self.graph = graph
        self._check_device(device)
        self._default_device = device
        self._device_of: dict = {}  # greenlet -> SIP bound by bind_device
        self.engine = GraphEngine(graph, registry or default_registry(), record_hops=record_hops, data=data,
                                  limits=limits, fidelity=fidelity)
        self._alloc: dict[tuple[int, int, int], PEMemAllocator] = {}
        self._sram: dict[tuple[int, int], FreeList] = {}
        self.virtual = virtual
        self._va = VirtualAllocator(page_bytes=graph.spec.pe.mmu_page_bytes)
        self._tensors: list[Tensor] = []
        self._launches: list[LaunchHandle] = []
        self._extensions: dict[str, object] = {}
        self._extension_registry = extensions if extensions is not None else EXTENSIONS
        self.wait_hook: WaitHook | None = None
        self.metrics: dict[str, float] = {}  # named results a bench reports (see report_metric)

    def __repr__(self) -> str:
        return f"<RuntimeContext {self.name}{' (closed)' if self.closed else ''}>"

    @property
    def name(self) -> str:
        """``session 3 (device 0)``: how messages name this context (numbered in creation order)."""
        return f"session {self.number} (device {self._default_device})"

    def report_metric(self, name: str, value: float) -> None:
        """Record a named result of the run (e.g. a collective's latency, ns); ``kernbench run --json`` shows it."""
        self.metrics[name] = float(value)

    @property
    def spec(self):
        """The topology spec."""
        return self.graph.spec

    @property
    def data(self) -> bool:
        """Whether real numerics are computed."""
        return self.engine.data

    @property
    def now_ns(self) -> float:
        """The simulated clock, ns."""
        return self.engine.now

    @property
    def oplog(self):
        """The engine's op log."""
        return self.engine.oplog

    def link_stats(self, include_idle: bool = False) -> list[LinkRecord]:
        """Per-link traffic of everything simulated so far: bytes, packets, busy ns and utilisation over the run
        window ``[0, now_ns]``, one record per directed link that carried traffic (every link with
        ``include_idle``); see :mod:`kernbench.sim.links`."""
        return link_records(self.engine, include_idle)


@contextlib.contextmanager
def session(topology: str | Path | TopologyGraph | None = None, device: int = 0, data: bool = False,
            record_hops: bool = False, *, max_events: int | None = DEFAULT_MAX_EVENTS,
            max_sim_ns: float | None = DEFAULT_MAX_SIM_NS, timeout_s: float | None = DEFAULT_SESSION_TIMEOUT_S,
            max_records: int | None = DEFAULT_MAX_RECORDS,
            registry: ComponentRegistry | None = None, fidelity: str = "packet") -> Iterator[RuntimeContext]:
    """``with session(device=0, data=True) as torch: ...`` for scripts and notebooks.

    ``topology`` is a compiled graph, a YAML file, the name of a builtin
    topology, or None for the builtin default (it works from any folder).
    ``max_events``, ``max_sim_ns``, ``max_records`` (op-log records) and
    ``timeout_s`` (wall-clock seconds for the whole block) bound the run
    (:mod:`kernbench.sim.limits`; None: no limit): they make the one
    :class:`~kernbench.sim.limits.Limits` the session's engine enforces, and a
    run past one raises ``SimulationLimitError``. The wall clock defaults to
    :data:`~kernbench.sim.limits.DEFAULT_SESSION_TIMEOUT_S` (an hour), so a
    kernel spinning in pure Python cannot hang a script forever; pass
    ``timeout_s=None`` for a block meant to run longer. It runs from the
    start of the block: time spent in the block's host code counts, and the
    next call that simulates stops once it is used up (on the main thread a
    ``SIGALRM`` interrupts a kernel while the engine runs). When the block
    ends the session is closed: its tensors are freed and it accepts no
    more work. ``registry`` binds component implementations (default: the
    built-in ones and every installed plugin), e.g. one a script registered
    with :func:`kernbench.components.register_block`. ``fidelity="flow"`` simulates every transfer as one flow
    sharing its links max-min fairly instead of packet by packet (:mod:`kernbench.sim.flow`, ADR 0039); the
    default is ``"packet"``.
    """
    check_fidelity(fidelity)  # before the topology is compiled
    limits = Limits(max_events=max_events, max_sim_ns=max_sim_ns, timeout_s=timeout_s, max_records=max_records)
    graph = topology if isinstance(topology, TopologyGraph) else resolve(topology)
    ctx = RuntimeContext(graph, device=device, data=data, record_hops=record_hops, limits=limits,
                         registry=registry, fidelity=fidelity)
    ok = False
    try:
        with RunCollector():
            yield ctx
            ok = True
    finally:
        ctx.close(simulate=ok)
