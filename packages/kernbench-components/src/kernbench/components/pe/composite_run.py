"""The composite pipeline: a tile plan streamed through DMA -> FETCH -> GEMM/MATH -> STORE -> DMA.

The scheduler splits one :class:`CompositeCmd` into phases (see
``composite_cmd``) and runs them here. Ops before the driver run first, once
each and in order, as FETCH -> MATH -> STORE on TCM tensors; the tile loop
(and with it every DMA the loop streams) starts when they are done.
Tiles move through the stages on their own: a tile's DMA reads go through
the PE's read channel in tile order; when they land, its FETCH, GEMM, any
K-tile epilogue, and on the last K step its output-tile epilogue and STORE
are placed on their engines (each a serial server, see ``engines.py``); the
result block then queues on the DMA write channel. Two staging buffers per
operand bound the look-ahead: tile ``t+2``'s reads wait for tile ``t``'s
FETCH. So tile ``i``'s GEMM overlaps tile ``i+1``'s DMA, and the engines'
"free at" times serialise everything else.

Ops after the driver and their scope: ``k_tile`` (after every GEMM step, on
the partial block), ``output_tile`` (after the last K step, before STORE),
``kernel`` (over the whole output after the last tile). Each costs a MATH
stage over the elements it touches. In data mode, when the command
completes, the run computes the ops before the driver in order, then the
product tile by tile in f32 with the epilogues applied at their scopes, and
writes the result.
"""

from __future__ import annotations

import math

import numpy as np

from kernbench.components.pe.commands import DmaReadCmd, DmaWriteCmd
from kernbench.components.pe.composite_cmd import CompositeCmd, OpSpec
from kernbench.components.pe.composite_plan import Pipeline
from kernbench.components.pe.math_kinds import STANDALONE, UNARY, apply_epilogue, run_standalone
from kernbench.components.tiling import Stage


