"""Every shipped bench runs, registers under its documented name, and does the work its parameters ask for."""

from __future__ import annotations

import math

import pytest

from kernbench.runtime.bench import BenchError, discover, run_bench
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def test_registered_names():
    names = [b.name for b in discover().benches]
    assert names == ["all-gather", "all-to-all", "ccl-allreduce", "ffn", "gemm-single-pe", "gqa-decode",
                     "gqa-decode-single-pe", "gqa-headline", "gqa-prefill", "matmul-composite", "moe", "qkv-gemm",
                     "qkv-gemm-multi-pe", "reduce-scatter", "tp-mlp", "va-offset-verify"]
    for b in discover().benches:
        for p in b.params:  # every declared parameter is documented under its environment variable too
            assert p.env and p.env in b.doc, f"{b.name}: the module docstring does not name {p.name}'s {p.env}"
    declared = {b.name: [p.name for p in b.params] for b in discover().benches}
    assert declared["matmul-composite"] == ["M", "K", "N", "DTYPE", "VARIANT"]
    assert declared["gqa-headline"] == ["PANELS"]


@pytest.mark.parametrize("variant", ["ref_ref", "load_ref", "load_load"])
@pytest.mark.parametrize("shape", [(64, 64, 64), (40, 70, 33)])
def test_matmul_composite_tiles(graph, monkeypatch, variant, shape):
    m, k, n = shape
    for key, value in zip(("MATMUL_M", "MATMUL_K", "MATMUL_N"), shape, strict=True):
        monkeypatch.setenv(key, str(value))
    monkeypatch.setenv("MATMUL_VARIANT", variant)
    r = run_bench(discover().resolve("matmul-composite"), graph)
    g = graph.spec.pe.gemm
    tm, tn, tk = g.tile_m, g.tile_n, g.tile_k
    assert (tm, tn, tk) == (32, 32, 64)  # the shipped topology's tile: M32 x K64 x N32
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * math.ceil(k / tk)
    assert r.ok and r.op_counts["gemm"] == tiles
    per_tile_reads = {"ref_ref": 2, "load_ref": 1, "load_load": 0}[variant]
    loads = {"ref_ref": 0, "load_ref": 1, "load_load": 2}[variant]
    assert r.op_counts["dma_read"] == per_tile_reads * tiles + loads
    assert r.op_counts["dma_write"] == math.ceil(m / tm) * math.ceil(n / tn)


def test_bad_parameters_are_refused_before_anything_runs(graph, monkeypatch):
    from kernbench.runtime.params import ParamError

    info = discover().resolve("matmul-composite")
    monkeypatch.setenv("MATMUL_VARIANT", "stream_all")
    with pytest.raises(ParamError, match="environment variable MATMUL_VARIANT: VARIANT='stream_all' is invalid; "
                                         "expected one of ref_ref, load_ref, load_load"):
        run_bench(info, graph)
    monkeypatch.delenv("MATMUL_VARIANT")
    with pytest.raises(ParamError, match=r"-p: M=1000000000000 is out of bounds; expected an integer from 1 to 4096"):
        run_bench(info, graph, params={"M": "1e12"})
    with pytest.raises(ParamError, match="has no parameter 'Q'; its parameters: M, K, N, DTYPE, VARIANT"):
        run_bench(info, graph, params={"Q": "1"})


def test_p_wins_over_the_environment(graph, monkeypatch):
    monkeypatch.setenv("MATMUL_M", "64")
    r = run_bench(discover().resolve("matmul-composite"), graph, params={"M": "32", "K": "64", "N": "32"})
    assert r.ok and r.params["M"] == 32 and r.to_json()["params"] == {"M": 32, "K": 64, "N": 32, "DTYPE": "float16",
                                                                        "VARIANT": "ref_ref"}
    g = graph.spec.pe.gemm
    assert r.op_counts["gemm"] == -(-32 // g.tile_m) * -(-32 // g.tile_n) * -(-64 // g.tile_k)


def test_multi_pe_qkv_uses_every_pe_at_once(graph, monkeypatch):
    monkeypatch.setenv("QKV_SEQ", "256")
    monkeypatch.setenv("QKV_CUBES", "2")
    monkeypatch.setenv("QKV_PES", "4")
    r = run_bench(discover().resolve("qkv-gemm-multi-pe"), graph)
    assert r.ok and len(r.pe_exec_start_ns) == 8 and len(set(r.pe_exec_start_ns.values())) == 1
    # each PE: 32 rows x 768 cols x 256 deep = 1 x 12 x 8 tiles
    assert r.op_counts["gemm"] == 8 * 12 * 8


def test_gemm_single_pe_counts(graph, monkeypatch):
    monkeypatch.setenv("GEMM_M", "64")
    r = run_bench(discover().resolve("gemm-single-pe"), graph)
    assert r.ok and r.op_counts == {"gemm": 1, "math": 0, "dma_read": 2, "dma_write": 1, "ipcq_copy": 0}


def test_unknown_bench():
    with pytest.raises(BenchError, match="valid benches: 1:all-gather, 2:all-to-all, 3:ccl-allreduce, "
                                         "4:ffn, 5:gemm-single-pe"):
        discover().resolve("nope")


def test_va_offset_verify_passes_its_own_check_in_data_mode(graph, monkeypatch):
    monkeypatch.setenv("VA_ROWS", "24")  # 24 x 128 f16 shards: boundaries inside MMU pages
    r = run_bench(discover().resolve("va-offset-verify"), graph, data=True)
    assert r.ok, r.error
    assert r.op_counts["dma_read"] == 8 and r.op_counts["dma_write"] == 8
