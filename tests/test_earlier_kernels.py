"""Kernels and host code written for the earlier simulator run here unmodified (issue 21, ADR 0035).

Two parts: small pointer-form kernels of our own (they run everywhere), and
the earlier team's eight GQA kernel files, imported by path from the seed
folder when it exists (skipped elsewhere), run in timing and data mode and
compared with a numpy model of what they compute.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kernbench.ccl import install
from kernbench.ccl.neighbours import cube_ring, intercube_mesh, intra_cube, link, merge
from kernbench.runtime import DPPolicy, RuntimeApiError, session
from kernbench.runtime.compat import EarlierHost, earlier, earlier_session
from kernbench.tl import CompositeError, Pointer, TLError, pointer_form, record

SEEDS = Path("/work/shared/seeds/extracted/src/kernbench/benches")
ROWS, COLS = 32, 64
ROW_BYTES = COLS * 2


# ---------------------------------------------------------------------------------------------- own kernels
def softmax_rows_tensor(tl, a, o, n):
    """Row softmax of 8-row blocks, in the tensor spelling."""
    for r in range(0, n, 8):
        with tl.scratch_scope():
            x = tl.load(tl.ref(a)[r:r + 8, :])
            e = tl.exp(x - tl.max(x, axis=-1, keepdims=True))
            tl.store(tl.ref(o)[r:r + 8, :], e / tl.sum(e, axis=-1, keepdims=True))


def softmax_rows_pointer(a_ptr, o_ptr, n, *, tl):
    """The same kernel in the pointer spelling."""
    for r in range(0, n, 8):
        with tl.scratch_scope():
            x = tl.load(a_ptr + r * ROW_BYTES, shape=(8, COLS), dtype="f16")
            e = tl.exp(x - tl.max(x, axis=-1))
            tl.store(o_ptr + r * ROW_BYTES, e / tl.sum(e, axis=-1))


def gemm_tensor(tl, a, b, o):
    tl.wait(tl.composite(op="gemm", a=tl.load(a), b=tl.ref(b), out=tl.ref(o), out_dtype="float16"))


def gemm_pointer(a_ptr, b_ptr, o_ptr, *, tl):
    h = tl.composite("gemm", tl.load(a_ptr, (ROWS, COLS), "f16"), tl.ref(b_ptr, (COLS, COLS), "f16"), out_ptr=o_ptr)
    tl.wait(h)


def _records(torch) -> list:
    return [dataclasses.astuple(r) for r in torch.oplog.records]


def _run(kernel, *, data: bool, dp=None, gemm: bool = False):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((ROWS, COLS)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((COLS, COLS)) * 0.1).astype(np.float16)
    dp = dp or DPPolicy(num_cubes=1, num_pes=2, pe="row_wise")
    with session(data=data) as torch:
        ta = torch.from_numpy(a, dp)
        if gemm:
            tb = torch.from_numpy(b, DPPolicy(num_cubes=1, num_pes=1))
            to = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
            torch.wait(torch.launch("k", kernel, ta, tb, to))
        else:
            to = torch.zeros((ROWS, COLS), "float16", dp)
            torch.wait(torch.launch("k", kernel, ta, to, ROWS // 2))
        return _records(torch), torch.now_ns, (torch.to_numpy(to) if data else None), a, b


@pytest.mark.parametrize("data", [False, True])
def test_both_spellings_cost_the_same(data):
    rec_t, ns_t, out_t, a, _ = _run(softmax_rows_tensor, data=data)
    rec_p, ns_p, out_p, _, _ = _run(softmax_rows_pointer, data=data)
    assert ns_t == ns_p and rec_t == rec_p
    if data:
        np.testing.assert_array_equal(out_t, out_p)
        x = a.astype(np.float32)
        want = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(out_p, want / want.sum(-1, keepdims=True), atol=2e-3)


def test_composites_cost_the_same_in_both_spellings():
    rec_t, ns_t, _, a, b = _run(gemm_tensor, data=True, dp=DPPolicy(num_cubes=1, num_pes=1), gemm=True)
    rec_p, ns_p, out_p, _, _ = _run(gemm_pointer, data=True, dp=DPPolicy(num_cubes=1, num_pes=1), gemm=True)
    assert ns_t == ns_p and rec_t == rec_p
    np.testing.assert_allclose(out_p, a.astype(np.float32) @ b.astype(np.float32), atol=2e-2)


def test_the_form_is_read_from_the_signature():
    assert pointer_form(softmax_rows_pointer) and pointer_form(lambda a, n, tl: None)
    assert not pointer_form(softmax_rows_tensor) and not pointer_form(lambda tl, a: None)


def _fail(kernel, *args, match: str, data: bool = False):
    """Run ``kernel(a, o, *args)`` and expect its launch to fail with ``match`` in a one-line message."""
    with session(data=data) as torch:
        dp = DPPolicy(num_cubes=1, num_pes=1)
        ta = torch.zeros((ROWS, COLS), "float16", dp)
        to = torch.zeros((ROWS, COLS), "float16", dp)
        with pytest.raises(Exception, match=match) as info:
            torch.wait(torch.launch("bad", kernel, ta, to, *args))
    assert "Traceback" not in str(info.value)


def test_a_pointer_past_its_tensor_is_refused_not_read_from_the_next_one():
    def k(a_ptr, o_ptr, *, tl):
        tl.load(a_ptr + (ROWS - 4) * ROW_BYTES, shape=(8, COLS), dtype="f16")
    _fail(k, match=r"overrun it")


def test_an_address_outside_every_tensor_is_refused():
    def k(a_ptr, o_ptr, *, tl):
        tl.load((a_ptr + 0) * 1 - 4096 * 1024, shape=(8, COLS), dtype="f16")
    _fail(k, match="not inside any tensor argument")


def test_a_plain_integer_inside_a_tensor_resolves_to_it():
    def k(a_ptr, o_ptr, *, tl):
        x = tl.load(int(a_ptr) + ROW_BYTES, (1, COLS), "f16")
        tl.store(int(o_ptr), x)
    with session(data=True) as torch:
        dp = DPPolicy(num_cubes=1, num_pes=1)
        a = np.arange(ROWS * COLS, dtype=np.float16).reshape(ROWS, COLS)
        ta, to = torch.from_numpy(a, dp), torch.zeros((ROWS, COLS), "float16", dp)
        torch.wait(torch.launch("k", k, ta, to))
        np.testing.assert_array_equal(torch.to_numpy(to)[0], a[1])


def test_unknown_dtype_spelling_and_missing_neighbour_are_one_line_errors():
    def k(a_ptr, o_ptr, *, tl):
        tl.load(a_ptr, (8, COLS), "bf16")
    _fail(k, match="unknown dtype 'bf16'")

    def k2(a_ptr, o_ptr, *, tl):
        tl.send(dir="intra_E", src=tl.load(a_ptr, (8, COLS), "f16"))
    _fail(k2, match="no neighbour installed in direction 'intra_E'")


def test_composite_validation_errors_are_value_errors():
    def k(a_ptr, o_ptr, *, tl, op, **kw):
        tl.composite(op, tl.load(a_ptr, (ROWS, COLS), "f16"), **kw)
    cases = [(dict(op="gemm", math_op="exp"), "goes with op='math'"),
             (dict(op="math", math_op="tanh"), "not an elementwise head"),
             (dict(op="conv"), "unknown op 'conv'"),
             (dict(op="math", math_op="exp", epilogue=[{"op": "bogus"}]), "unknown epilogue op"),
             (dict(op="math", math_op="exp", epilogue=[{"op": "scale"}]), "needs field"),
             (dict(op="math", math_op="exp", acc_dtype="f16"), "accumulates in float32"),
             (dict(op="math", math_op="exp", tile_shape=(16, 16)), "tile_shape")]
    from kernbench.topology import resolve
    spec = resolve(None).spec
    for kw, match in cases:
        with pytest.raises(CompositeError, match=match) as info:
            record(lambda a_ptr, o_ptr, *, tl, kw=kw: k(a_ptr, o_ptr, tl=tl, **kw), *_args(), spec=spec)
        assert isinstance(info.value, ValueError)


def _args():
    from kernbench.tl import TensorArg
    from kernbench.topology.address import PhysAddr
    arg = TensorArg(PhysAddr(0, 0, "hbm", 0), (ROWS, COLS), "float16")
    return arg, TensorArg(PhysAddr(0, 0, "hbm", 1 << 20), (ROWS, COLS), "float16")


def test_pointer_form_records_commands_and_math_spellings():
    def k(a_ptr, o_ptr, *, tl):
        assert isinstance(a_ptr, Pointer) and isinstance(a_ptr + 2, Pointer) and (a_ptr + 6) - a_ptr == 6
        x = tl.load(a_ptr, (8, COLS), "f16")
        y = tl.fma(x, x, x)
        y = tl.where(tl.clamp(y, 0.0, 1.0), tl.sigmoid(y), tl.cos(tl.sin(y)))
        z = tl.softmax(tl.trans(y), axis=-1)
        assert tl.sum(z, axis=1).shape == (COLS, 1) and tl.zeros((4, 4)).dtype == "float16"
        assert tl.arange(0, 8).dtype == "int32" and tl.full((2, 2), 3.0, "f32").dtype == "float32"
        assert tl.cdiv(7, 2) == 4 and tl.program_id() == 0 and tl.num_programs(1) == 1
        tl.cycles(5)
        with pytest.raises(TLError, match=r"no neighbour|direction"):
            tl.recv(dir="up", shape=(1, 8))
    from kernbench.topology import resolve
    cmds = record(k, *_args(), spec=resolve(None).spec)
    assert len(cmds) > 10


def test_messages_between_two_pes_in_the_pointer_form():
    def k(a_ptr, o_ptr, *, tl):
        pe = tl.program_id(0)
        x = tl.load(a_ptr, (8, COLS), "f16")
        if pe == 0:
            tl.send(dir="intra_E", src=x)
            tl.send(dir="intra_E", src_addr=x.addr, shape=(8, COLS), dtype="f16")
        else:
            got = tl.recv_async(dir="intra_W", shape=(8, COLS), dtype="f16")
            tl.recv(dir="intra_W", shape=(8, COLS), dtype="f16", dst_addr=o_ptr + 8 * ROW_BYTES, dst_space="hbm")
            tl.store(o_ptr, tl.wait(got))
    with session(data=True) as torch:
        table: dict = {}
        link(table, (0, 0, 0), "intra_E", (0, 0, 1))
        install(torch, table)
        dp = DPPolicy(num_cubes=1, num_pes=2, pe="row_wise")
        a = np.random.default_rng(3).standard_normal((ROWS, COLS)).astype(np.float16)
        ta, to = torch.from_numpy(a, dp), torch.zeros((ROWS, COLS), "float16", dp)
        torch.wait(torch.launch("k", k, ta, to))
        out = torch.to_numpy(to)
        np.testing.assert_array_equal(out[16:24], a[0:8])
        np.testing.assert_array_equal(out[24:32], a[0:8])


def test_the_host_surface_of_the_earlier_benches():
    with earlier_session(data=True) as torch:
        assert isinstance(torch, EarlierHost) and earlier(torch) is torch
        dp = DPPolicy(num_cubes=1, num_pes=2, pe="row_wise")
        a = np.ones((ROWS, COLS), np.float16)
        ta = torch.from_numpy(a, dp=dp, name="a")
        to = torch.empty((ROWS, COLS), dtype="f16", dp=dp, name="o")
        torch.zeros((4, 4), dtype=np.float32, dp=dp)
        assert torch.names["a"] is ta and to.dtype == "float16"
        assert torch.spec["pe"]["gemm"]["tile_m"] == torch.spec.pe.gemm.tile_m
        assert "system" in dict(torch.spec)
        torch.ahbm.set_device(0)
        torch.accelerator.set_device_index(0)
        torch.launch("k", softmax_rows_pointer, ta, to, np.int64(ROWS // 2))
        torch.wait_all()
        assert np.isfinite(torch.to_numpy(to)).all()
        with pytest.raises(RuntimeApiError, match="unknown dtype"):
            torch.empty((4,), dtype="bf16")


# ---------------------------------------------------------------------------------------------- seed kernels
def _seed(name: str):
    path = SEEDS / f"_gqa_attention_{name}.py"
    if not path.exists():
        pytest.skip(f"the earlier team's kernels are not here ({SEEDS} is only in the project's sandbox)")
    spec = importlib.util.spec_from_file_location(f"earlier_gqa_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"gqa_attention_{name}_kernel")


TILE = 1024  # the seed kernels' S_kv tile width


def _tiles(k_flat: np.ndarray, v_flat: np.ndarray, s_local: int, d: int, tile: int = TILE):
    """K^T and V tiles as the kernels read them: K^T is the next d*tile_s elements viewed as (d, tile_s)."""
    for t0 in range(0, s_local, tile):
        ts = min(tile, s_local - t0)
        yield k_flat[t0 * d:(t0 + ts) * d].reshape(d, ts), v_flat[t0 * d:(t0 + ts) * d].reshape(ts, d)


def _attend(q: np.ndarray, blocks) -> np.ndarray:
    kt = np.concatenate([k for k, _ in blocks], axis=1).astype(np.float32)
    v = np.concatenate([v for _, v in blocks], axis=0).astype(np.float32)
    s = q.astype(np.float32) @ kt
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


# name -> (C, P, extra launch ints, K/V placement, ranks whose shards one output attends, storing rank)
CASES = {
    "decode_short": dict(C=1, P=8, kv=("cube", "pe"), extra=("kv_per_cube", 1), root=(0, 0)),
    "decode_opt2": dict(C=1, P=1, kv=("cube", "pe"), root=(0, 0)),
    "decode_long_ctx_cube_repl_pe_tp": dict(C=1, P=8, kv=(), root=(0, 0)),
    "decode_long_ctx_cube_repl_pe_sp": dict(C=2, P=8, kv=("pe",), root=(0, 0)),
    "decode_long_ctx_cube_sp_pe_sp": dict(C=8, P=8, kv=("cube", "pe"), root=(6, 0)),
    "decode_long_ctx_cube_sp_pe_tp": dict(C=8, P=8, kv=("cube",), root=(6, 0)),
    "prefill_short": dict(C=1, P=8, kv=("cube", "pe"), extra=("kv_per_cube", 1), root=(0, 0), prefill=True),
    "prefill_long": dict(C=4, P=1, kv=("cube",), root=None, prefill=True),
}


def _run_seed(name: str, data: bool):
    kernel = _seed(name)
    case = CASES[name]
    C, P = case["C"], case["P"]
    d, T_q, h_q, h_kv = 64, 1, 4, 1
    S_local = 1536 if name != "prefill_long" else 1024  # two tiles, the second one partial
    if name in ("prefill_short", "prefill_long"):
        T_q, h_q = 4, 1
    kv_ranks = (C if "cube" in case["kv"] else 1) * (P if "pe" in case["kv"] else 1)
    S_kv = S_local * kv_ranks
    if name == "decode_opt2":
        S_kv = S_local = 512
    G = h_q // h_kv
    rows = G * T_q if name != "prefill_short" else h_kv * T_q
    rng = np.random.default_rng(7)
    q_rows = C * T_q if name == "prefill_long" else T_q
    q = (rng.standard_normal((q_rows, h_q * d)) * 0.3).astype(np.float16)
    k = (rng.standard_normal((S_kv, d)) * 0.3).astype(np.float16)
    v = rng.standard_normal((S_kv, d)).astype(np.float16)
    mode = {("cube", "pe"): ("row_wise", "row_wise"), ("cube",): ("row_wise", "replicate"),
            ("pe",): ("replicate", "row_wise"), (): ("replicate", "replicate")}[case["kv"]]
    with earlier_session(data=data) as torch:
        table = merge(*(intra_cube(torch.spec, 0, c) for c in range(C)))
        if name == "prefill_long":
            table = cube_ring(torch.spec, 0, list(range(C)))
        elif C > 1:
            table = merge(table, *(intercube_mesh(torch.spec, 0, p) for p in range(P)))
        torch.install_ipcq(table)
        if name == "prefill_long":
            q_dp = DPPolicy(cube="row_wise", num_cubes=C, num_pes=P)
        else:
            q_dp = DPPolicy(num_cubes=C, num_pes=P)
        kv_dp = DPPolicy(cube=mode[0], pe=mode[1], num_cubes=C, num_pes=P)
        o_dp = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=C, num_pes=P)
        tq = torch.from_numpy(q, dp=q_dp, name="q")
        tk = torch.from_numpy(k, dp=kv_dp, name="k")
        tv = torch.from_numpy(v, dp=kv_dp, name="v")
        to = torch.zeros((C * P * rows, d), dtype="f16", dp=o_dp, name="o")
        ints = {"T_q": T_q, "S_kv": S_kv, "h_q": h_q, "h_kv": h_kv, "d_head": d, "C": C, "P": P}
        if "extra" in case:
            ints[case["extra"][0]] = case["extra"][1]
        import inspect
        params = [p for p in inspect.signature(kernel).parameters if p not in ("q_ptr", "k_ptr", "v_ptr", "o_ptr",
                                                                                "tl")]
        t0 = torch.now_ns
        torch.launch(name, kernel, tq, tk, tv, to, *(ints[p] for p in params))
        torch.wait_all()
        ns = torch.now_ns - t0
        out = torch.to_numpy(to) if data else None
        shards = {(s.cube, s.pe): s for s, _ in tk.shards}
    if not data:
        return ns, None, None
    # the numpy model: every output attends to the K/V shards of the ranks whose partials it merged
    def blocks(ranks):
        out_blocks = []
        for r in ranks:
            s = shards[r]
            kf = k[s.rows[0]:s.rows[1]].reshape(-1)
            vf = v[s.rows[0]:s.rows[1]].reshape(-1)
            tile = S_local // 2 if name == "decode_opt2" else TILE
            out_blocks += list(_tiles(kf, vf, s.rows[1] - s.rows[0], d, tile))
        return out_blocks
    if name == "prefill_long":
        ranks = [(c, 0) for c in range(C)]
        want = {(c, 0): _attend(q[c * T_q:(c + 1) * T_q].reshape(-1, d)[:rows], blocks(ranks)) for c in range(C)}
    else:
        if name == "decode_long_ctx_cube_repl_pe_sp":
            ranks = [(0, p) for p in range(P)]
        elif name == "decode_long_ctx_cube_sp_pe_tp":
            ranks = [(c, 0) for c in range(C)]
        elif name == "decode_long_ctx_cube_repl_pe_tp":
            ranks = [(0, 0)]
        else:
            ranks = sorted(shards)
        want = {case["root"]: _attend(q.reshape(-1, d)[:rows], blocks(ranks))}
    got = {r: out[(r[0] * P + r[1]) * rows:(r[0] * P + r[1] + 1) * rows] for r in want}
    return ns, got, want


@pytest.mark.parametrize("name", sorted(CASES))
def test_earlier_gqa_kernel_runs_unmodified(name):
    ns_timing, _, _ = _run_seed(name, data=False)
    ns_data, got, want = _run_seed(name, data=True)
    assert ns_timing > 0 and ns_data == ns_timing
    for rank, w in want.items():
        np.testing.assert_allclose(got[rank].astype(np.float32), w, atol=2e-3, rtol=2e-2,
                                   err_msg=f"{name}: output of rank {rank}")


# ---------------------------------------------------------------------------------------- an earlier bench
EARLIER_BENCH = '''
"""A bench script in the earlier spelling: its host code and its kernel."""

import numpy as np

from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench

ROW_BYTES = 64 * 2


def double_rows(x_ptr, y_ptr, n, *, tl):
    for r in range(0, n, 8):
        with tl.scratch_scope():
            tl.store(y_ptr + r * ROW_BYTES, tl.load(x_ptr + r * ROW_BYTES, shape=(8, 64), dtype="f16") * 2.0)


@bench(name="earlier-double", description="y = 2x written for the earlier simulator", host="earlier")
def run(torch):
    dp = DPPolicy(num_cubes=1, num_pes=1)
    x = torch.from_numpy(np.full((32, 64), 3, np.float16), dp=dp)
    y = torch.empty((32, 64), dtype="f16", dp=dp, name="y")
    torch.wait(torch.launch("double", double_rows, x, y, 32))
    torch.wait_all()


def double_rows_ours(tl, x, y, n):
    for r in range(0, n, 8):
        with tl.scratch_scope():
            tl.store(tl.ref(y)[r:r + 8, :], tl.load(tl.ref(x)[r:r + 8, :]) * 2.0)


@bench(name="ours-double", description="the same bench in our spelling")
def run_ours(torch):
    dp = DPPolicy(num_cubes=1, num_pes=1)
    x = torch.from_numpy(np.full((32, 64), 3, np.float16), dp)
    y = torch.empty((32, 64), "float16", dp)
    torch.wait(torch.launch("double", double_rows_ours, x, y, 32))
'''


def test_a_bench_written_for_the_earlier_host_runs_unmodified_and_costs_the_same(tmp_path, monkeypatch):
    """``@bench(..., host="earlier")`` hands ``run`` the earlier host surface (``dp=``, ``dtype="f16"``,
    ``name=``); its pointer-form kernel costs exactly what the same bench in our spelling costs."""
    from kernbench.runtime.bench import BenchError, bench, discover, run_bench
    from kernbench.topology import resolve

    (tmp_path / "kb_earlier_bench.py").write_text(EARLIER_BENCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = discover("kb_earlier_bench")
    graph = resolve(None)
    theirs, ours = (run_bench(registry.resolve(n), graph) for n in ("earlier-double", "ours-double"))
    assert theirs.ok and ours.ok, (theirs.error, ours.error)
    assert registry.resolve("earlier-double").host == "earlier"
    assert theirs.latency_ns == ours.latency_ns > 0 and theirs.op_counts == ours.op_counts
    assert [dataclasses.astuple(r)[:4] for r in theirs.records] == [dataclasses.astuple(r)[:4] for r in ours.records]
    with pytest.raises(BenchError, match="host 'pytorch' is not one of kernbench, earlier"):
        bench("x-y", "z", host="pytorch")
