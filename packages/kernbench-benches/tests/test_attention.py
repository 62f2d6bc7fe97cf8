"""Flash-decode kernels: numerics against numpy, variants agree, pipelining pays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.benches._attention import KERNELS
from kernbench.benches.gqa_decode_single_pe import attention_reference
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _decode(graph, variant, s_kv, g, d=64, tile=64, seed=0):
    rng = np.random.default_rng(seed)
    q_np = rng.standard_normal((g, d)).astype(np.float16)
    k_np = rng.standard_normal((s_kv, d)).astype(np.float16)
    v_np = rng.standard_normal((s_kv, d)).astype(np.float16)
    ctx = RuntimeContext(graph, data=True)
    one = DPPolicy(num_cubes=1, num_pes=1)
    q, k, v = (ctx.from_numpy(x, one) for x in (q_np, k_np, v_np))
    out = ctx.empty((g, d), "float32", one)
    kernel = KERNELS[variant]
    scale = 1.0 / math.sqrt(d)
    res = ctx.wait(ctx.launch("decode", lambda tl, q, k, v, o: kernel(tl, q, k, v, o, tile, scale), q, k, v, out))
    return ctx.to_numpy(out), attention_reference(q_np, k_np, v_np), next(iter(res.pe_exec_ns.values()))


@pytest.mark.parametrize("s_kv", [64, 1024, 8192])
@pytest.mark.parametrize("g", [1, 8])
def test_variants_match_numpy_and_each_other(graph, s_kv, g):
    got1, ref, _ = _decode(graph, "opt1", s_kv, g)
    got3, _, _ = _decode(graph, "opt3", s_kv, g)
    np.testing.assert_allclose(got1, ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(got3, ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(got1, got3, rtol=1e-3, atol=1e-3)


def test_opt1_handles_a_partial_last_tile(graph):
    got, ref, _ = _decode(graph, "opt1", 100, 4)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


def test_software_pipelining_is_faster_at_8k(graph, monkeypatch):
    monkeypatch.setenv("GQA_SKV", "8192")
    times = {}
    for variant in ("opt1", "opt3"):
        monkeypatch.setenv("GQA_VARIANT", variant)
        r = run_bench(discover().resolve("gqa-decode-single-pe"), graph)
        assert r.ok, r.error
        times[variant] = r.engines["pe_cpu"]["occupancy_ns"]
    assert times["opt3"] < times["opt1"]


def test_scratch_stays_bounded_at_long_context(graph):
    """32K tokens of K and V would be 8 MiB of scratch without scopes; the decode fits in 1 MiB."""
    graph_ = graph
    ctx = RuntimeContext(graph_)
    one = DPPolicy(num_cubes=1, num_pes=1)
    q = ctx.empty((8, 64), "float16", one)
    k = ctx.empty((32768, 64), "float16", one)
    v = ctx.empty((32768, 64), "float16", one)
    out = ctx.empty((8, 64), "float32", one)
    used = []

    def kernel(tl, q, k, v, o):
        KERNELS["opt3"](tl, q, k, v, o, 64, 0.125)
        used.append(tl.scratch_used)

    ctx.wait(ctx.launch("decode", kernel, q, k, v, out))
    assert used[0] < 64 * 1024


def test_opt3_needs_whole_tiles(graph, monkeypatch):
    monkeypatch.setenv("GQA_SKV", "100")
    monkeypatch.setenv("GQA_VARIANT", "opt3")
    r = run_bench(discover().resolve("gqa-decode-single-pe"), graph)
    assert not r.ok and "must be a multiple of GQA_TILE=64" in r.error
