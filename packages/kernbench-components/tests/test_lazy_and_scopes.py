"""Lazy loads, scratch scopes, copy_to, broadcast and repeat."""

from __future__ import annotations

import numpy as np
import pytest
from components_testkit import deploy, launch_on_pe0

from kernbench.components import KernelError, default_registry
from kernbench.sim import GraphEngine
from kernbench.tl import TensorArg
from kernbench.topology import AddressResolver, compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


_setup = deploy
_run = launch_on_pe0


def _body(req):
    return next(iter(req.result.pe_exec_ns.values()))


# ---------------------------------------------------------------- lazy loads

def test_a_load_overlaps_independent_work(graph):
    """load 256 KiB (~2 µs on the 128 GB/s slice) while a 64-tile dot (~1 µs of GEMM) runs."""
    big = np.zeros((512, 256), np.float16)
    x = np.zeros((64, 256), np.float16)
    y = np.zeros((256, 256), np.float16)
    times = {}
    for mode in ("overlap", "serial"):
        eng, args = _setup(graph, [big, x, y], data=False)

        def kernel(tl, big, x, y, mode=mode):
            a, b = tl.load(x), tl.load(y)
            tl.wait(a)
            tl.wait(b)
            t0 = tl.load(big)
            if mode == "serial":
                tl.wait(t0)
            tl.dot(a, b)
            tl.wait(t0)

        times[mode] = _body(_run(eng, kernel, args))
    loads = [r for r in eng.oplog.records if r.op_name == "dma_read"]
    load_ns = loads[-1].t_end - loads[-1].t_start
    gemm_ns = next(r for r in eng.oplog.records if r.op_name.startswith("gemm_"))
    assert times["overlap"] < times["serial"]
    assert times["serial"] - times["overlap"] > 0.5 * min(load_ns, gemm_ns.t_end - gemm_ns.t_start)


def test_a_load_used_at_once_costs_what_a_blocking_load_did(graph):
    x = np.zeros((64, 64), np.float16)
    eng, args = _setup(graph, [x], data=False)
    req = _run(eng, lambda tl, x: tl.exp(tl.load(x)), args)
    (load,) = [r for r in eng.oplog.records if r.op_name == "dma_read"]
    (exp,) = [r for r in eng.oplog.records if r.op_name == "exp"]
    fetch = next(r for r in eng.oplog.records if r.op_name == "fetch")
    assert fetch.t_start >= load.t_end  # the consumer waited for the data
    assert _body(req) > load.t_end - load.t_start
    assert exp.t_end > load.t_end


def test_two_loads_in_flight_resolve_independently_and_serialise(graph):
    a_np = np.arange(64, dtype=np.float16).reshape(8, 8)
    b_np = -np.arange(64, dtype=np.float16).reshape(8, 8)
    eng, args = _setup(graph, [a_np, b_np, np.zeros((8, 8), np.float16), np.zeros((8, 8), np.float16)])

    def kernel(tl, a, b, oa, ob):
        x, y = tl.load(a), tl.load(b)
        tl.store(ob, y)
        tl.store(oa, x)

    _run(eng, kernel, args)
    np.testing.assert_array_equal(eng.memory.read_array(args[2].addr.encode(), (8, 8), "float16"), a_np)
    np.testing.assert_array_equal(eng.memory.read_array(args[3].addr.encode(), (8, 8), "float16"), b_np)
    reads = sorted((r for r in eng.oplog.records if r.op_name == "dma_read"), key=lambda r: r.t_start)
    assert len(reads) == 2 and reads[1].t_start >= reads[0].t_end  # one read channel


def test_kernel_end_waits_for_an_unused_load(graph):
    x = np.zeros((256, 256), np.float16)
    eng, args = _setup(graph, [x], data=False)
    req = _run(eng, lambda tl, x: tl.load(x), args)
    (load,) = [r for r in eng.oplog.records if r.op_name == "dma_read"]
    report = next(iter(req.result.reports.values()))
    assert report.exec_start_ns + report.exec_ns >= load.t_end


# ---------------------------------------------------------------- scratch scopes

def _flash_like(tl, x, out, n_tiles, scoped):
    """A running sum over n tiles of 8 KiB temporaries: O = sum_i exp(x) * i."""
    acc = tl.zeros((32, 64), "float32")  # persistent, allocated outside any scope
    tile = tl.load(x)
    for i in range(n_tiles):
        if scoped:
            with tl.scratch_scope():
                tmp = tl.exp(tile) * float(i)
                tl.copy_to(acc, acc + tmp)
        else:
            tmp = tl.exp(tile) * float(i)
            tl.copy_to(acc, acc + tmp)
    tl.store(out, acc)
    return tl.scratch_used


