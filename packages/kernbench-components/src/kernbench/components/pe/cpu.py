"""PE_CPU: receives a launch, waits for the barrier, runs the kernel body in a greenlet.

The PE_CPU does not know the kernel language. It is built with a *kernel
language*: a function that turns a :class:`KernelSlot` (this PE's side of
the protocol, :class:`~kernbench.tl.issue.KernelHost`) into the object the
kernel receives as its first argument (``tl``). The default registry binds
``kernbench.tl``'s :meth:`~kernbench.tl.context.TLContext.for_pe`.

Each blocking kernel call switches from the kernel's greenlet back to the
simulator with the :class:`~kernbench.sim.protocol.Completion` it waits for;
when it fires the kernel is resumed with its value. Issuing a command occupies the PE_CPU for
its dispatch cost (commands are issued one at a time, ADR 0013).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection
from typing import Protocol

from greenlet import greenlet

from kernbench.components.launch import LaunchReport, PeLaunch, PeReport
from kernbench.components.pe.block import PeBlock
from kernbench.components.pe.commands import CyclesCmd
from kernbench.sim.protocol import Completion, Engine
from kernbench.topology import block_params
from kernbench.topology import naming as nm
from kernbench.topology.address import decode


class KernelContext(Protocol):
    """What the PE_CPU reads back from a running kernel's language object."""

    waiting: str | None  # what the kernel is blocked on, for deadlock reports
    pending_events: list  # asynchronous commands not yet waited for; the kernel ends after them


KernelLanguage = Callable[["KernelSlot"], KernelContext]


class KernelSlot:
    """One kernel running on a PE_CPU: its launch, its greenlet, and the PE services it may use (ns)."""

    __slots__ = ("arrival", "context", "cpu", "glet", "kernel", "launch", "num_programs", "pe", "program_id",
                 "request", "spec", "t_start")

    def __init__(self, cpu: PeCpu, launch: PeLaunch, request, arrival: float) -> None:
        self.cpu = cpu
        self.launch = launch
        self.request = request
        self.arrival = arrival
        self.spec = cpu.engine.spec
        self.kernel = launch.launch.msg.kernel
        self.pe = launch.pe
        self.program_id = launch.program_id
        self.num_programs = launch.num_programs
        self.t_start = cpu.engine.now
        self.context: KernelContext | None = None
        self.glet: greenlet | None = None

    @property
    def now_ns(self) -> float:
        """The simulated time now."""
        return self.cpu.engine.now

    def event(self) -> Completion:
        """A fresh completion."""
        return self.cpu.engine.completion()

    def issue(self, cmd: object) -> None:
        """Dispatch ``cmd`` through this PE_CPU (dispatch cost, then the scheduler)."""
        self.cpu.issue(cmd, self.request)

    def suspend(self, event) -> object:
        """Switch back to the simulator until ``event`` fires; returns its value."""
        return self.glet.parent.switch(event)

    def translate(self, va: int, nbytes: int) -> tuple[int, float]:
        """Translate through this PE's MMU: (physical address, translation ns its DMA pays)."""
        mmu = self.cpu.block("pe_mmu")
        return mmu.translate(va, nbytes), mmu.translate_ns

    def check_target(self, addr: int, nbytes: int) -> None:
        """Resolve an encoded address to its memory node (``AddressError`` when nothing backs it)."""
        self.cpu.engine.resolver.resolve(decode(addr), nbytes)

    def directions(self) -> Collection[str]:
        """Directions of this PE's installed IPCQ neighbour table."""
        return self.cpu.block("pe_ipcq").links.keys()