class CompositeRun:
    """One composite command in flight on a PE: its phases, tile-loop state and completion."""

    def __init__(self, sched, cmd: CompositeCmd, request, pipe: Pipeline) -> None:
        self.sched = sched
        self.eng = sched.engine
        self.cmd = cmd
        self.pipe = pipe
        self.request = request
        self.t0 = 0.0
        plan = pipe.plan
        self.tiles = plan.tiles if plan is not None else ()
        self.fetch_done: list[float] = [0.0] * len(self.tiles)
        self.gemm_start: list[float] = [0.0] * len(self.tiles)
        self.outputs_left = plan.n_output_tiles if plan is not None else 0
        self.t_last = 0.0
        # the PE's composite staging buffers (TcmLayout.staging); their bytes are not modeled: data mode
        # computes from the operands directly
        self.staging = sched.staging
        self.gemm = pipe.driver is not None and pipe.driver.kind == "gemm"

    def start(self, t0: float) -> None:
        """Run the ops before the driver from ``t0``, then begin the tile loop (or finish)."""
        self.t0 = self.t_last = t0
        t = t0
        for op in self.pipe.pre:
            t = self._standalone(op, t)
        if self.pipe.driver is None:
            self.t_last = t
            self.eng.at(t, lambda _: self._finish())
        elif self.pipe.pre:  # the loop's DMAs start only when the ops before the driver are done
            self.eng.at(t, lambda _: self._start_tiles(t))
        else:
            self._start_tiles(t)

    def _standalone(self, op: OpSpec, t: float) -> float:
        """FETCH the op's TCM operands, run it on the math engine, STORE its output; returns the end time."""
        stages = self.sched.stages
        in_bytes = sum(o.nbytes for o in op.operands.values())
        elements = max([math.prod(op.out.shape), *(math.prod(o.shape) for o in op.operands.values())])
        t = stages.fetch(t, in_bytes, {"op": op.kind})
        t = self._math(t, elements, op.kind, -1)
        return stages.store(t, op.out.nbytes, {"op": op.kind})

    def _start_tiles(self, t0: float) -> None:
        """Begin the loop: all compute at once when nothing is streamed, else the first two tiles' reads as
        soon as the first DMA command has crossed from the scheduler to PE_DMA."""
        if not any(s.stage is Stage.DMA_READ for s in self.tiles[0].steps):
            for i in range(len(self.tiles)):
                self._compute(i, t0)
            return
        dma = self.sched.block("pe_dma")
        self.eng.at(t0 + self.eng.graph.edge(self.sched.id, dma.id).latency_ns, lambda _: self._first_reads())

    def _first_reads(self) -> None:
        for i in range(min(2, len(self.tiles))):
            self._read(i)

    def _read(self, i: int) -> None:
        tile = self.tiles[i]
        tm, tn, tk = self.pipe.plan.tile
        r0, c0, k0 = tile.i * tm, tile.j * tn, tile.kk * tk
        dma = self.sched.block("pe_dma")
        pending = []
        for step in tile.steps:
            if step.stage is not Stage.DMA_READ:
                continue
            if not self.gemm:
                operand, src = self.pipe.a, self.pipe.a.block_addr(r0, c0)
            elif step.operand == "a":
                operand, src = self.pipe.a, self.pipe.a.block_addr(r0, k0)
            else:
                operand, src = self.pipe.b, self.pipe.b.block_addr(k0, c0)
            ev = self.eng.completion()
            pending.append(ev)
            row, pitch = operand.row_layout(step.cols)
            buf = self.staging[step.operand][i & 1]
            dma.enqueue(DmaReadCmd(src, buf, step.nbytes, ev, copy_data=False, row_bytes=row,
                                   src_pitch=pitch, dst_pitch=row), self.request)
        left = [len(pending)]

        def landed(_ev) -> None:
            left[0] -= 1
            if left[0] == 0:
                self._compute(i, self.eng.now)
                if i + 2 < len(self.tiles):
                    self.eng.at(self.fetch_done[i], lambda _: self._read(i + 2))

        for ev in pending:
            ev.then(landed)

    def _compute(self, i: int, t_ready: float) -> None:
        tile = self.tiles[i]
        pipe = self.pipe
        stages = self.sched.stages
        if self.gemm:
            in_bytes = tile.m * tile.k * pipe.a.itemsize + tile.k * tile.n * pipe.b.itemsize
        else:
            in_bytes = tile.m * tile.n * pipe.a.itemsize
        if i >= 2:  # two register-file buffers: fetch i waits until the head of tile i-2 has taken its operands
            t_ready = max(t_ready, self.gemm_start[i - 2])
        t_fetch = stages.fetch(t_ready, in_bytes, {"tile": i})
        self.fetch_done[i] = t_fetch
        if self.gemm:
            g0, t = stages.gemm(t_fetch, 1, "gemm", {"tile": i, "m": tile.m, "n": tile.n, "k": tile.k})
        else:
            g0, t = stages.math(t_fetch, tile.m * tile.n, "math",
                                {"tile": i, "op": pipe.driver.kind, "elements": tile.m * tile.n})
        self.gemm_start[i] = g0
        for op in pipe.k_ops:
            t = self._math(t, tile.m * tile.n, op.kind, i)
        if not tile.last_k:
            self.t_last = max(self.t_last, t)
            return
        for op in pipe.tile_ops:
            t = self._math(t, tile.m * tile.n, op.kind, i)
        out_bytes = tile.m * tile.n * pipe.out.itemsize
        t_store = stages.store(t, out_bytes, {"tile": i})
        if not pipe.out.pinned:
            tm, tn, _ = pipe.plan.tile
            dst = pipe.out.block_addr(tile.i * tm, tile.j * tn)
            o = tile.i * pipe.plan.grid[1] + tile.j  # output blocks alternate between the two c buffers
            self.eng.at(t_store, lambda _: self._write(dst, out_bytes, tile.n, o))
        else:
            self.t_last = max(self.t_last, t_store)
            self._output_done(t_store)

    def _math(self, t: float, elements: int, op: str, i: int) -> float:
        """One math op over ``elements`` (tile ``i``; -1 outside the tile loop); returns its end."""
        return self.sched.stages.math(t, elements, "math", {"tile": i, "op": op, "elements": elements})[1]

    def _write(self, dst: int, nbytes: int, cols: int, o: int) -> None:
        ev = self.eng.completion()
        ev.then(lambda _: self._output_done(self.eng.now))
        row, pitch = self.pipe.out.row_layout(cols)
        self.sched.block("pe_dma").enqueue(DmaWriteCmd(self.staging["c"][o & 1], dst, nbytes, ev, copy_data=False,
                                                       row_bytes=row, src_pitch=row, dst_pitch=pitch),
                                           self.request)

    def _output_done(self, t: float) -> None:
        self.t_last = max(self.t_last, t)
        self.outputs_left -= 1
        if self.outputs_left == 0:
            t_end = self.t_last
            m, n = self.pipe.out.shape
            for op in self.pipe.post:
                t_end = self._math(t_end, m * n, op.kind, -1)
            self.eng.at(t_end, lambda _: self._finish())

    def _finish(self) -> None:
        plan = self.pipe.plan
        if plan is None:
            params = {"variant": "standalone", "ops": len(self.pipe.pre)}
        else:
            params = {"variant": plan.variant, "shape": plan.shape, "tiles": plan.n_tiles, "macs": plan.macs,
                      "tile_macs": plan.tile_macs}
        self.eng.oplog.record(self.t0, self.eng.now, self.sched.id, "gemm" if self.gemm else "math", "composite",
                              params)
        mem = self.eng.memory
        if mem is not None:
            self._compute_data(mem)
        self.sched.retire(self)
        self.cmd.done.succeed(None)

    def _compute_data(self, mem) -> None:
        pipe = self.pipe
        for op in pipe.pre:
            inputs = [_read_operand(mem, op.operands[slot]) for slot in STANDALONE[op.kind].slots]
            result = run_standalone(op.kind, inputs, op.extra)
            _write_operand(mem, op.out, np.broadcast_to(result, op.out.shape))
        if pipe.driver is None:
            return
        operands = {id(op): _read_operand(mem, next(iter(op.operands.values()))) for op in
                    (*pipe.k_ops, *pipe.tile_ops, *pipe.post) if op.operands}

        def epilogue(x, op: OpSpec, r0: int, c0: int):
            return apply_epilogue(x, op.kind, op.extra, operands.get(id(op)), r0, c0)

        a = _read_operand(mem, pipe.a)
        m, n = pipe.out.shape
        if not self.gemm:
            out = UNARY[pipe.driver.kind](a)
            for op in (*pipe.k_ops, *pipe.tile_ops, *pipe.post):  # elementwise: per tile equals on the whole
                out = epilogue(out, op, 0, 0)
            _write_operand(mem, pipe.out, out)
            return
        b = _read_operand(mem, pipe.b)
        tm, tn, tk = pipe.plan.tile
        out = np.zeros((m, n), dtype=np.float32)
        acc = None
        for tile in self.tiles:
            r0, c0, k0 = tile.i * tm, tile.j * tn, tile.kk * tk
            part = a[r0:r0 + tile.m, k0:k0 + tile.k] @ b[k0:k0 + tile.k, c0:c0 + tile.n]
            for op in pipe.k_ops:
                part = epilogue(part, op, r0, c0)
            acc = part if tile.first_k else acc + part
            if tile.last_k:
                for op in pipe.tile_ops:
                    acc = epilogue(acc, op, r0, c0)
                out[r0:r0 + tile.m, c0:c0 + tile.n] = acc
        for op in pipe.post:
            out = epilogue(out, op, 0, 0)
        _write_operand(mem, pipe.out, out)


def _read_operand(mem, o) -> np.ndarray:
    """An operand's values as f32 (a 2-D block with a row pitch is gathered row by row)."""
    if o.pitch:
        rows = [mem.read_array(o.addr + r * o.pitch, (o.shape[1],), o.dtype) for r in range(o.shape[0])]
        x = np.stack(rows)
    else:
        x = mem.read_array(o.addr, o.shape, o.dtype)
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _write_operand(mem, o, x: np.ndarray) -> None:
    """Write ``x`` into an operand's memory in its dtype (row by row for a block with a row pitch)."""
    x = np.ascontiguousarray(x, dtype=o.dtype)
    if not o.pitch:
        mem.write(o.addr, x)
        return
    for r in range(o.shape[0]):
        mem.write(o.addr + r * o.pitch, x[r])
