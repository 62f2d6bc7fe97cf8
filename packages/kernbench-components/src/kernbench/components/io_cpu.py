"""IO_CPU: the IO chiplet's control CPU, where a SIP's share of a kernel launch enters (hop 2 of a launch).

It stamps one barrier time for the whole launch, the sum of the two
dispatch legs to the farthest target::

    target_start = t_io + max over targets of
                   [ latency(IO_CPU -> M_CPU) + overhead(M_CPU)
                     + latency(M_CPU -> PE_CPU) + overhead(PE_CPU) ]

where ``t_io`` is when the IO_CPU has processed the launch and ``latency``
counts the overheads of the nodes after the source plus wire propagation. No
PE can reach its kernel body later than that, so all start together (ADR
0009). It then sends one :class:`~kernbench.components.launch.CubeLaunch` per
cube and, on the way back, forwards the cubes' reports to the host once every
cube has reported.
"""

from __future__ import annotations

from kernbench.components.launch import (
    CubeLaunch,
    LaunchReport,
    SipLaunch,
    collect,
    failed_while_waiting,
    launch_result,
)
from kernbench.sim.component import Component
from kernbench.sim.protocol import Engine
from kernbench.topology import naming as nm


class IoCpu(Component):
    """The IO chiplet's control CPU: fans launches out to M_CPUs, aggregates their reports."""

    __slots__ = ("pending",)

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.pending: dict[int, list] = {}  # launch corr id -> [cubes left, reports]

    def blocked(self) -> str | None:
        """PE failures of launches whose other cubes never finished (see :meth:`MCpu.blocked
        <kernbench.components.m_cpu.MCpu.blocked>`)."""
        return failed_while_waiting(self, self.pending)

    def on_control(self, payload: object, t: float, transfer) -> None:
        """Handle a launch from the host or a report from an M_CPU."""
        eng = self.engine
        if isinstance(payload, SipLaunch):
            t_io = t + self.overhead_ns
            by_cube: dict[int, list] = {}
            for target in payload.targets:
                by_cube.setdefault(target[0][1], []).append(target)
            legs = {}
            worst = 0.0
            for cube, targets in by_cube.items():
                m_cpu = nm.m_cpu(payload.sip, cube)
                leg1 = eng.router.control_path(self.id, m_cpu)
                legs[cube] = leg1
                lat1 = eng.control_latency_ns(leg1) + eng.components[m_cpu].overhead_ns
                for (sip, c, pe), _ in targets:
                    pe_cpu = nm.pe_block(sip, c, pe, "pe_cpu")
                    lat2 = eng.control_latency_ns(eng.router.control_path(m_cpu, pe_cpu))
                    worst = max(worst, lat1 + lat2 + eng.components[pe_cpu].overhead_ns)
            target_start = t_io + worst
            self.pending[transfer.request.corr_id] = [len(by_cube), []]
            for cube in sorted(by_cube):
                msg = CubeLaunch(payload, cube, tuple(by_cube[cube]), target_start, self.id)
                eng.send_control(transfer.request, legs[cube], msg, t_start=t_io, apply_source_overhead=False)
            launch_result(transfer.request).target_start_ns[payload.sip] = target_start
        elif isinstance(payload, LaunchReport):
            if collect(self.pending, transfer.request.corr_id, payload.reports):
                reports = self.pending.pop(transfer.request.corr_id)[1]
                eng.send_control(transfer.request, eng.router.control_path(self.id, nm.HOST),
                                 LaunchReport(payload.sip, tuple(reports)), t_start=t + self.overhead_ns,
                                 apply_source_overhead=False)
        else:
            super().on_control(payload, t, transfer)
