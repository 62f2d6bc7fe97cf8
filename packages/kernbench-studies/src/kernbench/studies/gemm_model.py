"""The analytic pipeline model of a composite GEMM on one PE, from the topology's constants alone.

A composite streams tiles through five stages: DMA_READ (HBM -> TCM, on one
read channel, one command at a time), FETCH (TCM -> GEMM), GEMM, STORE (GEMM
-> TCM, on the last K step of an output tile) and DMA_WRITE (TCM -> HBM, one
write channel). Each stage's service time per tile is a closed form of the
spec (all times in ns, sizes in bytes):

``F = (m·k + k·n)·b / tcm.read_bw``, ``G = 2·tm·tn·tk / (peak_tflops·1e3)``,
``S = m·n·b_out / tcm.write_bw``, and for a block DMA between the PE and its
HBM slice ``t = α + D``: ``α`` is the fixed cost of the route (node
overheads, propagation, the command or head flit serialised on every link)
and ``D`` the data term, the larger of the hottest pseudo-channel's bytes
over the channel bandwidth and the stream over the narrowest link. A block
``rows × row_bytes`` with a row pitch lands on the channels its addresses
map to (``burst = addr // burst_bytes``, ``channel = burst mod channels``), so
a narrow block of a wide matrix can alias onto few channels.

The pipeline then takes ``T = d + R₁ + F₁ + G + (n − 1)·P + S_n + W_n``:
the first tile passes every stage, the bottleneck stage ``P = max(R̄, F̄, G,
S̄, W̄)`` (per-tile means; S and W spread over all tiles) paces the other
``n − 1``, and the last output block drains. ``d`` is the scheduler-to-DMA
hop before the first read. With both operands in TCM and GEMM the slowest
stage this is ADR 0008's ``F_first + n·G + S_last`` (+ the write-back).

The *compute-bound* figure ``F₁ + n·G + S_n`` ignores DMA and is the
ceiling the staging can at best reach; ``macs / tile_macs`` (the fill
ratio) caps efficiency whatever the staging.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernbench.studies.routes import read_route, write_route
from kernbench.topology import PathRouter, TopologyGraph
from kernbench.topology import naming as nm

VARIANTS: tuple[str, ...] = ("ref_ref", "load_ref", "load_load")


@dataclass(frozen=True)
class Block:
    """A 2-D block of a row-major matrix in HBM: ``rows`` rows of ``row_bytes`` starting ``pitch`` bytes apart at
    slice offset ``base`` (bytes)."""

    base: int
    rows: int
    row_bytes: int
    pitch: int

    @property
    def nbytes(self) -> int:
        """Payload bytes."""
        return self.rows * self.row_bytes

    def pieces(self, burst: int):
        """``(payload offset, channel burst index, bytes)`` of every burst-aligned piece, in payload order."""
        off = 0
        for r in range(self.rows):
            x = self.base + r * self.pitch
            end = x + self.row_bytes
            while x < end:
                y = min((x // burst + 1) * burst, end)
                yield off, x // burst, y - x
                off += y - x
                x = y


def block_of(base: int, row0: int, col0: int, rows: int, cols: int, shape: tuple[int, int], itemsize: int) -> Block:
    """The block ``[row0:row0+rows, col0:col0+cols]`` of a row-major ``shape`` matrix at ``base``; a block as wide
    as the matrix is one contiguous row."""
    pitch = shape[1] * itemsize
    start = base + row0 * pitch + col0 * itemsize
    if cols == shape[1]:
        return Block(start, 1, rows * cols * itemsize, 0)
    return Block(start, rows, cols * itemsize, pitch)


@dataclass(frozen=True)
class StageTimes:
    """Per-tile means of each stage (ns) and the pipeline's totals (ns)."""

    read_ns: float
    fetch_ns: float
    gemm_ns: float
    store_ns: float
    write_ns: float
    bottleneck: str
    total_ns: float
    compute_bound_ns: float


