"""An independent analytic model of one composite GEMM on one PE, from the topology spec's published numbers.

The model reads a :class:`~kernbench.topology.TopologySpec` (the validated
YAML file) and nothing else: no compiled route, no simulator, component or
runtime code (``packages/kernbench-studies/tests/test_gemm_model.py`` walks
this module's imports and fails if they reach ``kernbench.components``,
``kernbench.sim``, ``kernbench.runtime`` or ``kernbench.tl``). It is written
from the hardware description and the design of the composite pipeline
(ADR 0008), as a hardware architect would estimate it on paper, so where it
disagrees with a measurement the two really differ.

Units: time ns, size bytes, bandwidth GB/s (= bytes per ns), rate FLOP/ns.

**Constants** (spec field: symbol, meaning):

* ``pe.gemm.peak_tflops`` × 10³: ``Π``, FLOP/ns of the GEMM engine;
* ``pe.gemm.tile_m, tile_n, tile_k``: ``tm, tn, tk``, the tile (elements);
* ``pe.tcm.read_bw_gbs, write_bw_gbs``: ``βr, βw``, the TCM's read and write ports;
* ``cube.hbm.pseudo_channels`` / PEs per cube: ``C``, pseudo-channels of one PE's HBM slice;
* ``cube.hbm.bw_gbs / cube.hbm.pseudo_channels``: ``b``, one pseudo-channel's bandwidth;
* ``cube.hbm.burst_bytes``: ``g``, the interleave granule (byte ``x`` of the slice is on channel
  ``(x // g) mod C``);
* ``cube.noc.link_bw_gbs``: ``βL``, a NoC link;
* ``pe.dma.overhead_ns``, ``cube.noc.router_overhead_ns``, ``cube.hbm.ctrl_overhead_ns``: ``oD, oR, oH``, per DMA
  command, per router crossing, per HBM request;
* ``fabric.control_bytes, flit_bytes``: ``κ, φ``, a command and a flit;
* ``pe.dma.read_channels, write_channels``: ``cr, cw``, DMA commands in flight per direction.

A PE's slice controller hangs off the router the PE is attached to, so a PE-to-slice transfer crosses
``h = 2`` NoC links and one router (a layout assumption, not read from the compiled graph).

**Per-tile stage times** for a tile of ``m×k`` A and ``k×n`` B elements (edge tiles are smaller), item sizes
``s`` (inputs) and ``s_o`` (output):

* ``F = (m·k + k·n)·s / βr`` (FETCH, TCM → register file);
* ``G = 2·tm·tn·tk / Π`` (GEMM: a partly used tile costs a full one);
* ``S = m·n·s_o / βw`` (STORE, on an output tile's last K step only);
* a DMA of a block of ``B`` bytes that touches ``c`` of the slice's channels (from its row addresses and the
  interleave rule above, with each matrix starting on a ``C·g`` boundary; the bytes spread evenly over those
  channels) is a two-stage pipeline, the channel bank (``c·b``, each channel serving one burst of up to ``g``
  bytes at a time) and the link (``β = min(βL, TCM port)``). It takes the slower stage's time plus one unit
  through the other: a *wave* ``u = min(B, c·p)`` (one piece on each channel) over the link, or one piece
  ``u₁ = min(B, p)`` on its channel, where a piece is what one row puts in one burst, ``p = min(g, row
  bytes)`` (``p = g`` for a contiguous block):

  ``D(B, c, p) = max(B/(c·b) + u/β, B/β + u₁/b)``

  (a read's channels all start when the command arrives and its last wave then crosses the link; a write's
  channels start one after another as their first bursts arrive). Around it a zero-load latency:

  - read  ``R = oD + 2·oR + oH + h·κ/βL + (h − 1)·φ/βL + φ/βw + D`` with ``β = min(βL, βw)``
    (the command out over ``h`` links, the access, the last flit over the other link and into the TCM);
  - write ``W = oD + oR + oH + φ/βr + (h − 1)·φ/βL + D`` with ``β = min(βL, βr)``
    (the first flit out of the TCM and over the other link; a write is complete when the slice holds its
    last byte, with no acknowledgement).

  A tile's reads (the A block in ``ref_ref``, the B block unless ``load_load``) go to ``cr`` read channels:
  the read stage serves all reads of all tiles in ``ΣR / cr``, and the first tile's reads take
  ``ΣR₁ / min(cr, reads per tile)``; the write stage serves the output blocks (one per output tile, on its last
  K step) in ``ΣW / cw``.
  Addresses reach the DMA already translated (a composite translates its operands once, at issue), and the
  scheduler-to-DMA command is a sideband with sub-ns propagation; neither is charged.

**The pipeline.** Tiles pass the stages in order DMA_READ → FETCH → GEMM → STORE → DMA_WRITE, each stage a
serial server. A stage ``s`` cannot finish before the first tile has reached it, it has served every tile, and
the last tile has left the stages after it, so

``T = max_s ( Σ_{p<s} x_p(first tile) + Σ_tiles x_s + Σ_{q>s} x_q(last tile) )``,

the textbook fill + bottleneck + drain bound of a pipeline of serial servers, exact when one stage dominates
(``x_s`` is a tile's time on stage ``s``, zero for STORE and DMA_WRITE before its output tile's last K step).
The maximising stage is the *bottleneck* (a tie goes to the stage with the most work). Left out on purpose:
reads and writes sharing the slice's channels and links, and the two-deep staging buffers that bound how far
reads run ahead.

The *compute-bound ceiling* ``F₁ + n·G + S_n`` (first fetch, every GEMM tile, last store; DMA ignored) is
what any staging could at best reach; ``macs / (tiles · tm·tn·tk)`` (the fill ratio) caps efficiency
whatever the staging.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from kernbench.topology import TopologySpec

VARIANTS: tuple[str, ...] = ("ref_ref", "load_ref", "load_load")
STAGES: tuple[str, ...] = ("DMA_READ", "FETCH", "GEMM", "STORE", "DMA_WRITE")
#: NoC links between a PE and its own HBM slice (PE -> its corner router -> the slice controller).
HOPS = 2


@dataclass(frozen=True)
class Constants:
    """The spec's numbers the model uses (symbols and units in the module docstring)."""

    peak_flop_per_ns: float
    tile: tuple[int, int, int]  # (tm, tn, tk)
    tcm_read_gbs: float
    tcm_write_gbs: float
    channels: int
    channel_gbs: float
    burst_bytes: int
    link_gbs: float
    dma_overhead_ns: float
    router_overhead_ns: float
    hbm_overhead_ns: float
    control_bytes: int
    flit_bytes: int
    read_channels: int
    write_channels: int

    @classmethod
    def from_spec(cls, spec: TopologySpec) -> Constants:
        """Read the constants from a topology spec."""
        pe, hbm = spec.pe, spec.cube.hbm
        pes_per_cube = len(spec.cube.pe_layout.corners) * spec.cube.pe_layout.pe_per_corner
        return cls(
            peak_flop_per_ns=pe.gemm.peak_tflops * 1e3,
            tile=(pe.gemm.tile_m, pe.gemm.tile_n, pe.gemm.tile_k),
            tcm_read_gbs=pe.tcm.read_bw_gbs, tcm_write_gbs=pe.tcm.write_bw_gbs,
            channels=hbm.pseudo_channels // pes_per_cube, channel_gbs=hbm.bw_gbs / hbm.pseudo_channels,
            burst_bytes=hbm.burst_bytes, link_gbs=spec.cube.noc.link_bw_gbs,
            dma_overhead_ns=pe.dma.overhead_ns, router_overhead_ns=spec.cube.noc.router_overhead_ns,
            hbm_overhead_ns=hbm.ctrl_overhead_ns, control_bytes=spec.fabric.control_bytes,
            flit_bytes=spec.fabric.flit_bytes, read_channels=pe.dma.read_channels,
            write_channels=pe.dma.write_channels)

    @property
    def gemm_tile_ns(self) -> float:
        """``G = 2·tm·tn·tk / Π``, ns."""
        tm, tn, tk = self.tile
        return 2 * tm * tn * tk / self.peak_flop_per_ns

    @property
    def read_latency_ns(self) -> float:
        """Zero-load part of a DMA read: ``oD + 2·oR + oH + h·κ/βL + (h − 1)·φ/βL + φ/βw``, ns."""
        return (self.dma_overhead_ns + 2 * self.router_overhead_ns + self.hbm_overhead_ns
                + (HOPS * self.control_bytes + (HOPS - 1) * self.flit_bytes) / self.link_gbs
                + self.flit_bytes / self.tcm_write_gbs)

    @property
    def write_latency_ns(self) -> float:
        """Zero-load part of a DMA write: ``oD + oR + oH + φ/βr + (h − 1)·φ/βL``, ns."""
        return (self.dma_overhead_ns + self.router_overhead_ns + self.hbm_overhead_ns
                + self.flit_bytes / self.tcm_read_gbs + (HOPS - 1) * self.flit_bytes / self.link_gbs)

    def data_ns(self, nbytes: int, touched: int, piece: int, port_gbs: float) -> float:
        """``D(B, c, p) = max(B/(c·b) + u/β, B/β + u₁/b)``, ``u = min(B, c·p)``, ``u₁ = min(B, p)``,
        ``β = min(βL, port)``: the data part of a DMA of ``nbytes`` over ``touched`` channels in pieces of at most
        ``piece`` bytes, ns."""
        beta = min(self.link_gbs, port_gbs)
        wave, one = min(nbytes, touched * piece), min(nbytes, piece)
        return max(nbytes / (touched * self.channel_gbs) + wave / beta, nbytes / beta + one / self.channel_gbs)


