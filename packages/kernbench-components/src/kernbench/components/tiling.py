"""Tile plans for composite commands: pure data, no simulator state.

A composite GEMM ``C[M, N] = A[M, K] @ B[K, N]`` is cut into tiles of shape
``(tm, tn, tk)``. The loop order is output row block ``i``, then output column
block ``j``, then reduction block ``kk`` (innermost), so every output tile
accumulates over all its K steps before the next output tile starts.

Each tile is a fixed sequence of :class:`TileStep` s that the PE scheduler
turns into tokens travelling DMA → FETCH_STORE → GEMM → FETCH_STORE → DMA.
Where the operands live decides which steps a tile carries (the *staging
variant*, named ``<A staging>_<B staging>``):

``ref_ref``
    A and B stay in HBM. Every tile DMA-reads its A block (``m × k``) and its
    B block (``k × n``) into TCM, then fetches both into the GEMM engine.
``load_ref``
    A is DMA-read into TCM once before the tile loop (one step in
    :attr:`TilePlan.preload`); tiles DMA-read only their B block.
``ref_load``
    B is already in TCM; tiles DMA-read only their A block.
``load_load``
    A and B are both loaded up front; tiles only fetch from TCM.

In every variant each tile fetches both operand blocks and runs one GEMM;
the last K step of an output tile then stores the ``m × n`` result block to
TCM and, when the output lives in HBM, DMA-writes it back.

Units: extents (``m``, ``n``, ``k``, ``rows``, ``cols``, ``depth``) are in
elements, ``nbytes`` in bytes, ``itemsize_*`` in bytes per element. Edge tiles
carry their real (partial) extents and byte counts; the GEMM engine still pays
for a full ``tm × tn × tk`` tile, which :attr:`TilePlan.tile_macs` records.

Everything here is a pure function of hashable arguments and memoised: the
same request returns the very same (immutable) plan object.
"""

from __future__ import annotations

import enum
import math
import numbers
import operator
from dataclasses import dataclass
from functools import lru_cache

from kernbench.topology.errors import KernbenchError

__all__ = [
    "DEFAULT_TILE",
    "VARIANTS",
    "PlanError",
    "Stage",
    "Tile",
    "TilePlan",
    "TileStep",
    "elementwise_plan",
    "gemm_plan",
    "gemm_tile_ns",
]

#: Default GEMM tile ``(tm, tn, tk)`` in elements.
DEFAULT_TILE: tuple[int, int, int] = (32, 32, 64)

#: Operand staging variants understood by :func:`gemm_plan`.
VARIANTS: tuple[str, ...] = ("ref_ref", "load_ref", "ref_load", "load_load")


class PlanError(KernbenchError):
    """A tile plan was requested for an invalid shape, tile, item size or staging variant."""


class Stage(enum.Enum):
    """The pipeline stage a tile step occupies."""

    DMA_READ = "dma_read"    # HBM -> TCM
    FETCH = "fetch"          # TCM -> compute engine
    GEMM = "gemm"            # matrix multiply-accumulate
    MATH = "math"            # element-wise / reduction engine
    STORE = "store"          # compute engine -> TCM
    DMA_WRITE = "dma_write"  # TCM -> HBM


@dataclass(frozen=True, slots=True)
class TileStep:
    """One stage of one tile.

    ``operand`` is ``"a"``, ``"b"`` or ``"c"`` for data movement and ``""`` for
    GEMM/MATH. For a data step, ``rows × cols`` is the block moved (elements)
    and ``nbytes`` its size; ``depth`` is 0. For a GEMM step, ``rows``,
    ``cols`` and ``depth`` are the real ``m``, ``n``, ``k`` of the tile and
    ``nbytes`` is 0 (compute moves no data of its own).
    """

    stage: Stage
    operand: str
    nbytes: int
    rows: int
    cols: int
    depth: int = 0

    @property
    def elements(self) -> int:
        """Elements of the block a data step moves (``rows × cols``)."""
        return self.rows * self.cols

    @property
    def macs(self) -> int:
        """Real multiply-accumulates of a GEMM step (0 for any other stage)."""
        return self.rows * self.cols * self.depth if self.stage is Stage.GEMM else 0