class PeHbmModel:
    """Closed-form DMA times between one PE's TCM and its own HBM slice."""

    def __init__(self, graph: TopologyGraph, sip: int = 0, cube: int = 0, pe: int = 0) -> None:
        spec = graph.spec
        self.flit = spec.fabric.flit_bytes
        self.ctrl = spec.fabric.control_bytes
        self.burst = spec.cube.hbm.burst_bytes
        self.channels = spec.channels_per_pe
        self.ch_bw = spec.cube.hbm.bw_gbs / spec.cube.hbm.pseudo_channels  # GB/s = bytes/ns
        self.graph = graph
        dma, self.tcm = nm.pe_block(sip, cube, pe, "pe_dma"), nm.pe_block(sip, cube, pe, "pe_tcm")
        self.path = PathRouter(graph).pe_dma_path(dma, nm.hbm_ctrl(sip, cube, pe))

    def _channel_bytes(self, block: Block, limit: int | None = None) -> list[int]:
        """Bytes each pseudo-channel serves for ``block`` (only pieces starting below payload offset ``limit``)."""
        per = [0] * self.channels
        for off, b, n in block.pieces(self.burst):
            if limit is not None and off >= limit:
                break
            per[b % self.channels] += n
        return per

    def read_ns(self, block: Block) -> float:
        """A DMA read of ``block`` into the TCM: the command leg, the access overhead and the data leg of the head
        flit, plus the drain: the larger of the hottest channel's bytes at channel bandwidth and the head flit's
        channels followed by the rest of the payload streamed over the narrowest link."""
        n = block.nbytes
        head = min(self.flit, n)
        route = read_route(self.graph, self.path, self.tcm, self.ctrl, head)
        first = max(self._channel_bytes(block, head)) / self.ch_bw
        return route.alpha_ns + max(max(self._channel_bytes(block)) / self.ch_bw,
                                    first + (n - head) / route.link_gbs)

    def write_ns(self, block: Block) -> float:
        """A DMA write of ``block`` from the TCM: the head flit over the route and every node's overhead, plus the
        drain: a burst piece arrives with its flit (``Δ`` per flit on the narrowest link) and each channel serves
        its pieces in order, so channel ``c`` finishes at ``max_p(arrive_p + bytes_c(p…)/bw_channel)`` over its
        pieces ``p`` (Lindley's recursion in closed form)."""
        route = write_route(self.graph, (self.tcm, *self.path), min(self.flit, block.nbytes))
        delta = self.flit / route.link_gbs
        by_channel: dict[int, list[tuple[float, int]]] = {}
        for off, b, nb in block.pieces(self.burst):
            by_channel.setdefault(b % self.channels, []).append(((off + nb - 1) // self.flit * delta, nb))
        finish = 0.0
        for pieces in by_channel.values():
            left = sum(nb for _, nb in pieces)
            for arrive, nb in pieces:
                finish = max(finish, arrive + left / self.ch_bw)
                left -= nb
        return route.alpha_ns + finish


@dataclass(frozen=True)
class GemmCase:
    """One composite GEMM: ``C[m, n] = A[m, k] @ B[k, n]`` with the staging ``variant`` and the HBM slice offsets
    (bytes) of A, B and C. Item sizes in bytes."""

    m: int
    k: int
    n: int
    variant: str
    base_a: int
    base_b: int
    base_c: int
    itemsize: int = 2
    itemsize_out: int = 2


def tile_shape(graph: TopologyGraph) -> tuple[int, int, int]:
    """The GEMM tile ``(tm, tn, tk)`` of the topology, elements."""
    g = graph.spec.pe.gemm
    return g.tile_m, g.tile_n, g.tile_k


def fill_ratio(graph: TopologyGraph, m: int, k: int, n: int) -> float:
    """Useful MACs over paid MACs: ``m·k·n / (tiles · tm·tn·tk)``."""
    tm, tn, tk = tile_shape(graph)
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * math.ceil(k / tk)
    return m * k * n / (tiles * tm * tn * tk)


def peak_macs_per_ns(graph: TopologyGraph) -> float:
    """The GEMM engine's peak rate, MACs per ns (two FLOPs per MAC)."""
    return graph.spec.pe.gemm.peak_tflops * 1e3 / 2


def predict(graph: TopologyGraph, case: GemmCase, hbm: PeHbmModel | None = None) -> StageTimes:
    """The pipeline model's stage times and composite time for ``case`` on PE 0 of cube 0 of SIP 0."""
    spec = graph.spec
    tm, tn, tk = tile_shape(graph)
    hbm = hbm or PeHbmModel(graph)
    b, bo = case.itemsize, case.itemsize_out
    rd, wr = spec.pe.tcm.read_bw_gbs, spec.pe.tcm.write_bw_gbs
    g = 2 * tm * tn * tk / (spec.pe.gemm.peak_tflops * 1e3)
    gi, gj, gk = math.ceil(case.m / tm), math.ceil(case.n / tn), math.ceil(case.k / tk)
    reads, fetches, stores, writes = [], [], [], []
    for i in range(gi):
        for j in range(gj):
            for kk in range(gk):
                m = min(tm, case.m - i * tm)
                n = min(tn, case.n - j * tn)
                k = min(tk, case.k - kk * tk)
                r = 0.0
                if case.variant == "ref_ref":
                    r += hbm.read_ns(block_of(case.base_a, i * tm, kk * tk, m, k, (case.m, case.k), b))
                if case.variant in ("ref_ref", "load_ref"):
                    r += hbm.read_ns(block_of(case.base_b, kk * tk, j * tn, k, n, (case.k, case.n), b))
                reads.append(r)
                fetches.append((m * k + k * n) * b / rd)
                if kk == gk - 1:
                    stores.append(m * n * bo / wr)
                    writes.append(hbm.write_ns(block_of(case.base_c, i * tm, j * tn, m, n, (case.m, case.n), bo)))
    tiles = len(reads)
    means = {"DMA_READ": sum(reads) / tiles, "FETCH": sum(fetches) / tiles, "GEMM": g,
             "STORE": sum(stores) / tiles, "DMA_WRITE": sum(writes) / tiles}
    bottleneck = max(means, key=lambda s: means[s])
    d = 0.0
    if case.variant != "load_load":
        sched, dma = nm.pe_block(0, 0, 0, "pe_scheduler"), nm.pe_block(0, 0, 0, "pe_dma")
        d = graph.edge(sched, dma).latency_ns
    total = d + reads[0] + fetches[0] + g + (tiles - 1) * means[bottleneck] + stores[-1] + writes[-1]
    compute_bound = fetches[0] + tiles * g + stores[-1]
    return StageTimes(means["DMA_READ"], means["FETCH"], g, means["STORE"], means["DMA_WRITE"], bottleneck,
                      total, compute_bound)