def channels_touched(rows: int, row_bytes: int, pitch: int, offset: int, channels: int, burst: int) -> int:
    """Distinct pseudo-channels holding a block of ``rows`` rows of ``row_bytes`` bytes, ``pitch`` bytes apart,
    the first starting ``offset`` bytes into the slice (burst ``x // burst`` sits on channel ``that mod
    channels``). The row pattern repeats after ``channels·burst / gcd(pitch, channels·burst)`` rows."""
    period = channels * burst
    distinct: set[int] = set()
    repeat = period // math.gcd(pitch, period) if pitch else 1
    for r in range(min(rows, repeat)):
        start = offset + r * pitch
        first, last = start // burst, (start + row_bytes - 1) // burst
        distinct.update(b % channels for b in range(first, min(last, first + channels - 1) + 1))
        if len(distinct) == channels:
            break
    return len(distinct)


@lru_cache(maxsize=4096)
def _block_ns(c: Constants, write: bool, rows: int, cols: int, width: int, row0: int, col0: int, item: int) -> float:
    """One DMA of the block ``[row0:row0+rows, col0:col0+cols]`` of a row-major matrix ``width`` elements wide
    that starts on a ``C·g`` boundary of the slice."""
    pitch = width * item
    offset = (row0 * pitch + col0 * item) % (c.channels * c.burst_bytes)
    nbytes = rows * cols * item
    if cols == width:  # full-width rows: one contiguous run
        touched = channels_touched(1, nbytes, 0, offset, c.channels, c.burst_bytes)
        piece = c.burst_bytes
    else:
        touched = channels_touched(rows, cols * item, pitch, offset, c.channels, c.burst_bytes)
        piece = min(c.burst_bytes, cols * item)
    if write:
        return c.write_latency_ns + c.data_ns(nbytes, touched, piece, c.tcm_read_gbs)
    return c.read_latency_ns + c.data_ns(nbytes, touched, piece, c.tcm_write_gbs)


