"""Composite GEMM: numerics for every staging variant and epilogue scope, and pipeline timing.

Timing model (load_load, output in TCM), from the topology constants with the
default tile tm x tn x tk = 32 x 32 x 64: FETCH of a full tile moves
(tm*tk + tk*tn) * 2 B over the 512 GB/s TCM read channel = 16 ns; a GEMM tile
takes 2*tm*tn*tk / 8e3 = 16.384 ns; a STORE of a tm x tn f32 result block takes
tm*tn*4 / 512 = 8 ns. With GEMM the slowest stage the pipeline time is
T = F_first + n_tiles * G + S_last.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from components_testkit import deploy, launch_on_pe0

from kernbench.components import default_registry
from kernbench.components.launch import KernelLaunchMsg
from kernbench.sim import GraphEngine
from kernbench.topology import compile_spec, spec_from_dict

TM, TN, TK = 32, 32, 64  # the spec's default GEMM tile (checked below)
TCM_BW = 512.0
G = 2 * TM * TN * TK / 8e3
F_FIRST = (TM * TK + TK * TN) * 2 / TCM_BW
S_LAST = TM * TN * 4 / TCM_BW
PEAK_MACS_PER_NS = 8e3 / 2


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


_setup = deploy


def test_the_timing_model_uses_the_default_tile(graph):
    g = graph.spec.pe.gemm
    assert (g.tile_m, g.tile_n, g.tile_k) == (TM, TN, TK)
    assert (graph.spec.pe.tcm.read_bw_gbs, graph.spec.pe.tcm.write_bw_gbs) == (TCM_BW, TCM_BW)


def _run(eng, fn, args):
    req = launch_on_pe0(eng, fn, args)
    assert req.error is None, req.error
    return req


def _composite_kernel(variant, epilogue=()):
    def kernel(tl, a, b, c, *extra):
        aa = tl.load(a) if variant.startswith("load") else a
        bb = tl.load(b) if variant.endswith("load") else b
        ep = [dict(item, vector=tl.load(extra[0])) if item["op"] == "bias" else item for item in epilogue]
        tl.wait(tl.composite(aa, bb, c, epilogue=ep))
    return kernel


@pytest.mark.parametrize("variant", ["ref_ref", "load_ref", "ref_load", "load_load"])
@pytest.mark.parametrize("shape", [(64, 128, 64), (40, 70, 33), (1, 5, 130)])
def test_composite_matches_numpy(graph, variant, shape):
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    eng, args = _setup(graph, [a, b, np.zeros((m, n), np.float32)])
    _run(eng, _composite_kernel(variant), args)
    out = eng.memory.read_array(args[2].addr.encode(), (m, n), "float32")
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_epilogue_scopes_match_numpy(graph):
    """scale per K tile, bias + relu per output tile, sigmoid once: computed block by block in numpy."""
    m, k, n = 48, 96, 80
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal((n,)).astype(np.float16)
    eng, args = _setup(graph, [a, b, np.zeros((m, n), np.float16), bias])
    epilogue = [{"op": "relu", "scope": "k_tile"}, {"op": "bias", "scope": "output_tile"},
                {"op": "scale", "value": 0.5, "scope": "output_tile"}, {"op": "sigmoid", "scope": "once"}]
    _run(eng, _composite_kernel("load_ref", epilogue), args)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = np.zeros((m, n), np.float32)
    tk = graph.spec.pe.gemm.tile_k
    for k0 in range(0, k, tk):  # relu applies to each K tile's partial product
        ref += np.maximum(a32[:, k0:k0 + tk] @ b32[k0:k0 + tk], 0)
    ref = 1 / (1 + np.exp(-((ref + bias.astype(np.float32)) * 0.5)))
    out = eng.memory.read_array(args[2].addr.encode(), (m, n), "float16").astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=3e-3, atol=3e-3)


def _composite_ns(eng):
    (rec,) = [r for r in eng.oplog.records if r.op_name == "composite"]
    return rec, rec.t_end - rec.t_start


def _efficiency(graph, m, k, n):
    a = np.zeros((m, k), np.float16)
    b = np.zeros((k, n), np.float16)

    def kernel(tl, a, b):
        tl.wait(tl.composite(tl.load(a), tl.load(b)))

    eng, args = _setup(graph, [a, b], data=False)
    _run(eng, kernel, args)
    rec, t = _composite_ns(eng)
    return rec.params, t, m * n * k / (PEAK_MACS_PER_NS * t)


@pytest.mark.parametrize("n_tiles", [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48])
def test_pipeline_matches_the_analytic_model(graph, n_tiles):
    # n_tiles full tiles along K (one output tile): F_first + n * G + S_last
    params, t, eff = _efficiency(graph, TM, TK * n_tiles, TN)
    assert params["tiles"] == n_tiles
    model = F_FIRST + n_tiles * G + S_LAST
    assert t == pytest.approx(model, rel=0.2)
    model_eff = TM * TN * TK * n_tiles / (PEAK_MACS_PER_NS * model)
    assert eff == pytest.approx(model_eff, rel=0.2)


def test_efficiency_rises_with_tile_count(graph):
    effs = [_efficiency(graph, TM, TK * n, TN)[2] for n in (1, 2, 4, 8, 16, 48)]
    assert all(x < y for x, y in itertools.pairwise(effs))
    assert effs[-1] > 0.9


@pytest.mark.parametrize(("shape", "repeat", "fill"), [
    ((32, 32, 32), (48, 1, 1), 0.5),     # K = 32 fills half of tk = 64
    ((8, 64, 32), (1, 1, 48), 0.25),     # M = 8 fills a quarter of tm = 32
    ((128, 8, 128), (12, 1, 1), 0.125),  # K = 8 fills an eighth of tk = 64 (4 x 4 output tiles, 12 x along M)
])
def test_under_filled_tiles_cap_at_the_fill_ratio(graph, shape, repeat, fill):
    m, k, n = shape
    params, _, _ = _efficiency(graph, m, k, n)
    assert params["macs"] / params["tile_macs"] == pytest.approx(fill)
    # 48 such tiles (repeated along an axis that keeps each tile's shape): efficiency approaches the fill ratio
    params, _, eff = _efficiency(graph, m * repeat[0], k * repeat[1], n * repeat[2])
    assert params["tiles"] == (48 if shape != (128, 8, 128) else 12 * 16)
    assert 0.85 * fill < eff <= fill


def test_blocking_load_dot_is_slower_than_the_composite(graph):
    m, k, n = 64, 128, 128
    a = np.zeros((m, k), np.float16)
    b = np.zeros((k, n), np.float16)

    def composite(tl, a, b, c):
        tl.wait(tl.composite(a, b, c))

    def blocking(tl, a, b, c):  # the same tm x tn x tk tiles, each step a blocking load / dot / store
        A, B, C = tl.ref(a), tl.ref(b), tl.ref(c)
        for i in range(0, m, TM):
            for j in range(0, n, TN):
                acc = None
                for kk in range(0, k, TK):
                    part = tl.dot(tl.load(A[i:i + TM, kk:kk + TK]), tl.load(B[kk:kk + TK, j:j + TN]))
                    acc = part if acc is None else acc + part
                tl.store(C[i:i + TM, j:j + TN], acc)

    times = []
    for fn in (composite, blocking):
        eng, args = _setup(graph, [a, b, np.zeros((m, n), np.float32)], data=False)
        req = _run(eng, fn, args)
        times.append(next(iter(req.result.pe_exec_ns.values())))
    assert times[0] < times[1]


def test_composite_errors(graph):
    from kernbench.components import KernelError

    def bad_op(tl):
        tl.composite(tl.zeros((4, 4)), tl.zeros((4, 4)), epilogue=[{"op": "tanh"}])

    def missing_field(tl):
        tl.composite(tl.zeros((4, 4)), tl.zeros((4, 4)), epilogue=[{"op": "scale"}])

    def bad_shapes(tl):
        tl.composite(tl.zeros((4, 5)), tl.zeros((4, 4)))

    for fn, text in ((bad_op, "unknown epilogue op 'tanh'; known: scale"), (missing_field, "needs field(s) value"),
                     (bad_shapes, "do not form [M, K] @ [K, N]")):
        eng = GraphEngine(graph, default_registry())
        req = eng.submit(KernelLaunchMsg("k", fn, (((0, 0, 0), ()),)))
        eng.run()
        assert isinstance(req.error, KernelError) and text in str(req.error)


def test_kernel_end_waits_for_composites_left_in_flight(graph):
    a = np.zeros((32, 32 * 8), np.float16)
    b = np.zeros((32 * 8, 64), np.float16)

    def kernel(tl, a, b):
        tl.composite(tl.load(a), tl.load(b))  # never waited for

    eng, args = _setup(graph, [a, b], data=False)
    req = _run(eng, kernel, args)
    rec, _ = _composite_ns(eng)
    report = next(iter(req.result.reports.values()))
    assert report.exec_start_ns + report.exec_ns >= rec.t_end
    assert math.isfinite(report.exec_ns)


def test_blocked_loads_and_stores_match_numpy(graph):
    """2-D block slicing of HBM tensors: strided DMA reads and writes move the right elements."""
    m, k, n = 64, 96, 128
    rng = np.random.default_rng(11)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    eng, args = _setup(graph, [a, b, np.zeros((m, n), np.float32)])

    def kernel(tl, a, b, c):
        A, B, C = tl.ref(a), tl.ref(b), tl.ref(c)
        for i in range(0, m, 32):
            for j in range(0, n, 64):
                acc = None
                for kk in range(0, k, 32):
                    part = tl.dot(tl.load(A[i:i + 32, kk:kk + 32]), tl.load(B[kk:kk + 32, j:j + 64]))
                    acc = part if acc is None else acc + part
                tl.store(C[i:i + 32, j:j + 64], acc)

    _run(eng, kernel, args)
    out = eng.memory.read_array(args[2].addr.encode(), (m, n), "float32")
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_more_dma_read_channels_speed_up_streaming():
    """ref_ref streaming is read-round-trip bound with one read channel; two channels overlap the reads."""
    times = []
    for channels in (1, 2):
        g = compile_spec(spec_from_dict({"pe": {"dma": {"read_channels": channels}}}))
        a = np.zeros((64, 256), np.float16)
        b = np.zeros((256, 128), np.float16)
        eng, args = _setup(g, [a, b, np.zeros((64, 128), np.float32)], data=False)
        _run(eng, _composite_kernel("ref_ref"), args)
        times.append(_composite_ns(eng)[1])
    assert times[1] < 0.8 * times[0]


@pytest.mark.parametrize("head", ["exp", "sigmoid", "relu", "copy"])
@pytest.mark.parametrize("staged", [False, True])
def test_math_head_composite_matches_numpy(graph, head, staged):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((70, 150)).astype(np.float16)
    bias = rng.standard_normal((150,)).astype(np.float16)
    eng, args = _setup(graph, [x, np.zeros((70, 150), np.float16), bias])

    def kernel(tl, x, out, b):
        src = tl.load(x) if staged else x
        tl.wait(tl.composite(head, src, out, epilogue=[{"op": "bias", "vector": tl.load(b)},
                                                        {"op": "scale", "value": 2.0, "scope": "once"}]))

    _run(eng, kernel, args)
    x32 = x.astype(np.float32)
    f = {"exp": np.exp, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0),
         "copy": lambda v: v}[head]
    ref = (f(x32) + bias.astype(np.float32)) * 2.0
    got = eng.memory.read_array(args[1].addr.encode(), (70, 150), "float16").astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=3e-3, atol=3e-3)
    tiles = math.ceil(70 / TM) * math.ceil(150 / TN)
    heads = [r for r in eng.oplog.records if r.op_name == "math" and r.params["op"] == head]
    assert len(heads) == tiles
    reads = [r for r in eng.oplog.records if r.op_name == "dma_read"]
    assert len(reads) == (2 if staged else tiles + 1)  # x (once or per tile) and the bias vector


def test_math_head_errors(graph):
    from kernbench.components import KernelError

    def unknown(tl):
        tl.composite("tanh", tl.zeros((4, 4)))

    def too_many(tl):
        tl.composite("exp", tl.zeros((4, 4)), tl.zeros((4, 4)), tl.zeros((4, 4)))

    for fn, text in ((unknown, "unknown head op 'tanh'"), (too_many, "takes 1 input(s) and an optional output")):
        eng = GraphEngine(graph, default_registry())
        req = eng.submit(KernelLaunchMsg("k", fn, (((0, 0, 0), ()),)))
        eng.run()
        assert isinstance(req.error, KernelError) and text in str(req.error)


def test_a_strided_block_lands_on_its_real_hbm_channels(graph):
    """64 rows of 256 B with a 2048 B pitch: every row starts on the same pseudo-channel (2048 = 8 bursts),
    so the block drains through one 16 GB/s channel; the same bytes contiguous use all eight."""
    wide = np.zeros((64, 512), np.float32)
    narrow = np.zeros((64, 64), np.float32)
    eng, args = _setup(graph, [wide, narrow], data=False)

    def kernel(tl, wide, narrow):
        tl.load(tl.ref(wide)[:, 0:64])
        tl.load(narrow)

    _run(eng, kernel, args)
    strided, contiguous = [r.t_end - r.t_start for r in eng.oplog.records if r.op_name == "dma_read"]
    assert strided > 4 * contiguous
    # one channel: 64 bursts x 16 ns after the first arrives
    assert strided >= 64 * 256 / 16.0
