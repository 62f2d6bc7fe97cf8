"""Row gathers and scatters of the kernel language: ``tl.load_rows`` and ``tl.store_rows``.

A token permutation (a mixture-of-experts layer's dispatch, the inverse at its
combine) moves runs of rows between an HBM tensor and one TCM tile. Each run
``(start, count)`` is one DMA command, so the cost is what a DMA engine pays
for a descriptor per run: the host decides the runs (kernels never branch on
tensor values) and coalesces consecutive rows into one run beforehand.
:class:`RowOps` is mixed into :class:`~kernbench.tl.context.TLContext`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernbench.components.pe.commands import DmaReadCmd, DmaWriteCmd
from kernbench.tl.tensors import TensorArg, TensorHandle, TLError


def row_runs(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Coalesce row indices, in the order given, into ``(start, count)`` runs of consecutive rows."""
    runs: list[tuple[int, int]] = []
    for r in rows:
        r = int(r)
        if runs and runs[-1][0] + runs[-1][1] == r:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((r, 1))
    return runs


class RowOps:
    """``tl.load_rows`` and ``tl.store_rows``: runs of rows of a 2-D HBM tensor to or from one TCM tile."""

    __slots__ = ()

    def _runs(self, op: str, h: TensorHandle, runs) -> list[tuple[int, int]]:
        """``runs`` checked against the rows of ``h``: a non-empty list of in-range ``(start, count)`` pairs."""
        if h.space != "hbm" or len(h.shape) != 2:
            raise TLError(f"tl.{op}: {h} is not a 2-D HBM tensor; pass tl.ref(arg) or tl.global_ref(arg)")
        out = []
        for run in runs:
            try:
                start, count = (int(v) for v in run)
            except (TypeError, ValueError):
                raise TLError(f"tl.{op}: a run is a (start, count) pair of ints, got {run!r}") from None
            if count < 1 or start < 0 or start + count > h.shape[0]:
                raise TLError(f"tl.{op}: run (start={start}, count={count}) is outside the {h.shape[0]} rows of "
                              f"{h}; use 0 <= start and 1 <= count with start + count <= {h.shape[0]}")
            out.append((start, count))
        if not out:
            raise TLError(f"tl.{op}: no runs given; pass at least one (start, count) pair")
        return out

    def load_rows(self, src: TensorArg | TensorHandle, runs: Sequence[tuple[int, int]]) -> TensorHandle:
        """Gather runs ``(start, count)`` of the rows of a 2-D HBM tensor, in the order given, into one new TCM
        tile of ``sum(count)`` rows: one DMA per run, all in flight at once. Like :meth:`load` the tile is
        filled lazily: its first reader waits for every run."""
        h = self._ref("load_rows", src)
        runs = self._runs("load_rows", h, runs)
        cols = h.shape[1]
        row_bytes = cols * np.dtype(h.dtype).itemsize
        out = self._new((sum(c for _, c in runs), cols), h.dtype)
        offset = out.addr - self._scratch.base
        targets = []
        for start, count in runs:  # every run checked before the first is issued
            block = h[start:start + count, :]
            targets.append((block, *self._dma_target("load_rows", block)))
        events = []
        at = out.addr
        for block, addr, translate_ns in targets:
            self._hazards.sync(addr, addr + block.span, write=False)
            row = row_bytes if block.pitch else 0
            cmd = DmaReadCmd(addr, at, block.nbytes, self._issuer.event(), row_bytes=row, src_pitch=block.pitch,
                             dst_pitch=row, translate_ns=translate_ns)
            self._issuer.start(cmd)
            self._hazards.track_fill(out, cmd.done, offset)
            events.append(cmd.done)
            at += block.nbytes
        out.ready = events[0] if len(events) == 1 else tuple(events)
        return out

    def store_rows(self, dst: TensorArg | TensorHandle, runs: Sequence[tuple[int, int]], src: TensorHandle) -> None:
        """Scatter the rows of a TCM tile, in order, to runs ``(start, count)`` of the rows of a 2-D HBM tensor of
        the same width and dtype (``sum(count)`` must equal the tile's rows): one DMA per run; waits until every
        run is written."""
        d = self._ref("store_rows", dst)
        self._tcm("store_rows", src)
        runs = self._runs("store_rows", d, runs)
        total = sum(c for _, c in runs)
        if len(src.shape) != 2 or src.shape != (total, d.shape[1]) or src.dtype != d.dtype:
            raise TLError(f"tl.store_rows: the runs cover {total} rows of {d.shape[1]} {d.dtype} values but the "
                          f"tile is {src.shape} {src.dtype}; pass a tile of exactly those rows")
        row_bytes = d.shape[1] * np.dtype(d.dtype).itemsize
        targets = []
        for start, count in runs:  # every run checked before the first is issued
            block = d[start:start + count, :]
            targets.append((block, *self._dma_target("store_rows", block)))
        at = src.addr
        events = []
        for block, addr, translate_ns in targets:
            self._hazards.sync(addr, addr + block.span, write=True)
            row = row_bytes if block.pitch else 0
            cmd = DmaWriteCmd(at, addr, block.nbytes, self._issuer.event(), row_bytes=row, src_pitch=row,
                              dst_pitch=block.pitch, translate_ns=translate_ns)
            self._issuer.start(cmd)
            events.append(cmd.done)
            at += block.nbytes
        for ev in events:
            self._hazards.block(ev)