@dataclass(frozen=True)
class StageTimes:
    """Per-tile means of each stage (ns; STORE and DMA_WRITE averaged over all tiles), the bottleneck stage, the
    pipeline's total (ns) and the compute-bound ceiling (ns)."""

    read_ns: float
    fetch_ns: float
    gemm_ns: float
    store_ns: float
    write_ns: float
    bottleneck: str
    total_ns: float
    compute_bound_ns: float


def _extents(size: int, tile: int) -> list[int]:
    return [min(tile, size - i * tile) for i in range(math.ceil(size / tile))]


def predict(spec: TopologySpec, m: int, k: int, n: int, variant: str, itemsize: int = 2,
            itemsize_out: int = 2) -> StageTimes:
    """The model's stage times and composite time for ``C[m, n] = A[m, k] @ B[k, n]`` with staging ``variant``
    (``ref_ref``, ``load_ref`` or ``load_load``) on one PE of ``spec``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")
    c = Constants.from_spec(spec)
    tm, tn, tk = c.tile
    g = c.gemm_tile_ns
    rows_i, cols_j, deps_k = _extents(m, tm), _extents(n, tn), _extents(k, tk)
    per_tile: list[tuple[float, float, float, float, float]] = []  # (R, F, G, S, W) of every tile, in order
    read_work_ns = 0.0  # every read of every tile, before sharing the read channels
    for i, mi in enumerate(rows_i):
        for j, nj in enumerate(cols_j):
            for kk, kd in enumerate(deps_k):
                reads = []
                if variant == "ref_ref":
                    reads.append(_block_ns(c, False, mi, kd, k, i * tm, kk * tk, itemsize))
                if variant != "load_load":
                    reads.append(_block_ns(c, False, kd, nj, n, kk * tk, j * tn, itemsize))
                read_work_ns += sum(reads)
                r = sum(reads) / min(c.read_channels, len(reads)) if reads else 0.0
                f = (mi * kd + kd * nj) * itemsize / c.tcm_read_gbs
                last = kk == len(deps_k) - 1
                s = mi * nj * itemsize_out / c.tcm_write_gbs if last else 0.0
                w = _block_ns(c, True, mi, nj, n, i * tm, j * tn, itemsize_out) if last else 0.0
                per_tile.append((r, f, g, s, w))
    tiles = len(per_tile)
    totals = [sum(t[s] for t in per_tile) for s in range(len(STAGES))]
    totals[0] = read_work_ns / c.read_channels
    totals[4] /= c.write_channels
    first, final = per_tile[0], per_tile[-1]
    bound = [sum(first[:s]) + totals[s] + sum(final[s + 1:]) for s in range(len(STAGES))]
    # a tie (to rounding: the bounds add the same terms in different orders) goes to the stage with the most work
    b = max(range(len(STAGES)), key=lambda s: (round(bound[s], 6), totals[s]))
    means = [x / tiles for x in totals]
    return StageTimes(means[0], means[1], g, means[3], means[4], STAGES[b], bound[b], first[1] + tiles * g + final[3])


def tile_shape(spec: TopologySpec) -> tuple[int, int, int]:
    """The GEMM tile ``(tm, tn, tk)`` of the spec, elements."""
    gemm = spec.pe.gemm
    return gemm.tile_m, gemm.tile_n, gemm.tile_k


def fill_ratio(spec: TopologySpec, m: int, k: int, n: int) -> float:
    """Useful MACs over paid MACs: ``m·k·n / (tiles · tm·tn·tk)``."""
    tm, tn, tk = tile_shape(spec)
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * math.ceil(k / tk)
    return m * k * n / (tiles * tm * tn * tk)


def peak_macs_per_ns(spec: TopologySpec) -> float:
    """The GEMM engine's peak rate, MACs per ns (two FLOPs per MAC)."""
    return spec.pe.gemm.peak_tflops * 1e3 / 2