@dataclass(frozen=True, slots=True)
class Tile:
    """One K step of one output tile: output block ``(i, j)``, reduction block ``kk``.

    ``m``, ``n``, ``k`` are the real extents in elements (smaller than the tile
    shape on the M, N or K edge). ``first_k``/``last_k`` mark the first and the
    last reduction step of the output tile; the last carries the STORE (and
    DMA_WRITE) of the result block.
    """

    i: int
    j: int
    kk: int
    m: int
    n: int
    k: int
    first_k: bool
    last_k: bool
    steps: tuple[TileStep, ...]

    @property
    def index(self) -> tuple[int, int]:
        """The output tile index ``(i, j)``."""
        return (self.i, self.j)

    @property
    def macs(self) -> int:
        """Real multiply-accumulates of this tile (``m × n × k``)."""
        return self.m * self.n * self.k


@dataclass(frozen=True)
class TilePlan:
    """The ordered tiles of one composite GEMM and its totals.

    ``preload`` holds the operand loads done once before the first tile.
    ``macs`` counts the real multiply-accumulates (``M × N × K``);
    ``tile_macs`` is what the engine pays, ``n_tiles × tm × tn × tk``.
    """

    variant: str
    shape: tuple[int, int, int]
    tile: tuple[int, int, int]
    grid: tuple[int, int, int]
    itemsize_in: int
    itemsize_out: int
    out_in_hbm: bool
    preload: tuple[TileStep, ...]
    tiles: tuple[Tile, ...]
    n_tiles: int
    macs: int
    tile_macs: int

    @property
    def n_output_tiles(self) -> int:
        """Output blocks of C (``ceil(M/tm) × ceil(N/tn)``)."""
        return self.grid[0] * self.grid[1]

    @property
    def fill_ratio(self) -> float:
        """Useful fraction of the GEMM work paid for (``macs / tile_macs``, in (0, 1])."""
        return self.macs / self.tile_macs

    def steps(self, stage: Stage | None = None, *, include_preload: bool = True) -> tuple[TileStep, ...]:
        """All steps in execution order (preload first), optionally only those of ``stage``."""
        out = [*self.preload] if include_preload else []
        for t in self.tiles:
            out.extend(t.steps)
        if stage is not None:
            out = [s for s in out if s.stage is stage]
        return tuple(out)

    def bytes_by_stage(self, *, include_preload: bool = True) -> dict[Stage, int]:
        """Total bytes per stage (every :class:`Stage` present, 0 when unused)."""
        totals = dict.fromkeys(Stage, 0)
        for s in self.steps(include_preload=include_preload):
            totals[s.stage] += s.nbytes
        return totals


def _positive_int(name: str, value: object, where: str = "gemm plan") -> int:
    """``value`` as a plain ``int`` (numpy integers accepted), or :class:`PlanError`."""
    if type(value) is int and value > 0:  # the common case, without the general test's calls
        return value
    try:
        out = -1 if isinstance(value, bool) else operator.index(value)
    except TypeError:
        out = -1
    if out <= 0:
        raise PlanError(f"{where}: {name} must be a positive integer, got {value!r}")
    return out


def _extents(total: int, step: int) -> tuple[int, ...]:
    """Real sizes of the blocks that cut ``total`` elements into pieces of ``step``."""
    return tuple(min(step, total - start) for start in range(0, total, step))


