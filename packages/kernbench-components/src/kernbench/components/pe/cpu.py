"""PE_CPU: receives a launch, waits for the barrier, runs the kernel body in a greenlet.

Each blocking ``tl`` call switches from the kernel's greenlet back to the
simulator with the SimPy event it waits for; when the event fires the
kernel is resumed with its value. Issuing a command occupies the PE_CPU for
its ``overhead_ns`` (commands are issued one at a time).
"""

from __future__ import annotations

from collections import deque

from greenlet import greenlet

from kernbench.components.launch import LaunchReport, PeLaunch, PeReport
from kernbench.components.pe.commands import CyclesCmd
from kernbench.sim.component import Component
from kernbench.topology import naming as nm


class PeCpu(Component):
    """The PE's control CPU: kernel host, command issuer."""

    __slots__ = ("busy_ns", "count", "current", "free_at", "prefix", "queued", "running", "scheduler")

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.free_at = 0.0
        self.busy_ns = 0.0
        self.count = 0
        self.prefix = nm.pe_of(self.id)
        self.scheduler = f"{self.prefix}.pe_scheduler"
        self.running = False  # a kernel is running here: a later launch waits for it (its scratch is shared)
        self.current = None  # the running kernel's context
        self.queued: deque = deque()

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
        cm = self.engine.spec.pe.cost_model
        return cm.fixed_cycles + cmd.logical_bytes * cm.r_cycles_per_byte

    def issue(self, cmd: object, request) -> None:
        """Issue one command to the scheduler; the PE_CPU is busy for its dispatch cost (ADR 0013)."""
        eng = self.engine
        cycles = self.dispatch_cycles(cmd)
        cost = cycles / eng.spec.pe.clock_ghz
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
        from kernbench.tl.context import TLContext  # kernbench.tl imports this package: resolve at run time

        launch, request, arrival = item
        ctx = TLContext(self, launch, request)
        ctx.m_cpu = launch.m_cpu
        ctx.glet = greenlet(lambda *_: launch.launch.msg.fn(ctx, *launch.args))
        ctx.t_start = self.engine.now
        ctx.arrival = arrival
        self.current = ctx
        self._drive(ctx, None)

    def _drive(self, ctx, value: object) -> None:
        try:
            ev = ctx.glet.switch(value)
        except Exception as exc:  # the kernel raised: the launch fails once its composites have drained
            self._kernel_returned(ctx, f"{type(exc).__name__}: {exc}")
            return
        if ctx.glet.dead:
            self._kernel_returned(ctx)
        elif ev.callbacks is None:  # already processed
            self.engine.at(self.engine.now, lambda v: self._drive(ctx, v), ev.value)
        else:
            ev.callbacks.append(lambda e: self._drive(ctx, e._value))

    def blocked(self) -> str | None:
        """The running kernel and the command it waits for, when one is running."""
        ctx = self.current
        if ctx is None or not self.running:
            return None
        return f"{self.prefix} runs kernel {ctx.kernel!r} waiting for {ctx.waiting or 'its launch to finish'}"

    def _kernel_returned(self, ctx, error: str | None = None) -> None:
        """The kernel body ended (returned or raised); its run ends once the composites it left in flight complete."""
        pending = [e for e in ctx.pending_events if not e.processed]
        if pending:
            pending[0].callbacks.append(lambda e: self._kernel_returned(ctx, error))
            return
        if error is None:  # an asynchronous command nobody waited for may have failed (e.g. a receive)
            failed = next((e.value for e in ctx.pending_events if isinstance(e.value, Exception)), None)
            if failed is not None:
                error = f"{type(failed).__name__}: {failed}"
        self._report(ctx, error)
        if self.queued:
            self._schedule(self.queued.popleft())
        else:
            self.running = False

    def _report(self, ctx, error: str | None) -> None:
        eng = self.engine
        now = eng.now
        pe = nm.pe_of(self.id)
        eng.oplog.record(ctx.t_start, now, self.id, "control", "kernel", {"kernel": ctx.kernel, "error": error})
        report = PeReport(pe, ctx.t_start, now - ctx.t_start, ctx.arrival, error)
        m_cpu = ctx.m_cpu
        eng.send_control(ctx._request, eng.router.control_path(self.id, m_cpu),
                         LaunchReport(ctx.pe[0], (report,)))
