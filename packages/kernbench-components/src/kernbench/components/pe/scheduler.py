"""PE_SCHEDULER: the PE's sole dispatcher (the hop after PE_CPU in a kernel's life).

Commands arrive from the PE_CPU as control messages. DMA commands go to
PE_DMA, PE-to-PE messages to PE_IPCQ, a blocking compute command through the
PE's stages (:mod:`~kernbench.components.pe.stages`: FETCH -> GEMM/MATH ->
STORE), and a composite is planned (:mod:`~kernbench.components.pe.composite_plan`)
and run as a pipeline (:mod:`~kernbench.components.pe.composite_run`).
"""

from __future__ import annotations

from collections import deque

from kernbench.components.pe.block import PeBlock
from kernbench.components.pe.commands import (
    ComputeCmd,
    CyclesCmd,
    DmaReadCmd,
    DmaWriteCmd,
    IpcqRecvCmd,
    IpcqSendCmd,
)
from kernbench.components.pe.composite_cmd import CompositeCmd
from kernbench.components.pe.composite_plan import split
from kernbench.components.pe.composite_run import CompositeRun
from kernbench.components.pe.stages import Stages
from kernbench.sim.protocol import Engine
from kernbench.topology import block_params
from kernbench.topology import naming as nm
from kernbench.topology.tcm_layout import STAGING_OPERANDS, TcmLayout


class PeScheduler(PeBlock):
    """The PE's sole dispatcher: DMA commands to PE_DMA, compute commands through FETCH -> engine -> STORE.

    Composites may run concurrently, but one that touches what an earlier
    one still in flight writes (or writes what it reads) waits for it:
    composites are admitted strictly in arrival order, so a waiting composite
    also holds back every later one (no reordering). The check compares the
    byte ranges of the commands' operands, outputs and read-write handles.
    """

    PARAMS = block_params.PE_SCHEDULER  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("_stages", "admit_queue", "inflight", "staging", "tile")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        a = node.attrs
        self.tile = (a["tile_m"], a["tile_n"], a["tile_k"])
        self.admit_queue: deque = deque()  # (run, reads, writes) waiting for admission
        self.inflight: list = []  # (run, reads, writes) admitted and not finished
        self._stages: Stages | None = None
        layout = TcmLayout.of(engine.spec)
        loc = nm.locate(self.id)
        #: encoded addresses of this PE's composite staging buffers: operand -> (buffer 0, buffer 1)
        self.staging = {op: tuple(layout.addr(loc.sip, loc.cube, loc.pe, layout.staging_offset(op, b))
                                  for b in (0, 1)) for op in STAGING_OPERANDS}

    @property
    def stages(self) -> Stages:
        """This PE's FETCH -> engine -> STORE path (built on first use)."""
        if self._stages is None:
            self._stages = Stages(self)
        return self._stages

    def on_control(self, cmd: object, t: float, transfer) -> None:
        """Dispatch one command that arrived from PE_CPU at ``t``."""
        t0 = t + self.overhead_ns
        if isinstance(cmd, (DmaReadCmd, DmaWriteCmd)):
            dma = self.block("pe_dma")
            self.engine.send_control(transfer.request, (self.id, dma.id), cmd, t_start=t0,
                                     apply_source_overhead=False)
        elif isinstance(cmd, ComputeCmd):
            self._compute(cmd, t0)
        elif isinstance(cmd, CompositeCmd):
            run = CompositeRun(self, cmd, transfer.request, split(cmd, self.tile))
            reads, writes = cmd.ranges()
            self.engine.at(t0, self._arrive, (run, reads, writes))
        elif isinstance(cmd, (IpcqSendCmd, IpcqRecvCmd)):
            self.engine.send_control(transfer.request, (self.id, self.block("pe_ipcq").id), cmd, t_start=t0,
                                     apply_source_overhead=False)
        elif isinstance(cmd, CyclesCmd):
            self.engine.at(t0, lambda _: cmd.done.succeed(None))
        else:
            super().on_control(cmd, t, transfer)

    def _arrive(self, item: tuple) -> None:
        self.admit_queue.append(item)
        self._admit()

    def _admit(self) -> None:
        """Start queued composites in order while the head of the queue conflicts with nothing in flight."""
        while self.admit_queue:
            run, reads, writes = self.admit_queue[0]
            for _, r2, w2 in self.inflight:
                if _overlap(writes, r2) or _overlap(writes, w2) or _overlap(reads, w2):
                    return
            self.admit_queue.popleft()
            self.inflight.append((run, reads, writes))
            run.start(self.engine.now)

    def retire(self, run: CompositeRun) -> None:
        """A composite finished: drop it from the in-flight set and admit whatever it held back."""
        self.inflight = [item for item in self.inflight if item[0] is not run]
        self._admit()

    def blocked(self) -> str | None:
        """What the scheduler holds back, for deadlock reports."""
        if not self.admit_queue:
            return None
        return f"{len(self.admit_queue)} composite(s) waiting for earlier composites that touch the same tensors"

    def _compute(self, cmd: ComputeCmd, t0: float) -> None:
        stages = self.stages
        t_fetch = stages.fetch(t0, cmd.fetch_bytes, {})
        run = stages.gemm if cmd.engine == "gemm" else stages.math
        _, t_run = run(t_fetch, cmd.work, cmd.op, {"work": cmd.work, **cmd.params})
        t_end = stages.store(t_run, cmd.store_bytes, {})
        self.engine.at(t_end, self._finish, cmd)

    def _finish(self, cmd: ComputeCmd) -> None:
        if cmd.compute is not None and self.engine.memory is not None:
            cmd.compute(self.engine.memory)
        cmd.done.succeed(None)


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two sets of (start, end) byte ranges intersect (:func:`overlaps` of each range of ``a``)."""
    for start, end in a:  # NOTE: loops, not generators: this runs per queued composite and command in flight
        for s, e in b:
            if s < end and start < e:
                return True
    return False