def gemm_plan(m: int, n: int, k: int, *, tile: tuple[int, int, int] = DEFAULT_TILE, itemsize_in: int = 2,
              itemsize_out: int = 2, variant: str = "ref_ref", out_in_hbm: bool = True,
              itemsize_b: int | None = None) -> TilePlan:
    """Tile plan of ``C[m, n] = A[m, k] @ B[k, n]``; see the module docstring for the variants.

    ``itemsize_in`` is A's item size and B's too unless ``itemsize_b`` is
    given (mixed-precision operands). Raises :class:`PlanError` for a
    non-positive or non-integer dimension, tile extent or item size, or an
    unknown ``variant``.
    """
    dims = (_positive_int("M", m), _positive_int("N", n), _positive_int("K", k))
    try:
        tm, tn, tk = tile
    except (TypeError, ValueError):
        raise PlanError(f"gemm plan: tile must be three extents (tm, tn, tk), got {tile!r}") from None
    tile_t = (_positive_int("tile tm", tm), _positive_int("tile tn", tn), _positive_int("tile tk", tk))
    isz_in = _positive_int("itemsize_in", itemsize_in)
    isz_out = _positive_int("itemsize_out", itemsize_out)
    isz_b = isz_in if itemsize_b is None else _positive_int("itemsize_b", itemsize_b)
    if variant not in VARIANTS:
        raise PlanError(f"gemm plan: unknown staging variant {variant!r}; valid variants: {', '.join(VARIANTS)}")
    return _gemm_plan(*dims, tile_t, isz_in, isz_out, variant, bool(out_in_hbm), isz_b)


@lru_cache(maxsize=256)
def _gemm_plan(m: int, n: int, k: int, tile: tuple[int, int, int], isz_in: int, isz_out: int, variant: str,
               out_in_hbm: bool, isz_b: int) -> TilePlan:
    tm, tn, tk = tile
    a_staged, b_staged = (part == "load" for part in variant.split("_"))
    ms, ns, ks = _extents(m, tm), _extents(n, tn), _extents(k, tk)

    preload: list[TileStep] = []
    if a_staged:
        preload.append(TileStep(Stage.DMA_READ, "a", m * k * isz_in, m, k))
    if b_staged:
        preload.append(TileStep(Stage.DMA_READ, "b", k * n * isz_b, k, n))

    # Only a handful of distinct (m, n, k, last) combinations exist (full or edge in each
    # dimension), so step tuples are built once per combination and shared between tiles.
    step_cache: dict[tuple[int, int, int, bool], tuple[TileStep, ...]] = {}

    def steps_for(mi: int, nj: int, kq: int, last: bool) -> tuple[TileStep, ...]:
        key = (mi, nj, kq, last)
        hit = step_cache.get(key)
        if hit is not None:
            return hit
        a_bytes, b_bytes = mi * kq * isz_in, kq * nj * isz_b
        out: list[TileStep] = []
        if not a_staged:
            out.append(TileStep(Stage.DMA_READ, "a", a_bytes, mi, kq))
        if not b_staged:
            out.append(TileStep(Stage.DMA_READ, "b", b_bytes, kq, nj))
        out.append(TileStep(Stage.FETCH, "a", a_bytes, mi, kq))
        out.append(TileStep(Stage.FETCH, "b", b_bytes, kq, nj))
        out.append(TileStep(Stage.GEMM, "", 0, mi, nj, kq))
        if last:
            c_bytes = mi * nj * isz_out
            out.append(TileStep(Stage.STORE, "c", c_bytes, mi, nj))
            if out_in_hbm:
                out.append(TileStep(Stage.DMA_WRITE, "c", c_bytes, mi, nj))
        steps = tuple(out)
        step_cache[key] = steps
        return steps

    last_kk = len(ks) - 1
    tiles = tuple(
        Tile(i, j, kk, mi, nj, kq, kk == 0, kk == last_kk, steps_for(mi, nj, kq, kk == last_kk))
        for i, mi in enumerate(ms)
        for j, nj in enumerate(ns)
        for kk, kq in enumerate(ks)
    )
    n_tiles = len(tiles)
    return TilePlan(
        variant=variant, shape=(m, n, k), tile=tile, grid=(len(ms), len(ns), len(ks)),
        itemsize_in=isz_in, itemsize_out=isz_out, out_in_hbm=out_in_hbm, preload=tuple(preload),
        tiles=tiles, n_tiles=n_tiles, macs=m * n * k, tile_macs=n_tiles * tm * tn * tk,
    )


