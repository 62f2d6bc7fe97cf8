"""PE-local engines: TCM channels, fetch/store, GEMM, math, and the scheduler that feeds them.

Engines are serial servers that keep a "free at" time, like wires: a stage
starts when both its input is ready and the engine is free, and occupies the
engine for its service time. Everything inside a PE is arithmetic on these
times; only the command's completion is a scheduled event.

Service times (ns):

* FETCH  — bytes / TCM read bandwidth, on the fetch/store engine and the TCM read channel;
* STORE  — bytes / TCM write bandwidth, on the fetch/store engine and the TCM write channel;
* GEMM   — tiles x (2 tm tn tk / peak), an under-filled tile costs a full tile;
* MATH   — ceil(elements / lanes) cycles at the PE clock.
"""

from __future__ import annotations

import math
from collections import deque

from kernbench.components.pe.commands import (
    ComputeCmd,
    CyclesCmd,
    DmaReadCmd,
    DmaWriteCmd,
    IpcqRecvCmd,
    IpcqSendCmd,
)
from kernbench.components.pe.composite import CompositeRun
from kernbench.components.pe.composite_cmd import CompositeCmd, overlaps, split
from kernbench.components.pe.stages import Stages
from kernbench.components.tiling import gemm_tile_ns
from kernbench.sim.component import Component
from kernbench.sim.fabric import Packet
from kernbench.topology import naming as nm
from kernbench.topology.tcm_layout import STAGING_OPERANDS, TcmLayout


class Server(Component):
    """A serial engine: ``free_at`` plus occupancy counters (ns)."""

    __slots__ = ("busy_ns", "count", "free_at")

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.free_at = 0.0
        self.busy_ns = 0.0
        self.count = 0

    def reserve(self, t_ready: float, service_ns: float) -> tuple[float, float]:
        """Occupy the engine for ``service_ns`` from ``max(t_ready, free_at)``; returns (start, end)."""
        start = t_ready if t_ready > self.free_at else self.free_at
        end = start + service_ns
        self.free_at = end
        self.busy_ns += service_ns
        self.count += 1
        return start, end


class PeTcm(Component):
    """The PE's tightly coupled memory: independent read and write channels.

    Same-direction accesses serialise; a read and a write overlap. As a
    fabric terminal it absorbs DMA read data and remote writes (write
    channel) and serves remote reads (read channel).
    """

    __slots__ = ("read_bw", "read_free", "write_bw", "write_free")

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        tcm = engine.spec.pe.tcm
        self.read_bw, self.write_bw = tcm.read_bw_gbs, tcm.write_bw_gbs
        self.read_free = self.write_free = 0.0

    def read(self, t_ready: float, nbytes: int) -> tuple[float, float]:
        """Reserve the read channel for ``nbytes``; returns (start, end) ns."""
        start = max(t_ready, self.read_free)
        self.read_free = end = start + nbytes / self.read_bw
        return start, end

    def write(self, t_ready: float, nbytes: int) -> tuple[float, float]:
        """Reserve the write channel for ``nbytes``; returns (start, end) ns."""
        start = max(t_ready, self.write_free)
        self.write_free = end = start + nbytes / self.write_bw
        return start, end

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Data landing in the TCM (a DMA read's reply, or another PE's DMA write) drains through the write
        channel as the flits arrive; a read command is served from the read channel and replied to."""
        tr = pkt.transfer
        if tr.kind == "read_cmd":
            self._serve_read(tr, t_head)
            return
        if tr.kind not in ("read_data", "write"):
            super().on_packet(pkt, t_head)
        start = max(t_head, self.write_free)
        end = max(pkt.t_tail, start + pkt.nbytes / self.write_bw)
        self.write_free = end
        self.engine.landed(pkt, end)

    def _serve_read(self, cmd, t_head: float) -> None:
        eng = self.engine
        nbytes = cmd.read_nbytes
        start = max(t_head, self.read_free)
        self.read_free = start + nbytes / self.read_bw
        flit_ns = eng.flit_bytes / self.read_bw
        # a packet's first flit is ready once its bytes have been read; later flits follow one flit time apart
        ready = [(start + min(off + eng.flit_bytes, nbytes) / self.read_bw, flit_ns)
                 for off in range(0, nbytes, eng.packet_bytes)]
        eng.read_reply(cmd, ready)


class PeFetchStore(Server):
    """Moves operands TCM -> register file (FETCH) and results back (STORE).

    Its two directions work independently, like the TCM's read and write
    channels they use: a STORE never holds up the next FETCH.
    """

    __slots__ = ("store_free",)

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.store_free = 0.0

    def fetch(self, tcm: PeTcm, t_ready: float, nbytes: int) -> tuple[float, float]:
        """FETCH ``nbytes``; returns (start, end) ns."""
        if nbytes <= 0:
            return t_ready, t_ready
        start, end = tcm.read(max(t_ready, self.free_at), nbytes)
        self.reserve(start, end - start)
        return start, end

    def store(self, tcm: PeTcm, t_ready: float, nbytes: int) -> tuple[float, float]:
        """STORE ``nbytes``; returns (start, end) ns."""
        if nbytes <= 0:
            return t_ready, t_ready
        start, end = tcm.write(max(t_ready, self.store_free), nbytes)
        self.store_free = end
        self.busy_ns += end - start
        self.count += 1
        return start, end


class PeGemm(Server):
    """The matrix engine: one full tile per ``tile_ns``, however much of the tile is used."""

    __slots__ = ("tile_ns",)

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        g = engine.spec.pe.gemm
        self.tile_ns = gemm_tile_ns(g.peak_tflops, (g.tile_m, g.tile_n, g.tile_k))


class PeMath(Server):
    """The vector engine: ``lanes`` elements per PE clock cycle."""

    __slots__ = ("lanes", "ns_per_step")

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.lanes = engine.spec.pe.math_lanes
        self.ns_per_step = 1.0 / engine.spec.pe.clock_ghz

    def service_ns(self, elements: int) -> float:
        """Time to process ``elements``: ceil(elements / lanes) clock cycles, ns."""
        return math.ceil(elements / self.lanes) * self.ns_per_step


class PeScheduler(Component):
    """The PE's sole dispatcher: DMA commands to PE_DMA, compute commands through FETCH -> engine -> STORE.

    Composites may run concurrently, but one that touches what an earlier
    one still in flight writes (or writes what it reads) waits for it:
    composites are admitted strictly in arrival order, so a waiting composite
    also holds back every later one (no reordering). The check compares the
    byte ranges of the commands' operands, outputs and read-write handles.
    """

    __slots__ = ("_stages", "admit_queue", "blocks", "inflight", "staging", "tile")

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.blocks: dict[str, Component] = {}
        g = engine.spec.pe.gemm
        self.tile = (g.tile_m, g.tile_n, g.tile_k)
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

    def block(self, name: str) -> Component:
        """A sibling block of this PE (``pe_dma``, ``pe_tcm``, ...), looked up once."""
        comp = self.blocks.get(name)
        if comp is None:
            comp = self.blocks[name] = self.engine.components[nm.sibling(self.id, name)]
        return comp

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
            if any(_overlap(writes, r2) or _overlap(writes, w2) or _overlap(reads, w2)
                   for _, r2, w2 in self.inflight):
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
    """Whether two sets of (start, end) byte ranges intersect."""
    return any(overlaps(s, e, b) for s, e in a)
