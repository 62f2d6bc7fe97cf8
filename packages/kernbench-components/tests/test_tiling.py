"""Tile plans of a composite GEMM: counts, real extents, bytes per stage per variant, fill, purity, errors.

Expected numbers are worked out by hand in the docstrings (default tile 32 x 64 x 32, 2-byte items).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.components.tiling import (
    DEFAULT_TILE,
    VARIANTS,
    PlanError,
    Stage,
    TilePlan,
    gemm_plan,
    gemm_tile_ns,
)
from kernbench.topology import KernbenchError


@st.composite
def problems(draw, max_blocks: int = 9):
    """A tile (tm, tn, tk) and a shape of at most ``max_blocks`` tiles along each dimension."""
    tile = tuple(draw(st.integers(1, 64)) for _ in range(3))
    shape = tuple(draw(st.integers(1, t * max_blocks)) for t in tile)
    return (*shape, tile)


def stage_bytes(plan: TilePlan, stage: Stage, *, include_preload: bool = False) -> int:
    return sum(s.nbytes for s in plan.steps(stage, include_preload=include_preload))


# ---------------------------------------------------------------- counts and extents (property tests)


@settings(max_examples=60, deadline=None)
@given(problem=problems(), variant=st.sampled_from(VARIANTS))
def test_tile_count_and_real_extents(problem, variant):
    m, n, k, tile = problem
    tm, tn, tk = tile
    plan = gemm_plan(m, n, k, tile=tile, variant=variant)
    grid = (math.ceil(m / tm), math.ceil(n / tn), math.ceil(k / tk))
    assert plan.grid == grid
    assert plan.n_tiles == len(plan.tiles) == grid[0] * grid[1] * grid[2]
    gemms = plan.steps(Stage.GEMM)
    assert len(gemms) == plan.n_tiles
    assert sum(g.rows * g.cols * g.depth for g in gemms) == m * n * k == plan.macs
    assert plan.tile_macs == plan.n_tiles * tm * tn * tk
    assert 0 < plan.fill_ratio <= 1
    # Every extent is within the tile; per output tile the K extents sum to K.
    assert all(0 < t.m <= tm and 0 < t.n <= tn and 0 < t.k <= tk for t in plan.tiles)
    by_output: dict[tuple[int, int], list] = {}
    for t in plan.tiles:
        by_output.setdefault(t.index, []).append(t)
    assert sorted(by_output) == [(i, j) for i in range(grid[0]) for j in range(grid[1])]
    for ks in by_output.values():
        assert [t.kk for t in ks] == list(range(grid[2]))
        assert sum(t.k for t in ks) == k


@settings(max_examples=60, deadline=None)
@given(problem=problems(), isz=st.sampled_from([1, 2, 4]))
def test_ref_ref_reads_every_block_of_every_tile(problem, isz):
    """ref_ref DMA-reads (m*k + k*n) * itemsize per tile; summed that is (nt*M*K + mt*K*N) * itemsize."""
    m, n, k, tile = problem
    plan = gemm_plan(m, n, k, tile=tile, itemsize_in=isz)
    per_tile = sum((t.m * t.k + t.k * t.n) * isz for t in plan.tiles)
    mt, nt, _ = plan.grid
    assert stage_bytes(plan, Stage.DMA_READ) == per_tile == (nt * m * k + mt * k * n) * isz
    assert stage_bytes(plan, Stage.FETCH) == per_tile
    assert plan.preload == ()


@settings(max_examples=40, deadline=None)
@given(problem=problems())
def test_order_loop_nest_and_output_steps(problem):
    m, n, k, tile = problem
    plan = gemm_plan(m, n, k, tile=tile, variant="load_ref", itemsize_out=4)
    keys = [(t.i, t.j, t.kk) for t in plan.tiles]
    assert keys == sorted(keys)  # i, then j, then kk innermost
    last_kk = plan.grid[2] - 1
    for t in plan.tiles:
        assert t.first_k == (t.kk == 0) and t.last_k == (t.kk == last_kk)
        kinds = [s.stage for s in t.steps]
        expected = [Stage.DMA_READ, Stage.FETCH, Stage.FETCH, Stage.GEMM]
        if t.last_k:
            expected += [Stage.STORE, Stage.DMA_WRITE]
            assert t.steps[-1].nbytes == t.m * t.n * 4
        assert kinds == expected
    stores = plan.steps(Stage.STORE)
    assert len(stores) == plan.n_output_tiles == plan.grid[0] * plan.grid[1]
    assert sum(s.nbytes for s in stores) == m * n * 4


# ---------------------------------------------------------------- hand-computed byte totals


@pytest.mark.parametrize(("variant", "preload", "dma_read"), [
    ("ref_ref", 0, 32768),
    ("load_ref", 8192, 16384),
    ("load_load", 16384, 0),
])
def test_bytes_square_64(variant, preload, dma_read):
    """M=N=K=64 with the default tile tm=32, tn=32, tk=64: grid 2 x 2 x 1 = 4 full tiles, 4 output tiles.

    A block 32*64*2 = 4096 B, B block 64*32*2 = 4096 B, C block 32*32*2 = 2048 B.
    ref_ref reads 4 * (4096 + 4096) = 32768 B; load_ref preloads A (64*64*2 = 8192 B) and
    reads 4 * 4096 = 16384 B of B; load_load preloads A and B (8192 + 8192) and reads nothing.
    Every variant fetches 32768 B and stores / writes back 4 * 2048 = 8192 B.
    """
    plan = gemm_plan(64, 64, 64, variant=variant)
    assert plan.n_tiles == 4 and plan.n_output_tiles == 4
    assert sum(s.nbytes for s in plan.preload) == preload
    assert all(s.stage is Stage.DMA_READ for s in plan.preload)
    assert stage_bytes(plan, Stage.DMA_READ) == dma_read
    assert stage_bytes(plan, Stage.FETCH) == 32768
    assert stage_bytes(plan, Stage.STORE) == 8192
    assert stage_bytes(plan, Stage.DMA_WRITE) == 8192
    assert plan.fill_ratio == 1.0
    totals = plan.bytes_by_stage()
    assert totals[Stage.DMA_READ] == preload + dma_read and totals[Stage.GEMM] == totals[Stage.MATH] == 0


@pytest.mark.parametrize(("variant", "preload", "dma_read"), [
    ("ref_ref", 0, 17160),
    ("load_ref", 2640, 9240),
    ("load_load", 2640 + 4620, 0),
])
def test_bytes_ragged_40_70_33(variant, preload, dma_read):
    """M=40, N=70, K=33 (tile 32 x 32 x 64): M blocks 32+8, N blocks 32+32+6, one K block of 33 → 2*3*1 = 6
    tiles, 6 outputs.

    Each (i, kk) A block is read once per N block: 3 * (40*33) = 3960 elements = 7920 B.
    Each (kk, j) B block is read once per M block: 2 * (33*70) = 4620 elements = 9240 B.
    ref_ref reads 7920 + 9240 = 17160 B. Preloads: A = 40*33*2 = 2640 B, B = 33*70*2 = 4620 B.
    C = 40*70*2 = 5600 B stored and written back. macs = 40*70*33 = 92400 of 6 * 65536 paid.
    """
    plan = gemm_plan(40, 70, 33, variant=variant)
    assert plan.grid == (2, 3, 1) and plan.n_tiles == 6 and plan.n_output_tiles == 6
    assert sum(s.nbytes for s in plan.preload) == preload
    assert stage_bytes(plan, Stage.DMA_READ) == dma_read
    assert stage_bytes(plan, Stage.FETCH) == 17160
    assert stage_bytes(plan, Stage.STORE) == stage_bytes(plan, Stage.DMA_WRITE) == 5600
    assert plan.macs == 92400 and plan.tile_macs == 6 * 65536
    corner = plan.tiles[-1]
    assert (corner.index, corner.kk, corner.m, corner.n, corner.k) == ((1, 2), 0, 8, 6, 33)
    assert [(s.stage, s.operand, s.nbytes) for s in corner.steps][-3:] == [
        (Stage.GEMM, "", 0), (Stage.STORE, "c", 96), (Stage.DMA_WRITE, "c", 96)]


def test_load_ref_preloads_whole_a_once():
    """load_ref: one preload step, DMA_READ of A as a M x K block = M*K*itemsize bytes; tiles read only B."""
    plan = gemm_plan(96, 128, 80, variant="load_ref", itemsize_in=4)
    (step,) = plan.preload
    assert (step.stage, step.operand, step.rows, step.cols, step.nbytes) == (Stage.DMA_READ, "a", 96, 80, 96 * 80 * 4)
    assert {s.operand for s in plan.steps(Stage.DMA_READ, include_preload=False)} == {"b"}
    assert {s.operand for s in plan.steps(Stage.FETCH)} == {"a", "b"}


def test_output_in_tcm_has_no_write_back():
    plan = gemm_plan(64, 128, 64, out_in_hbm=False)
    assert plan.steps(Stage.DMA_WRITE) == ()
    assert len(plan.steps(Stage.STORE)) == plan.n_output_tiles == 8  # 2 M blocks x 4 N blocks of 32


# ---------------------------------------------------------------- fill ratio and tile time


@pytest.mark.parametrize(("m", "n", "k", "fill"), [
    (32, 32, 32, 0.5),    # one tile; K=32 fills half of tk=64: 32*32*32 / (32*32*64)
    (8, 32, 64, 0.25),    # M=8 fills a quarter of tm=32: 8*32*64 / 65536 = 16384 / 65536
    (32, 32, 8, 0.125),   # K=8 fills an eighth of tk=64
    (33, 32, 64, 33 / 64),  # two M tiles (32 + 1): 33*32*64 / (2 * 65536)
    (64, 96, 128, 1.0),   # exact multiples
])
def test_fill_ratio(m, n, k, fill):
    plan = gemm_plan(m, n, k)
    assert plan.fill_ratio == pytest.approx(fill)
    assert plan.macs == m * n * k


def test_gemm_tile_ns():
    """2 * 32*32*64 = 131072 FLOP at 8 TFLOP/s = 8e3 FLOP/ns → 16.384 ns."""
    assert gemm_tile_ns(8.0) == pytest.approx(16.384)
    assert gemm_tile_ns(8) == gemm_tile_ns(8.0, DEFAULT_TILE)
    assert gemm_tile_ns(16.0, (16, 16, 16)) == pytest.approx(2 * 16**3 / 16e3)


# ---------------------------------------------------------------- purity


def test_plans_are_pure_hashable_and_memoised():
    a = gemm_plan(40, 70, 33, variant="load_ref")
    b = gemm_plan(40, 70, 33, variant="load_ref", tile=[32, 32, 64])  # list tile is normalised
    c = gemm_plan(np.int64(40), 70, 33, variant="load_ref")
    assert a == b == c
    assert hash(a) == hash(b)
    assert a is b  # served from the cache
    assert len({a, b, c, gemm_plan(40, 70, 33)}) == 2
    with pytest.raises(AttributeError):
        a.tiles[0].steps[0].nbytes = 1  # frozen


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"m": 0}, "M must be a positive integer"),
    ({"n": -3}, "N must be a positive integer"),
    ({"k": 2.5}, "K must be a positive integer"),
    ({"m": True}, "M must be a positive integer"),
    ({"tile": (32, 0, 32)}, "tile tn"),
    ({"tile": (32, 64)}, "three extents"),
    ({"itemsize_in": 0}, "itemsize_in"),
    ({"variant": "hbm_hbm"}, "valid variants: ref_ref, load_ref, ref_load, load_load"),
])
def test_invalid_requests_raise_plan_error(kwargs, match):
    args = {"m": 8, "n": 8, "k": 8} | kwargs
    m, n, k = args.pop("m"), args.pop("n"), args.pop("k")
    with pytest.raises(PlanError, match=match) as info:
        gemm_plan(m, n, k, **args)
    assert isinstance(info.value, KernbenchError)


@pytest.mark.parametrize("peak", [0, -1.0, float("nan"), float("inf"), "8"])
def test_invalid_peak_raises(peak):
    with pytest.raises(PlanError, match="peak"):
        gemm_tile_ns(peak)
