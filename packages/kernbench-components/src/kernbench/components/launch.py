"""The kernel-launch protocol: its message kind, the records passed down and back, and the barrier rule.

A launch starts here. The runtime submits one :class:`KernelLaunchMsg`, and
the engine calls this module's start handler (:data:`LAUNCH_KIND`), which
checks the kernel and its targets and sends one :class:`SipLaunch` per SIP
from the host node to that SIP's IO_CPU. No code in
:mod:`~kernbench.components.host` runs on the way down. Then, one file per
hop: :mod:`~kernbench.components.io_cpu` stamps the barrier time and sends a
:class:`CubeLaunch` to each targeted cube's M_CPU;
:mod:`~kernbench.components.m_cpu` sends a :class:`PeLaunch` to each
targeted PE_CPU; :mod:`~kernbench.components.pe.cpu` runs the kernel body and
sends its :class:`PeReport` back up in a :class:`LaunchReport`.

Every hop is a zero-byte control message (exact, contention-free timing).
The IO_CPU stamps one barrier time for the whole launch (the formula is in
:mod:`~kernbench.components.io_cpu`), so every PE enters its kernel body at
the same time. Reports travel back the same way, each fan-in point
(M_CPU, IO_CPU) forwarding once all below it have reported. The launch ends
in :class:`~kernbench.components.host.HostCpu`: after the last SIP's report
it finishes the request, with a :class:`KernelError` naming the first
failing PE in (sip, cube, pe) order if any failed, and the engine then calls
this module's complete handler, which writes the launch's op-log row.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from kernbench.sim.errors import MessageError
from kernbench.sim.messages import MessageKind
from kernbench.sim.protocol import Engine
from kernbench.topology import naming as nm
from kernbench.topology.errors import KernbenchError


class KernelError(KernbenchError):
    """A kernel raised while running on a PE; names the kernel, the PE and the kernel's message."""


@dataclass(frozen=True, slots=True)
class KernelLaunchMsg:
    """Launch kernel ``fn`` (named ``kernel``) on every target PE.

    ``targets`` lists ``((sip, cube, pe), args)``: each PE gets its own
    argument tuple (its local tensor shards). The host submits one message;
    IO_CPUs, M_CPUs and PE_CPUs fan it out over control paths.
    """

    kernel: str
    fn: Callable = field(repr=False, compare=False)
    targets: tuple[tuple[tuple[int, int, int], tuple], ...] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SipLaunch:
    """The part of a :class:`KernelLaunchMsg` the host sends to one SIP's IO_CPU."""

    msg: KernelLaunchMsg
    sip: int
    targets: tuple[tuple[tuple[int, int, int], tuple], ...] = field(repr=False)


@dataclass(frozen=True, slots=True)
class CubeLaunch:
    """IO_CPU -> M_CPU: the targets of one cube and the shared barrier time (ns)."""

    launch: SipLaunch
    cube: int
    targets: tuple = field(repr=False)
    target_start_ns: float
    io_cpu: str


@dataclass(frozen=True, slots=True)
class PeLaunch:
    """M_CPU -> PE_CPU: run the kernel with these arguments and program ids at ``target_start_ns``."""

    launch: SipLaunch
    pe: tuple[int, int, int]
    args: tuple = field(repr=False)
    program_id: tuple[int, int]
    num_programs: tuple[int, int]
    target_start_ns: float
    m_cpu: str


@dataclass(frozen=True, slots=True)
class PeReport:
    """One PE's outcome: start of its kernel body and run time (ns), or the error it raised."""

    pe: str
    exec_start_ns: float
    exec_ns: float
    arrival_ns: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LaunchReport:
    """Completion travelling towards the host: reports of every PE below the sender."""

    sip: int
    reports: tuple[PeReport, ...]


@dataclass
class LaunchResult:
    """What the host learns from a launch: per-PE reports keyed by PE prefix, and the barrier time."""

    kernel: str
    reports: dict[str, PeReport] = field(default_factory=dict)
    target_start_ns: dict[int, float] = field(default_factory=dict)

    @property
    def pe_exec_start_ns(self) -> dict[str, float]:
        """When each PE entered the kernel body."""
        return {k: r.exec_start_ns for k, r in self.reports.items()}

    @property
    def pe_exec_ns(self) -> dict[str, float]:
        """How long each PE ran the kernel body."""
        return {k: r.exec_ns for k, r in self.reports.items()}


