"""Flat-ops composites: lowering, recipes, phase placement, DMA from operand space, ordering, validation.

The ``softmax_merge`` reference below is the textbook online-softmax step,
written independently of the recipe table: for scores ``s`` and running
``(m, l, O)``::

    m_new = max(m, rowmax(s));  c = exp(m - m_new);  P = exp(s - m_new)
    l' = l * c + rowsum(P);     O' = O * c + P @ V;  m' = m_new
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from components_testkit import deploy, launch_on_pe0

from kernbench.components.pe.composite_cmd import CompositeCmd
from kernbench.components.pe.composite_plan import split
from kernbench.tl import TLError, record
from kernbench.tl.recipes import RECIPES, Recipe, Step
from kernbench.topology import compile_spec, spec_from_dict

TILE = (32, 64, 32)
MERGE_KINDS = ["rmax", "max_elem", "exp_diff", "exp_diff", "rsum", "fma", "mul_bcast", "copy"]


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _ok(req):
    assert req.error is None, req.error
    return req


def merge_reference(s, m, den, o, v):
    m_new = np.maximum(m, s.max(axis=1, keepdims=True))
    c = np.exp(m - m_new)
    p = np.exp(s - m_new)
    return m_new, den * c + p.sum(axis=1, keepdims=True), o * c + p @ v


def _merge_state(rng, g=8, t=64, d=64):
    s = rng.standard_normal((g, t)).astype(np.float32)
    m = rng.standard_normal((g, 1)).astype(np.float32)
    den = rng.uniform(1.0, 3.0, (g, 1)).astype(np.float32)
    o = rng.standard_normal((g, d)).astype(np.float32)
    v = rng.standard_normal((t, d)).astype(np.float16)
    return s, m, den, o, v


# ---------------------------------------------------------------- lowering (command-list mode)
def test_legacy_call_lowers_to_one_gemm_plus_epilogue_ops(graph):
    def kernel(tl):
        a, b = tl.zeros((64, 32), "float16"), tl.zeros((32, 128), "float16")
        tl.composite(a, b, epilogue=[{"op": "scale", "value": 2.0}, {"op": "relu", "scope": "once"}])

    cmd = record(kernel, spec=graph.spec)[-1]
    assert isinstance(cmd, CompositeCmd)
    assert [op.kind for op in cmd.ops] == ["gemm", "scale", "relu"]
    assert [op.scope for op in cmd.ops] == ["kernel", "output_tile", "kernel"]
    gemm = cmd.ops[0]
    assert gemm.extra == {"m": 64, "n": 128, "k": 32}
    assert cmd.rw_handles == (gemm.out,)
    pipe = split(cmd, TILE)
    assert pipe.pre == () and pipe.driver is gemm and [o.kind for o in pipe.post] == ["relu"]
    assert pipe.plan.variant == "load_load"


def _merge_kernel(tl, v_arg, seen=None):
    s = tl.zeros((8, 64))
    m, den, o = tl.full((8, 1), -1.0), tl.zeros((8, 1)), tl.zeros((8, 64))
    out = tl.composite(prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": den, "O": o}],
                       op="gemm", b=tl.ref(v_arg), out=o, epilogue=[{"op": "add", "other": o}])
    if seen is not None:
        seen.update(s=s, m=m, l=den, o=o, out=out)


def test_softmax_merge_lowers_to_ten_ops_with_state_as_read_write_handles(graph):
    from kernbench.tl import TensorArg
    from kernbench.topology import AddressResolver

    v = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (64, 64), "float16")
    seen = {}
    cmd = record(lambda tl: _merge_kernel(tl, v, seen), spec=graph.spec)[-1]
    assert [op.kind for op in cmd.ops] == [*MERGE_KINDS, "gemm", "add"]
    assert all(op.scope == "kernel" for op in cmd.ops[:9]) and cmd.ops[9].scope == "output_tile"
    assert [h.addr for h in cmd.rw_handles] == [seen["m"].addr, seen["l"].addr, seen["o"].addr]
    assert seen["out"] is seen["o"]  # the returned handle is the in-place output
    # every operand and output is a concrete address; P (exp_diff #2's output) feeds the GEMM as `a`
    assert all(isinstance(x.addr, int) for op in cmd.ops for x in (*op.operands.values(), op.out))
    p = cmd.ops[3].out
    assert cmd.ops[8].operands["a"] == p and p.shape == (8, 64) and p.pinned
    assert cmd.ops[8].operands["b"].space == "hbm"
    assert cmd.logical_bytes < graph.spec.pe.cost_model.max_composite_logical_bytes
    pipe = split(cmd, TILE)
    assert [o.kind for o in pipe.pre] == MERGE_KINDS and [o.kind for o in pipe.tile_ops] == ["add"]


def test_dma_reads_follow_operand_space(graph):
    """A streamed (HBM) GEMM operand gets a DMA_READ step per tile; a pinned (TCM) one gets none."""
    from kernbench.components.tiling import Stage
    from kernbench.tl import TensorArg
    from kernbench.topology import AddressResolver

    b = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (32, 128), "float16")
    cmds = {}

    def kernel(tl):
        a = tl.zeros((64, 32), "float16")
        cmds["ref"] = tl.composite(a, tl.ref(b))
        cmds["pinned"] = tl.composite(a, tl.zeros((32, 128), "float16"))

    recorded = [c for c in record(kernel, spec=graph.spec) if isinstance(c, CompositeCmd)]
    streamed, pinned = (split(c, TILE).plan for c in recorded)
    assert [s.operand for s in streamed.steps(Stage.DMA_READ, include_preload=False)] == ["b"] * streamed.n_tiles
    assert pinned.steps(Stage.DMA_READ, include_preload=False) == ()
    assert streamed.steps(Stage.DMA_WRITE) == pinned.steps(Stage.DMA_WRITE) == ()  # outputs stay in TCM


def test_the_scheduler_never_imports_recipes():
    code = ("import sys; import kernbench.components.pe.scheduler, kernbench.components.pe.composite_run; "
            "print('kernbench.tl.recipes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- validation errors (D6)
def test_two_gemms_are_rejected_at_emit(graph, monkeypatch):
    monkeypatch.setitem(RECIPES, "mm_first", Recipe("mm_first", {"x": "R", "y": "R"},
                                                    (Step("gemm", ("x", "y"), "z"),), primary_out="z",
                                                    primary_dtype_from="x"))

    def kernel(tl):
        x, y = tl.zeros((32, 32), "float16"), tl.zeros((32, 32), "float16")
        tl.composite(prologue=[{"op": "mm_first", "x": x, "y": y}], op="gemm", b=y)

    with pytest.raises(TLError, match="at most one GEMM"):
        record(kernel, spec=graph.spec)


def test_auto_bind_conflict_is_rejected(graph):
    def kernel(tl):
        s, m, den, o = tl.zeros((8, 64)), tl.zeros((8, 1)), tl.zeros((8, 1)), tl.zeros((8, 64))
        tl.composite(prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": den, "O": o}],
                     op="gemm", a=tl.zeros((8, 64)), b=tl.zeros((64, 64)), out=o)

    with pytest.raises(TLError, match="auto-bind conflict"):
        record(kernel, spec=graph.spec)


def test_hbm_operand_to_a_prologue_recipe_is_rejected(graph):
    from kernbench.tl import TensorArg
    from kernbench.topology import AddressResolver

    s_hbm = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (8, 64), "float32")

    def kernel(tl):
        m, den, o = tl.zeros((8, 1)), tl.zeros((8, 1)), tl.zeros((8, 64))
        tl.composite(prologue=[{"op": "softmax_merge", "s": tl.ref(s_hbm), "m": m, "l": den, "O": o}],
                     op="gemm", b=tl.zeros((64, 64)), out=o)

    with pytest.raises(TLError, match="operand 's' is in HBM"):
        record(kernel, spec=graph.spec)


@pytest.mark.parametrize(("change", "match"), [
    ({"m": (1, 1)}, r"writes a \(8, 1\) result of 'copy' into 'm'"),
    ({"m": (8, 2)}, "do not broadcast"),
    ({"O": (4, 64)}, "do not broadcast"),
])
def test_recipe_shape_mismatches_are_rejected(graph, change, match):
    shapes = {"s": (8, 64), "m": (8, 1), "l": (8, 1), "O": (8, 64), **change}

    def kernel(tl):
        h = {k: tl.zeros(v) for k, v in shapes.items()}
        tl.composite(prologue=[{"op": "softmax_merge", **h}])

    with pytest.raises(TLError, match=match):
        record(kernel, spec=graph.spec)


def test_recipe_operand_set_must_match(graph):
    def kernel(tl):
        tl.composite(prologue=[{"op": "softmax_merge", "s": tl.zeros((8, 64))}])

    with pytest.raises(TLError, match="takes operands s, m, l, O"):
        record(kernel, spec=graph.spec)


# ---------------------------------------------------------------- data mode
def test_softmax_merge_with_pv_matches_the_online_softmax_step(graph):
    rng = np.random.default_rng(7)
    s, m, den, o, v = _merge_state(rng)
    eng, args = deploy(graph, [s, m, den, o, v, np.zeros((8, 64), np.float32), np.zeros((8, 1), np.float32),
                               np.zeros((8, 1), np.float32)])

    def kernel(tl, s_, m_, l_, o_, v_, o_out, m_out, l_out):
        S, M, L, acc = (tl.load(x) for x in (s_, m_, l_, o_))
        tl.composite(prologue=[{"op": "softmax_merge", "s": S, "m": M, "l": L, "O": acc}],
                     op="gemm", b=v_, out=acc, epilogue=[{"op": "add", "other": acc}])
        tl.store(o_out, acc)  # reading the accumulator waits for the composite
        tl.store(m_out, M)
        tl.store(l_out, L)

    _ok(launch_on_pe0(eng, kernel, args))
    want_m, want_l, want_o = merge_reference(s, m, den, o, v.astype(np.float32))
    read = eng.memory.read_array
    np.testing.assert_allclose(read(args[5].addr.encode(), (8, 64), "float32"), want_o, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(read(args[6].addr.encode(), (8, 1), "float32"), want_m, rtol=1e-6)
    np.testing.assert_allclose(read(args[7].addr.encode(), (8, 1), "float32"), want_l, rtol=1e-5)


def test_a_prologue_only_composite_returns_the_primary_output(graph):
    rng = np.random.default_rng(3)
    s, m, den, o, _ = _merge_state(rng, g=4, t=32, d=16)
    eng, args = deploy(graph, [s, m, den, o, np.zeros((4, 32), np.float32)])

    def kernel(tl, s_, m_, l_, o_, p_out):
        S, M, L, acc = (tl.load(x) for x in (s_, m_, l_, o_))
        p = tl.composite(prologue=[{"op": "softmax_merge", "s": S, "m": M, "l": L, "O": acc}])
        tl.store(p_out, p)

    _ok(launch_on_pe0(eng, kernel, args))
    m_new = np.maximum(m, s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(eng.memory.read_array(args[4].addr.encode(), (4, 32), "float32"),
                               np.exp(s - m_new), rtol=1e-5)


def test_output_handle_feeds_later_ops_and_they_wait_for_it(graph):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 128)).astype(np.float16)
    eng, args = deploy(graph, [a, b, np.zeros((64, 128), np.float32)])

    def kernel(tl, a_, b_, c_):
        prod = tl.composite(a_, b_)  # streams A and B; the result lands in TCM scratch
        tl.store(c_, tl.exp(prod * 0.1))

    _ok(launch_on_pe0(eng, kernel, args))
    want = np.exp((a.astype(np.float32) @ b.astype(np.float32)) * 0.1)
    np.testing.assert_allclose(eng.memory.read_array(args[2].addr.encode(), (64, 128), "float32"), want,
                               rtol=2e-3, atol=2e-3)
    recs = eng.oplog.records
    comp = next(r for r in recs if r.op_name == "composite")
    mul = next(r for r in recs if r.op_name == "mul")
    assert mul.t_start >= comp.t_end


def test_out_ptr_writes_hbm(graph):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    eng, args = deploy(graph, [a, np.zeros((32, 64), np.float32)])

    def kernel(tl, a_, c_):
        tl.wait(tl.composite("exp", a_, out_ptr=c_.addr.encode()))

    _ok(launch_on_pe0(eng, kernel, args))
    np.testing.assert_allclose(eng.memory.read_array(args[1].addr.encode(), (32, 64), "float32"),
                               np.exp(a.astype(np.float32)), rtol=2e-3)


def test_composite_operands_may_be_blocks_of_hbm_tensors(graph):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((40, 96)).astype(np.float16)
    b = rng.standard_normal((96, 200)).astype(np.float16)
    eng, args = deploy(graph, [a, b, np.zeros((40, 200), np.float32)])

    def kernel(tl, a_, b_, c_):
        A, B, C = tl.ref(a_), tl.ref(b_), tl.ref(c_)
        tl.wait(tl.composite(A[8:40, 0:64], B[0:64, 100:164], C[0:32, 36:100]))

    _ok(launch_on_pe0(eng, kernel, args))
    got = eng.memory.read_array(args[2].addr.encode(), (40, 200), "float32")
    want = a[8:40, 0:64].astype(np.float32) @ b[0:64, 100:164].astype(np.float32)
    np.testing.assert_allclose(got[0:32, 36:100], want, rtol=2e-3, atol=2e-3)
    assert not got[:, :36].any() and not got[32:, :].any()  # nothing outside the output block


# ---------------------------------------------------------------- ordering
def _composites(eng):
    return [r for r in eng.oplog.records if r.op_name == "composite"]


def test_composites_sharing_a_read_write_handle_run_in_order_without_interleaving(graph):
    eng, _ = deploy(graph, [])

    def kernel(tl):
        a, b = tl.zeros((128, 64), "float16"), tl.zeros((64, 128), "float16")
        o = tl.zeros((128, 128))
        tl.composite(a, b, o)
        tl.composite(a, b, o, epilogue=[{"op": "add", "other": o}])  # updates o: must follow the first
        tl.wait()

    _ok(launch_on_pe0(eng, kernel, []))
    first, second = _composites(eng)
    assert second.t_start >= first.t_end
    gemms = [r for r in eng.oplog.records if r.op_name == "gemm"]
    n = len(gemms) // 2
    assert max(r.t_end for r in gemms[:n]) <= min(r.t_start for r in gemms[n:])


def test_independent_composites_overlap(graph):
    eng, _ = deploy(graph, [])

    def kernel(tl):
        a, b = tl.zeros((128, 64), "float16"), tl.zeros((64, 128), "float16")
        tl.composite(a, b)
        tl.composite(a, b)  # reads the same inputs, writes its own output: no hazard
        tl.wait()

    _ok(launch_on_pe0(eng, kernel, []))
    first, second = _composites(eng)
    assert second.t_start < first.t_end


def test_a_waiting_composite_holds_back_later_ones(graph):
    """Strict FIFO: the third composite conflicts with nothing in flight, but queues behind the second."""
    eng, _ = deploy(graph, [])

    def kernel(tl):
        a, b = tl.zeros((128, 64), "float16"), tl.zeros((64, 128), "float16")
        o = tl.zeros((128, 128))
        tl.composite(a, b, o)
        tl.composite(a, b, o)
        tl.composite(a, b)
        tl.wait()

    _ok(launch_on_pe0(eng, kernel, []))
    first, second, third = _composites(eng)
    assert second.t_start >= first.t_end and third.t_start >= first.t_end


def test_prologue_runs_before_the_loop_streams_anything(graph):
    rng = np.random.default_rng(9)
    *_, v = _merge_state(rng)
    eng, args = deploy(graph, [v])
    _ok(launch_on_pe0(eng, lambda tl, v_: (_merge_kernel(tl, v_), tl.wait()), args))
    recs = eng.oplog.records
    copy = next(r for r in recs if r.op_name == "math" and r.params.get("op") == "copy")
    reads = [r for r in recs if r.op_name == "dma_read"]
    assert reads and min(r.t_start for r in reads) >= copy.t_end


def test_writing_a_tensor_a_composite_reads_waits_for_it(graph):
    """copy_to into a composite's input while the composite runs would corrupt it; the kernel waits instead."""
    rng = np.random.default_rng(10)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    eng, args = deploy(graph, [a, b, np.zeros((64, 64), np.float32)])

    def kernel(tl, a_, b_, c_):
        A, B = tl.load(a_), tl.load(b_)
        prod = tl.composite(A, B)
        tl.copy_to(A, tl.zeros((64, 64), "float16"))  # overwrite A: must wait for the composite
        tl.store(c_, prod)

    _ok(launch_on_pe0(eng, kernel, args))
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(eng.memory.read_array(args[2].addr.encode(), (64, 64), "float32"), want,
                               rtol=2e-3, atol=2e-3)