def test_scoped_loop_keeps_scratch_bounded_and_values_right(graph):
    x_np = (np.arange(32 * 64, dtype=np.float32).reshape(32, 64) % 7 / 10).astype(np.float32)
    peaks = {}
    for scoped in (False, True):
        for n in (3, 12):
            eng, args = _setup(graph, [x_np, np.zeros((32, 64), np.float32)])
            seen = []

            def kernel(tl, x, out, n=n, scoped=scoped, seen=seen):
                seen.append(_flash_like(tl, x, out, n, scoped))

            assert _run(eng, kernel, args).error is None
            peaks[(scoped, n)] = seen[0]
            got = eng.memory.read_array(args[1].addr.encode(), (32, 64), "float32")
            np.testing.assert_allclose(got, np.exp(x_np) * sum(range(n)), rtol=1e-5)
    assert peaks[(True, 3)] == peaks[(True, 12)]  # independent of the number of tiles
    assert peaks[(False, 12)] > peaks[(False, 3)]


def test_scopes_make_a_long_loop_fit(graph):
    x_np = np.zeros((32, 64), np.float32)
    for scoped, ok in ((False, False), (True, True)):
        eng, args = _setup(graph, [x_np, np.zeros((32, 64), np.float32)], data=False)
        req = _run(eng, lambda tl, x, out, s=scoped: _flash_like(tl, x, out, 100, s), args)  # 100 x 24 KiB > 1 MiB
        assert (req.error is None) == ok
        if not ok:
            assert "ScratchOverflowError" in str(req.error)


def test_nested_scopes_rewind_to_their_own_entry(graph):
    marks = []

    def kernel(tl):
        tl.zeros((16,))
        marks.append(tl.scratch_used)
        with tl.scratch_scope():
            tl.zeros((16,))
            marks.append(tl.scratch_used)
            with tl.scratch_scope():
                tl.zeros((64,))
                marks.append(tl.scratch_used)
            marks.append(tl.scratch_used)
        marks.append(tl.scratch_used)

    eng = GraphEngine(graph, default_registry())
    assert _run(eng, kernel, ()).error is None
    assert marks == [64, 128, 384, 128, 64]


def test_using_a_tensor_after_its_scope_is_an_error(graph):
    def kernel(tl):
        with tl.scratch_scope():
            t = tl.zeros((4, 4))
        tl.exp(t)

    req = _run(GraphEngine(graph, default_registry()), kernel, ())
    assert isinstance(req.error, KernelError) and "scratch scope that has exited" in str(req.error)


def test_scope_exit_waits_for_a_load_into_released_scratch(graph):
    x = np.zeros((256, 256), np.float16)
    eng, args = _setup(graph, [x], data=False)
    def kernel(tl, x):
        with tl.scratch_scope():
            tl.load(x)  # never used
        tl.zeros((4,))  # reuses the released scratch

    _run(eng, kernel, args)
    (load,) = [r for r in eng.oplog.records if r.op_name == "dma_read"]
    (fill,) = [r for r in eng.oplog.records if r.op_name == "fill"]
    assert fill.t_start >= load.t_end  # the buffer was not reused while the DMA was writing it


# ---------------------------------------------------------------- copy_to, broadcast, repeat

def test_copy_to_broadcast_repeat_match_numpy(graph):
    v_np = np.arange(4, dtype=np.float16).reshape(1, 4)
    eng, args = _setup(graph, [v_np, np.zeros((3, 4), np.float16), np.zeros((1, 12), np.float16),
                               np.zeros((1, 4), np.float16)])

    def kernel(tl, v, b_out, r_out, c_out):
        x = tl.load(v)
        tl.store(b_out, tl.broadcast(x, (3, 4)))
        tl.store(r_out, tl.repeat(x, axis=1, n=3))
        dst = tl.zeros((1, 4), "float16")
        tl.store(c_out, tl.copy_to(dst, x))

    assert _run(eng, kernel, args).error is None
    read = eng.memory.read_array
    np.testing.assert_array_equal(read(args[1].addr.encode(), (3, 4), "float16"), np.broadcast_to(v_np, (3, 4)))
    np.testing.assert_array_equal(read(args[2].addr.encode(), (1, 12), "float16"), np.repeat(v_np, 3, axis=1))
    np.testing.assert_array_equal(read(args[3].addr.encode(), (1, 4), "float16"), v_np)
    copy = [r for r in eng.oplog.records if r.op_name == "copy"]
    assert len(copy) == 1 and copy[0].op_kind == "math"


@pytest.mark.parametrize(("body", "text"), [
    (lambda tl: tl.copy_to(tl.zeros((2, 2)), tl.zeros((2, 3))), "dst is (2, 2) float32 but src is (2, 3)"),
    (lambda tl: tl.copy_to(tl.zeros((2, 2), "float16"), tl.zeros((2, 2))), "float16 but src is (2, 2) float32"),
    (lambda tl: tl.broadcast(tl.zeros((2, 3)), (4, 2)), "cannot be broadcast to (4, 2)"),
    (lambda tl: tl.repeat(tl.zeros((2, 3)), axis=2, n=2), "axis 2 is out of range"),
])
def test_emit_time_errors(graph, body, text):
    req = _run(GraphEngine(graph, default_registry()), body, ())
    assert isinstance(req.error, KernelError) and text in str(req.error)


def test_copy_to_rejects_hbm(graph):
    arg = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (2, 2), "float32")
    req = _run(GraphEngine(graph, default_registry()), lambda tl, a: tl.copy_to(tl.ref(a), tl.zeros((2, 2))), (arg,))
    assert isinstance(req.error, KernelError) and "dst must be a TCM tensor" in str(req.error)