def program_grid(targets) -> dict[tuple[int, int, int], tuple[tuple[int, int], tuple[int, int]]]:
    """Program ids on the 2D grid: axis 0 = PE among the targeted PEs of its cube, axis 1 = cube in the SIP."""
    cubes: dict[tuple[int, int], list[int]] = {}
    for (sip, cube, pe), _ in targets:
        cubes.setdefault((sip, cube), []).append(pe)
    out = {}
    by_sip: dict[int, list[int]] = {}
    for sip, cube in sorted(cubes):
        by_sip.setdefault(sip, []).append(cube)
    for (sip, cube), pes in cubes.items():
        pes = sorted(pes)
        cube_list = by_sip[sip]
        for pe in pes:
            out[(sip, cube, pe)] = ((pes.index(pe), cube_list.index(cube)), (len(pes), len(cube_list)))
    return out


def failed_while_waiting(component, pending: dict) -> str | None:
    """Launches a fan-in point still waits on although some of their PEs already failed (deadlock reports)."""
    parts = []
    for corr, entry in pending.items():
        failed = [f"{r.pe} failed: {r.error}" for r in entry[1] if r.error is not None]
        if failed:
            parts.append(f"launch corr {corr} waits for {entry[0]} more report(s) after {'; '.join(failed)}")
    return f"{component.id}: {' | '.join(parts)}" if parts else None


def pe_order(report: PeReport) -> tuple:
    """Sort key of a report: its PE's (sip, cube, pe)."""
    return nm.pe_coords(report.pe)


def launch_result(request) -> LaunchResult:
    """The request's :class:`LaunchResult`, created on first use."""
    if request.result is None:
        request.result = LaunchResult(request.msg.kernel)
    return request.result


def collect(pending: dict, key: int, reports) -> bool:
    """Add ``reports`` to the fan-in entry ``pending[key]`` (``[left, reports, ...]``); True when it is complete."""
    entry = pending[key]
    entry[1].extend(reports)
    entry[0] -= 1
    return entry[0] == 0


def check_kernel(kernel: str, fn: Callable) -> None:
    """:class:`MessageError` unless ``fn`` can be a kernel body: a generator or ``async def`` function would only
    build a generator or coroutine when the PE calls it, run none of its body, and "finish" in 0 ns."""
    try:
        body = inspect.unwrap(fn)
    except ValueError:  # a __wrapped__ cycle: nothing to look through
        body = fn
    name = getattr(body, "__qualname__", type(body).__name__)
    if inspect.isgeneratorfunction(body) or inspect.isasyncgenfunction(body):
        raise MessageError(f"kernel launch {kernel!r}: {name} is a generator function (its body contains yield), so "
                           f"calling it would run nothing; write the kernel as a plain def without yield")
    if inspect.iscoroutinefunction(body):
        raise MessageError(f"kernel launch {kernel!r}: {name} is an async def function, so calling it would only "
                           f"create a coroutine and run nothing; write the kernel as a plain def (tl calls wait for "
                           f"the simulator by themselves)")


def _start_launch(engine: Engine, req) -> None:
    """Check the kernel and the targets, then send one :class:`SipLaunch` per SIP from the host to that SIP's
    IO_CPU."""
    msg: KernelLaunchMsg = req.msg
    check_kernel(msg.kernel, msg.fn)
    if not msg.targets:
        raise MessageError(f"kernel launch {msg.kernel!r} has no target PEs")
    pes = [t[0] for t in msg.targets]
    if len(set(pes)) != len(pes):
        dup = sorted({p for p in pes if pes.count(p) > 1})[0]
        raise MessageError(f"kernel launch {msg.kernel!r} targets PE {nm.pe_prefix(*dup)} twice")
    by_sip: dict[int, list] = {}
    for (sip, cube, pe), args in msg.targets:
        engine.resolver.find_pe_block(sip, cube, pe, "pe_cpu")
        by_sip.setdefault(sip, []).append(((sip, cube, pe), args))
    paths = {sip: engine.router.control_path(nm.HOST, engine.resolver.find_io_cpu(sip)) for sip in sorted(by_sip)}
    for path in paths.values():
        engine.route(path)  # every node on the way must have a component before anything is sent
    req.source = nm.HOST
    req.op_name = "kernel_launch"
    req.pending = len(paths)
    for sip, path in paths.items():
        engine.send_control(req, path, SipLaunch(msg, sip, tuple(sorted(by_sip[sip], key=lambda t: t[0]))))


def _complete_launch(engine: Engine, req) -> None:
    engine.oplog.record(req.t_submit, req.t_end, req.source, "control", "kernel_launch",
                        {"corr_id": req.corr_id, "kernel": req.msg.kernel, "pes": len(req.msg.targets),
                         "ok": req.error is None})


#: How the engine starts and completes a kernel launch.
LAUNCH_KIND = MessageKind(KernelLaunchMsg, _start_launch, _complete_launch)