def elementwise_plan(m: int, n: int, *, tile: tuple[int, int] = DEFAULT_TILE[:2], itemsize_in: int = 2,
                     itemsize_out: int = 2, a_in_hbm: bool = True, out_in_hbm: bool = True) -> TilePlan:
    """Tile plan of a math-headed composite ``C[m, n] = f(A[m, n])`` over ``(tm, tn)`` blocks.

    Each tile DMA-reads its A block when A is in HBM (variant ``ref``; ``load``
    when it is already in TCM), FETCHes it, runs one MATH step over its
    elements, STOREs the result and DMA-writes it when the output is in HBM.
    Tiles have ``k = 0`` and are each their own last step.
    """
    dims = (_positive_int("M", m, "elementwise plan"), _positive_int("N", n, "elementwise plan"))
    try:
        tm, tn = tile
    except (TypeError, ValueError):
        raise PlanError(f"elementwise plan: tile must be two extents (tm, tn), got {tile!r}") from None
    tile_t = (_positive_int("tile tm", tm, "elementwise plan"), _positive_int("tile tn", tn, "elementwise plan"))
    isz_in = _positive_int("itemsize_in", itemsize_in, "elementwise plan")
    isz_out = _positive_int("itemsize_out", itemsize_out, "elementwise plan")
    return _elementwise_plan(*dims, tile_t, isz_in, isz_out, bool(a_in_hbm), bool(out_in_hbm))


@lru_cache(maxsize=256)
def _elementwise_plan(m: int, n: int, tile: tuple[int, int], isz_in: int, isz_out: int, a_in_hbm: bool,
                      out_in_hbm: bool) -> TilePlan:
    tm, tn = tile
    ms, ns = _extents(m, tm), _extents(n, tn)
    tiles = []
    for i, mi in enumerate(ms):
        for j, nj in enumerate(ns):
            steps = []
            if a_in_hbm:
                steps.append(TileStep(Stage.DMA_READ, "a", mi * nj * isz_in, mi, nj))
            steps.append(TileStep(Stage.FETCH, "a", mi * nj * isz_in, mi, nj))
            steps.append(TileStep(Stage.MATH, "", 0, mi, nj))
            steps.append(TileStep(Stage.STORE, "c", mi * nj * isz_out, mi, nj))
            if out_in_hbm:
                steps.append(TileStep(Stage.DMA_WRITE, "c", mi * nj * isz_out, mi, nj))
            tiles.append(Tile(i, j, 0, mi, nj, 0, True, True, tuple(steps)))
    return TilePlan(
        variant="ref" if a_in_hbm else "load", shape=(m, n, 0), tile=(tm, tn, 1), grid=(len(ms), len(ns), 1),
        itemsize_in=isz_in, itemsize_out=isz_out, out_in_hbm=out_in_hbm, preload=(), tiles=tuple(tiles),
        n_tiles=len(tiles), macs=0, tile_macs=0,
    )


@lru_cache(maxsize=256)
def _tile_ns(peak_tflops: float, tm: int, tn: int, tk: int) -> float:
    # 1 TFLOP/s = 1e12 FLOP / 1e9 ns = 1e3 FLOP/ns; one MAC is two FLOPs.
    return 2.0 * tm * tn * tk / (peak_tflops * 1e3)


def gemm_tile_ns(spec_peak_tflops: float, tile: tuple[int, int, int] = DEFAULT_TILE) -> float:
    """Service time (ns) of one full ``tm × tn × tk`` tile at ``spec_peak_tflops`` TFLOP/s.

    ``2 · tm · tn · tk / (peak · 1e3)``; 8 TFLOP/s and a 32×32×64 tile give 16.384 ns.
    Raises :class:`PlanError` for a non-positive peak or tile extent.
    """
    real = isinstance(spec_peak_tflops, numbers.Real) and not isinstance(spec_peak_tflops, bool)
    peak = float(spec_peak_tflops) if real else -1.0
    if not (peak > 0 and math.isfinite(peak)):
        raise PlanError(f"gemm tile time: peak TFLOP/s must be a positive finite number, got {spec_peak_tflops!r}")
    try:
        tm, tn, tk = tile
    except (TypeError, ValueError):
        raise PlanError(f"gemm tile time: tile must be three extents (tm, tn, tk), got {tile!r}") from None
    dims = (_positive_int(name, v, "gemm tile time") for name, v in (("tile tm", tm), ("tile tn", tn), ("tile tk", tk)))
    return _tile_ns(peak, *dims)
