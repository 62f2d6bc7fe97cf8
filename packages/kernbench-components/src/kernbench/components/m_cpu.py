"""M_CPU: a cube's management CPU (hop 3 of a launch), also a DMA source and a small local memory.

For a launch it hands every targeted PE_CPU of its cube a
:class:`~kernbench.components.launch.PeLaunch` with the PE's arguments,
program ids and the launch's barrier time, and forwards the cube's reports to
the IO_CPU once every PE has reported. As a memory it is bounded by the link
that feeds it, like the SRAM.
"""

from __future__ import annotations

from kernbench.components.launch import (
    CubeLaunch,
    LaunchReport,
    PeLaunch,
    collect,
    failed_while_waiting,
    program_grid,
)
from kernbench.components.memory import LinkBoundMemory
from kernbench.sim.protocol import Engine
from kernbench.topology import naming as nm


class MCpu(LinkBoundMemory):
    """The cube's management CPU: launch fan-out to its PEs, a DMA source (M_CPU DMA), a small local memory."""

    __slots__ = ("pending",)

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.pending: dict[int, list] = {}  # launch corr id -> [PEs left, reports, io_cpu]

    def blocked(self) -> str | None:
        """PE failures of launches whose other PEs never finished (so a deadlock report shows the cause)."""
        return failed_while_waiting(self, self.pending)

    def on_control(self, payload: object, t: float, transfer) -> None:
        """Handle a launch from the IO_CPU or a report from a PE_CPU."""
        eng = self.engine
        if isinstance(payload, CubeLaunch):
            t0 = t + self.overhead_ns
            grid = program_grid(payload.launch.targets)
            self.pending[transfer.request.corr_id] = [len(payload.targets), [], payload.io_cpu]
            for (sip, cube, pe), args in payload.targets:
                pid, nprog = grid[(sip, cube, pe)]
                msg = PeLaunch(payload.launch, (sip, cube, pe), args, pid, nprog, payload.target_start_ns, self.id)
                path = eng.router.control_path(self.id, nm.pe_block(sip, cube, pe, "pe_cpu"))
                eng.send_control(transfer.request, path, msg, t_start=t0, apply_source_overhead=False)
        elif isinstance(payload, LaunchReport):
            if collect(self.pending, transfer.request.corr_id, payload.reports):
                _, reports, io_cpu = self.pending.pop(transfer.request.corr_id)
                eng.send_control(transfer.request, eng.router.control_path(self.id, io_cpu),
                                 LaunchReport(payload.sip, tuple(reports)), t_start=t + self.overhead_ns,
                                 apply_source_overhead=False)
        else:
            super().on_control(payload, t, transfer)
