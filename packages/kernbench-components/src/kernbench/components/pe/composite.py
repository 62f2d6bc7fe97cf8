"""The composite-GEMM pipeline: a tile plan streamed through DMA -> FETCH -> GEMM -> STORE -> DMA.

The scheduler turns one :class:`CompositeCmd` into a run over its tile plan.
Tiles move through the stages on their own: a tile's DMA reads go through
the PE's read channel in tile order; when they land, its FETCH, GEMM, any
K-tile epilogue, and on the last K step its output-tile epilogue and STORE
are placed on their engines (each a serial server, see ``engines.py``); the
result block then queues on the DMA write channel. Two staging buffers per
operand bound the look-ahead: tile ``t+2``'s reads wait for tile ``t``'s
FETCH. So tile ``i``'s GEMM overlaps tile ``i+1``'s DMA, and the engines'
"free at" times serialise everything else.

Epilogue ops and their scope: ``k_tile`` (after every GEMM step, on the
partial block), ``output_tile`` (after the last K step, before STORE),
``once`` (over the whole output after the last tile). Each costs a MATH
stage over the elements it touches. In data mode the run computes the
product tile by tile in f32 with the epilogues applied at their scopes, and
writes the result when the command completes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import simpy

from kernbench.components.pe.commands import ENUM, FRAMING, HANDLE, LENGTH, OPCODE, SCALAR, DmaReadCmd, DmaWriteCmd
from kernbench.components.tiling import Stage, TilePlan
from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr

HEAD_OPS = {  # math heads: the op a math-headed composite applies to every element of its input
    "copy": lambda x: x,
    "exp": np.exp,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "abs": np.abs,
    "sqrt": np.sqrt,
}
EPILOGUE_OPS = {
    "scale": ("value",),
    "bias": ("vector",),
    "relu": (),
    "sigmoid": (),
    "exp": (),
}
SCOPES = ("k_tile", "output_tile", "once")


@dataclass(frozen=True, slots=True)
class EpilogueOp:
    """One epilogue op: name, scope, and its operand (a number, or a TCM vector address and length)."""

    op: str
    scope: str
    value: float = 0.0
    vector: tuple[int, int, str] | None = None  # (encoded TCM address, length N, dtype)


@dataclass(frozen=True, slots=True)
class Operand:
    """A composite operand: encoded address, full 2-D shape, dtype, and whether it lives in HBM."""

    addr: int
    shape: tuple[int, int]
    dtype: str
    in_hbm: bool

    def block_addr(self, r0: int, c0: int) -> int:
        """Address of element (r0, c0) of the row-major matrix (a 2-D DMA descriptor's start)."""
        return self.addr + (r0 * self.shape[1] + c0) * np.dtype(self.dtype).itemsize

    def row_layout(self, cols: int) -> tuple[int, int]:
        """(row bytes, row pitch) of a block ``cols`` wide; (0, 0) when the block is contiguous (full rows)."""
        if cols == self.shape[1]:
            return 0, 0
        item = np.dtype(self.dtype).itemsize
        return cols * item, self.shape[1] * item


@dataclass(frozen=True, slots=True)
class CompositeCmd:
    """``out = epilogue(head(a, b))`` over a tile plan; ``done`` fires when the last result is written.

    ``head`` is ``"gemm"`` (``a @ b``) or a math op of :data:`HEAD_OPS` applied to ``a`` (``b`` is None).
    """

    plan: TilePlan
    a: Operand
    b: Operand | None
    out: Operand
    epilogue: tuple[EpilogueOp, ...]
    done: simpy.Event = field(repr=False, compare=False)
    head: str = "gemm"

    @property
    def logical_bytes(self) -> int:
        """Descriptor size (ADR 0013): framing, the op list (head + epilogue) and the read-write handle list.

        The head op: opcode, scope, operand addresses, output address, and
        its extents (m, n, k for a GEMM). Each epilogue op: opcode, scope, its
        vector address or scalar, and the output address it updates. The
        read-write list holds the output.
        """
        n_in = 2 if self.head == "gemm" else 1
        extents = 3 if self.head == "gemm" else 2
        head = OPCODE + ENUM + LENGTH + HANDLE * n_in + HANDLE + LENGTH + SCALAR * extents
        epilogue = sum(OPCODE + ENUM + LENGTH + (HANDLE if op.vector is not None else 0) + HANDLE + LENGTH
                       + (SCALAR if op.op == "scale" else 0) for op in self.epilogue)
        return FRAMING + LENGTH + head + epilogue + LENGTH + HANDLE


def apply_epilogue(x: np.ndarray, op: EpilogueOp, col0: int, mem) -> np.ndarray:
    """The numeric effect of one epilogue op on a block whose first column is ``col0`` (f32)."""
    if op.op == "scale":
        return x * np.float32(op.value)
    if op.op == "bias":
        addr, n, dtype = op.vector
        vec = mem.read_array(addr, (n,), dtype).astype(np.float32)
        return x + vec[col0:col0 + x.shape[1]]
    if op.op == "relu":
        return np.maximum(x, 0)
    if op.op == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    return np.exp(x)


class CompositeRun:
    """One composite command in flight on a PE."""

    def __init__(self, sched, cmd: CompositeCmd, request, t0: float) -> None:
        self.sched = sched
        self.eng = sched.engine
        self.cmd = cmd
        self.request = request
        self.t0 = t0
        self.tiles = cmd.plan.tiles
        self.fetch_done: list[float] = [0.0] * len(self.tiles)
        self.gemm_start: list[float] = [0.0] * len(self.tiles)
        self.outputs_left = cmd.plan.n_output_tiles
        self.t_last = t0
        loc = nm.locate(sched.id)
        # TCM staging buffers at the bottom of the TCM; their bytes are not modeled (data mode reads operands)
        self.staging = PhysAddr(loc.sip, loc.cube, "tcm", 0, loc.pe).encode()
        self.reads = [s for s in self.tiles[0].steps if s.stage is Stage.DMA_READ] if self.tiles else []
        self.k_ops = [op for op in cmd.epilogue if op.scope == "k_tile"]
        self.tile_ops = [op for op in cmd.epilogue if op.scope == "output_tile"]
        self.once_ops = [op for op in cmd.epilogue if op.scope == "once"]

    def start(self) -> None:
        """Begin streaming: the first two tiles' reads, or all compute when nothing is read per tile."""
        if not any(s.stage is Stage.DMA_READ for s in self.tiles[0].steps):
            for i in range(len(self.tiles)):
                self._compute(i, self.t0)
            return
        for i in range(min(2, len(self.tiles))):
            self._read(i)

    def _read(self, i: int) -> None:
        tile = self.tiles[i]
        tm, tn, tk = self.cmd.plan.tile
        r0, c0, k0 = tile.i * tm, tile.j * tn, tile.kk * tk
        dma = self.sched.block("pe_dma")
        pending = []
        for step in tile.steps:
            if step.stage is not Stage.DMA_READ:
                continue
            if self.cmd.head != "gemm":
                operand, src = self.cmd.a, self.cmd.a.block_addr(r0, c0)
            elif step.operand == "a":
                operand, src = self.cmd.a, self.cmd.a.block_addr(r0, k0)
            else:
                operand, src = self.cmd.b, self.cmd.b.block_addr(k0, c0)
            ev = self.eng.env.event()
            pending.append(ev)
            row, pitch = operand.row_layout(step.cols)
            dma.enqueue(DmaReadCmd(src, self.staging, step.nbytes, ev, copy_data=False, row_bytes=row,
                                   src_pitch=pitch, dst_pitch=row), self.request)
        left = [len(pending)]

        def landed(_ev) -> None:
            left[0] -= 1
            if left[0] == 0:
                self._compute(i, self.eng.now)
                if i + 2 < len(self.tiles):
                    self.eng.at(self.fetch_done[i], lambda _: self._read(i + 2))

        for ev in pending:
            ev.callbacks.append(landed)



    def _compute(self, i: int, t_ready: float) -> None:
        tile = self.tiles[i]
        s = self.sched
        tcm, fs = s.block("pe_tcm"), s.block("pe_fetch_store")
        gemm, vec = s.block("pe_gemm"), s.block("pe_math")
        log = self.eng.oplog
        if self.cmd.head == "gemm":
            in_bytes = (tile.m * tile.k * np.dtype(self.cmd.a.dtype).itemsize
                        + tile.k * tile.n * np.dtype(self.cmd.b.dtype).itemsize)
        else:
            in_bytes = tile.m * tile.n * np.dtype(self.cmd.a.dtype).itemsize
        if i >= 2:  # two register-file buffers: fetch i waits until the head of tile i-2 has taken its operands
            t_ready = max(t_ready, self.gemm_start[i - 2])
        f0, t_fetch = fs.fetch(tcm, t_ready, in_bytes)
        self.fetch_done[i] = t_fetch
        log.record(f0, t_fetch, fs.id, "memory", "FETCH", {"tile": i, "nbytes": in_bytes})
        if self.cmd.head == "gemm":
            g0, t = gemm.reserve(t_fetch, gemm.tile_ns)
            log.record(g0, t, gemm.id, "gemm", "GEMM", {"tile": i, "m": tile.m, "n": tile.n, "k": tile.k})
        else:
            g0 = max(t_fetch, vec.free_at)
            t = self._math(vec, t_fetch, tile.m * tile.n, self.cmd.head, i)
        self.gemm_start[i] = g0
        for op in self.k_ops:
            t = self._math(vec, t, tile.m * tile.n, op.op, i)
        if not tile.last_k:
            self.t_last = max(self.t_last, t)
            return
        for op in self.tile_ops:
            t = self._math(vec, t, tile.m * tile.n, op.op, i)
        out_bytes = tile.m * tile.n * np.dtype(self.cmd.out.dtype).itemsize
        s0, t_store = fs.store(tcm, t, out_bytes)
        log.record(s0, t_store, fs.id, "memory", "STORE", {"tile": i, "nbytes": out_bytes})
        if self.cmd.out.in_hbm:
            tm, tn, _ = self.cmd.plan.tile
            dst = self.cmd.out.block_addr(tile.i * tm, tile.j * tn)
            self.eng.at(t_store, lambda _: self._write(dst, out_bytes, tile.n))
        else:
            self.t_last = max(self.t_last, t_store)
            self._output_done(t_store)

    def _math(self, vec, t: float, elements: int, op: str, i: int) -> float:
        start, end = vec.reserve(t, math.ceil(elements / vec.lanes) * vec.ns_per_step)
        self.eng.oplog.record(start, end, vec.id, "math", "MATH", {"tile": i, "op": op, "elements": elements})
        return end

    def _write(self, dst: int, nbytes: int, cols: int) -> None:
        ev = self.eng.env.event()
        ev.callbacks.append(lambda _: self._output_done(self.eng.now))
        row, pitch = self.cmd.out.row_layout(cols)
        self.sched.block("pe_dma").enqueue(DmaWriteCmd(self.staging, dst, nbytes, ev, copy_data=False,
                                                       row_bytes=row, src_pitch=row, dst_pitch=pitch),
                                           self.request)

    def _output_done(self, t: float) -> None:
        self.t_last = max(self.t_last, t)
        self.outputs_left -= 1
        if self.outputs_left == 0:
            t_end = self.t_last
            m, n = self.cmd.out.shape
            for op in self.once_ops:
                t_end = self._math(self.sched.block("pe_math"), t_end, m * n, op.op, -1)
            self.eng.at(t_end, lambda _: self._finish())

    def _finish(self) -> None:
        plan = self.cmd.plan
        self.eng.oplog.record(self.t0, self.eng.now, self.sched.id, "gemm", "composite",
                              {"variant": plan.variant, "shape": plan.shape, "tiles": plan.n_tiles, "macs": plan.macs,
                               "tile_macs": plan.tile_macs})
        mem = self.eng.memory
        if mem is not None:
            self._compute_data(mem)
        self.cmd.done.succeed(None)

    def _compute_data(self, mem) -> None:
        cmd = self.cmd
        a = mem.read_array(cmd.a.addr, cmd.a.shape, cmd.a.dtype).astype(np.float32)
        m, n = cmd.out.shape
        if cmd.head != "gemm":
            out = HEAD_OPS[cmd.head](a)
            for op in (*self.k_ops, *self.tile_ops):  # elementwise: per tile equals on the whole
                out = apply_epilogue(out, op, 0, mem)
            for op in self.once_ops:
                out = apply_epilogue(out, op, 0, mem)
            mem.write(cmd.out.addr, out.astype(cmd.out.dtype))
            return
        b = mem.read_array(cmd.b.addr, cmd.b.shape, cmd.b.dtype).astype(np.float32)
        tm, tn, _ = cmd.plan.tile
        out = np.zeros((m, n), dtype=np.float32)
        acc = None
        tk = cmd.plan.tile[2]
        for tile in self.tiles:
            r0, c0, k0 = tile.i * tm, tile.j * tn, tile.kk * tk
            part = a[r0:r0 + tile.m, k0:k0 + tile.k] @ b[k0:k0 + tile.k, c0:c0 + tile.n]
            for op in self.k_ops:
                part = apply_epilogue(part, op, c0, mem)
            acc = part if tile.first_k else acc + part
            if tile.last_k:
                for op in self.tile_ops:
                    acc = apply_epilogue(acc, op, c0, mem)
                out[r0:r0 + tile.m, c0:c0 + tile.n] = acc
        for op in self.once_ops:
            out = apply_epilogue(out, op, 0, mem)
        mem.write(cmd.out.addr, out.astype(cmd.out.dtype))