class PeCpu(PeBlock):
    """The PE's control CPU: kernel host, command issuer."""

    PARAMS = block_params.PE_CPU  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("busy_ns", "clock_ghz", "count", "current", "fixed_cycles", "free_at", "language",
                 "prefix", "queued", "r_cycles_per_byte", "running", "scheduler")

    def __init__(self, engine: Engine, node, language: KernelLanguage) -> None:
        super().__init__(engine, node)
        self.language = language
        a = node.attrs
        self.clock_ghz, self.fixed_cycles, self.r_cycles_per_byte = \
            a["clock_ghz"], a["fixed_cycles"], a["r_cycles_per_byte"]
        self.free_at = 0.0
        self.busy_ns = 0.0
        self.count = 0
        self.prefix = nm.pe_of(self.id)
        self.scheduler = nm.sibling(self.id, "pe_scheduler")
        self.running = False  # a kernel is running here: a later launch waits for it (its scratch is shared)
        self.current: KernelSlot | None = None
        self.queued: deque = deque()

    @classmethod
    def with_language(cls, language: KernelLanguage) -> Callable:
        """A component factory ``(engine, node) -> PeCpu`` running kernels in ``language``."""
        return lambda engine, node: cls(engine, node, language)

    def on_control(self, payload: object, t: float, transfer) -> None:
        """A launch arrived at ``t``: start the kernel at the launch's barrier time."""
        if not isinstance(payload, PeLaunch):
            super().on_control(payload, t, transfer)
        arrival = t + self.overhead_ns
        item = (payload, transfer.request, arrival)
        if self.running:
            self.queued.append(item)
            return
        self.running = True
        self._schedule(item)

    def _schedule(self, item: tuple) -> None:
        payload, _, arrival = item
        # The barrier is predicted by summing the same delays in another order: allow float rounding.
        start = payload.target_start_ns if arrival <= payload.target_start_ns + 1e-6 else arrival
        self.engine.at(max(start, self.engine.now), self._start, item)

    def dispatch_cycles(self, cmd: object) -> float:
        """PE_CPU cycles to issue ``cmd``: FIXED + logical_bytes x R (``tl.cycles(n)`` costs exactly n)."""
        if isinstance(cmd, CyclesCmd):
            return float(cmd.cycles)
        return self.fixed_cycles + cmd.logical_bytes * self.r_cycles_per_byte

    def issue(self, cmd: object, request) -> None:
        """Issue one command to the scheduler; the PE_CPU is busy for its dispatch cost (ADR 0013)."""
        eng = self.engine
        cycles = self.dispatch_cycles(cmd)
        cost = cycles / self.clock_ghz
        t0 = max(eng.now, self.free_at)
        t = t0 + cost
        eng.oplog.record(t0, t, self.id, "control", "dispatch",
                         {"cmd": type(cmd).__name__, "cycles": cycles,
                          "logical_bytes": getattr(cmd, "logical_bytes", 0)})
        self.free_at = t
        self.busy_ns += cost
        self.count += 1
        if isinstance(cmd, CyclesCmd):
            eng.at(t, lambda _: cmd.done.succeed(None))
            return
        eng.send_control(request, (self.id, self.scheduler), cmd, t_start=t, apply_source_overhead=False)

    def _start(self, item: tuple) -> None:
        launch, request, arrival = item
        slot = KernelSlot(self, launch, request, arrival)
        ctx = slot.context = self.language(slot)
        fn, args = launch.launch.msg.fn, launch.args
        slot.glet = greenlet(lambda *_: fn(ctx, *args))
        self.current = slot
        self._drive(slot, None)

    def _drive(self, slot: KernelSlot, value: object) -> None:
        try:
            ev = slot.glet.switch(value)
        except Exception as exc:  # the kernel raised: the launch fails once its composites have drained
            self._kernel_returned(slot, f"{type(exc).__name__}: {exc}")
            return
        if slot.glet.dead:
            self._kernel_returned(slot)
        elif ev.processed:
            self.engine.at(self.engine.now, lambda v: self._drive(slot, v), ev.value)
        else:
            ev.then(lambda e: self._drive(slot, e.value))

    def blocked(self) -> str | None:
        """The running kernel and the command it waits for, when one is running."""
        slot = self.current
        if slot is None or not self.running:
            return None
        return f"{self.prefix} runs kernel {slot.kernel!r} waiting for " \
               f"{slot.context.waiting or 'its launch to finish'}"

    def activity(self) -> str | None:
        """``sip0.cube0.pe0 runs kernel 'k' (its last wait: ...)`` while a kernel runs here."""
        slot = self.current
        if slot is None or not self.running:
            return None
        waiting = slot.context.waiting if slot.context is not None else None
        return f"{self.prefix} runs kernel {slot.kernel!r}" + (f" (last waiting for {waiting})" if waiting else "")

    def _kernel_returned(self, slot: KernelSlot, error: str | None = None) -> None:
        """The kernel body ended (returned or raised); its run ends once the composites it left in flight complete."""
        events = slot.context.pending_events
        pending = [e for e in events if not e.processed]
        if pending:
            pending[0].then(lambda e: self._kernel_returned(slot, error))
            return
        if error is None:  # an asynchronous command nobody waited for may have failed (e.g. a receive)
            failed = next((e.value for e in events if isinstance(e.value, Exception)), None)
            if failed is not None:
                error = f"{type(failed).__name__}: {failed}"
        self._report(slot, error)
        if self.queued:
            self._schedule(self.queued.popleft())
        else:
            self.running = False

    def _report(self, slot: KernelSlot, error: str | None) -> None:
        eng = self.engine
        now = eng.now
        eng.oplog.record(slot.t_start, now, self.id, "control", "kernel", {"kernel": slot.kernel, "error": error})
        report = PeReport(self.prefix, slot.t_start, now - slot.t_start, slot.arrival, error)
        m_cpu = slot.launch.m_cpu
        eng.send_control(slot.request, eng.router.control_path(self.id, m_cpu),
                         LaunchReport(slot.pe[0], (report,)))