def test_leaving_a_scope_waits_for_composites_on_its_scratch(graph):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    eng, args = deploy(graph, [a, np.zeros((64, 64), np.float32)])
    seen = {}

    def kernel(tl, a_, c_):
        out = tl.zeros((64, 64))
        with tl.scratch_scope():
            tmp = tl.load(a_)
            tl.composite("exp", tmp, out)
        seen["left"] = tl.now_ns
        tl.store(c_, out)

    _ok(launch_on_pe0(eng, kernel, args))
    comp = _composites(eng)[0]
    assert seen["left"] >= comp.t_end
    np.testing.assert_allclose(eng.memory.read_array(args[1].addr.encode(), (64, 64), "float32"),
                               np.exp(a.astype(np.float32)), rtol=2e-3)


def test_loading_what_a_composite_writes_to_hbm_waits_for_it(graph):
    rng = np.random.default_rng(12)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 32)).astype(np.float16)
    eng, args = deploy(graph, [a, b, np.zeros((32, 32), np.float32), np.zeros((32, 32), np.float32)])

    def kernel(tl, a_, b_, c_, d_):
        tl.composite(a_, b_, c_)  # writes C in HBM, asynchronously
        tl.store(d_, tl.load(c_) * 1.0)  # reading C back must see the product

    _ok(launch_on_pe0(eng, kernel, args))
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(eng.memory.read_array(args[3].addr.encode(), (32, 32), "float32"), want,
                               rtol=2e-3, atol=2e-3)


def test_copy_into_a_buffer_still_being_loaded_waits_for_the_load(graph):
    eng, args = deploy(graph, [np.ones((64,), np.float32), np.zeros((64,), np.float32)])

    def kernel(tl, src, out):
        buf = tl.zeros((64,))
        tl.load(src, out=buf)  # lazy: still filling buf
        tl.copy_to(buf, tl.full((64,), 5.0))  # must land after the load, not before
        tl.store(out, buf)

    _ok(launch_on_pe0(eng, kernel, args))
    assert (eng.memory.read_array(args[1].addr.encode(), (64,), "float32") == 5.0).all()


def test_prologue_only_composites_return_distinct_tensors(graph):
    eng, _ = deploy(graph, [])
    got = {}

    def kernel(tl):
        m, den, o = tl.full((4, 1), 2.0), tl.full((4, 1), 1.0), tl.zeros((4, 8))
        p1 = tl.composite(prologue=[{"op": "softmax_merge", "s": tl.full((4, 8), 1.0), "m": m, "l": den, "O": o}])
        p2 = tl.composite(prologue=[{"op": "softmax_merge", "s": tl.full((4, 8), 9.0), "m": m, "l": den, "O": o}])
        tl.wait()
        got["p1"], got["p2"] = p1.addr, p2.addr

    _ok(launch_on_pe0(eng, kernel, []))
    assert got["p1"] != got["p2"]
    np.testing.assert_allclose(eng.memory.read_array(got["p1"], (4, 8), "float32"), np.exp(1.0 - 2.0), rtol=1e-6)
