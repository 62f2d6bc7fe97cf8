"""Kernel execution: launch fan-out with the D5 barrier, tl numerics against numpy, errors."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components import KernelError, default_registry
from kernbench.components.launch import KernelLaunchMsg
from kernbench.sim import GraphEngine, MemoryWriteMsg
from kernbench.tl import ScratchOverflowError, TensorArg, TLError
from kernbench.topology import AddressResolver, compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _engine(graph, data=True):
    return GraphEngine(graph, default_registry(), data=data)


def _put(eng, addr, arr):
    eng.submit(MemoryWriteMsg(addr, arr.nbytes, arr.tobytes() if eng.data else None))


def _launch(eng, fn, targets, name="k"):
    req = eng.submit(KernelLaunchMsg(name, fn, tuple(targets)))
    eng.run()
    return req


def test_d5_every_pe_starts_together_and_none_arrives_late(graph):
    eng = _engine(graph, data=False)

    def kernel(tl):
        tl.cycles(5 * (tl.program_id(0) + 1))

    targets = [((0, c, p), ()) for c in (0, 3, 12, 15) for p in range(8)]
    req = _launch(eng, kernel, targets)
    assert req.error is None
    res = req.result
    starts = set(res.pe_exec_start_ns.values())
    assert len(res.reports) == 32 and len(starts) == 1
    (target,) = res.target_start_ns.values()
    assert starts == {target}
    assert all(r.arrival_ns <= target + 1e-9 for r in res.reports.values())
    # the farthest PE arrives exactly at the barrier: the IO_CPU predicted its two-leg dispatch exactly
    assert max(r.arrival_ns for r in res.reports.values()) == pytest.approx(target)
    # program id 0 (PE among the targeted PEs of a cube) sets the cycles: 5 ns per step at 1 GHz
    assert sorted({round(v, 6) for v in res.pe_exec_ns.values()}) == [5.0 * (i + 1) + 0.0 for i in range(8)]


def test_d5_across_two_sips(graph):
    eng = _engine(graph, data=False)
    req = _launch(eng, lambda tl: None, [((0, 0, 0), ()), ((1, 15, 7), ())])
    res = req.result
    assert len(set(res.pe_exec_start_ns.values())) == 2  # each SIP's IO_CPU stamps its own barrier
    for r in res.reports.values():
        assert r.arrival_ns <= res.target_start_ns[int(r.pe[3])] + 1e-9


def test_dot_and_store_match_numpy(graph):
    eng = _engine(graph)
    res = AddressResolver(graph)
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((40, 70)).astype(np.float16)
    b_np = rng.standard_normal((70, 33)).astype(np.float16)
    a, b, c = (res.hbm_addr(0, 2, 1, off) for off in (0, 1 << 20, 2 << 20))
    _put(eng, a, a_np)
    _put(eng, b, b_np)
    eng.run()

    def kernel(tl, A, B, C):
        tl.store(C, tl.dot(tl.load(A), tl.load(B)))

    args = (TensorArg(a, a_np.shape, "float16"), TensorArg(b, b_np.shape, "float16"),
            TensorArg(c, (40, 33), "float32"))
    req = _launch(eng, kernel, [((0, 2, 1), args)])
    assert req.error is None
    out = eng.memory.read_array(c.encode(), (40, 33), "float32")
    np.testing.assert_allclose(out, a_np.astype(np.float32) @ b_np.astype(np.float32), rtol=1e-5, atol=1e-5)


def _math_kernel(tl, X, Y, OUTS):
    x, y = tl.load(X), tl.load(Y)
    results = [
        tl.exp(x), tl.log(tl.abs(x) + 1.0), tl.sqrt(tl.abs(x)), tl.sigmoid(x), tl.cos(x), tl.sin(x),
        tl.maximum(x, y), tl.minimum(x, 0.25), tl.fma(x, y, x), tl.clamp(x, -0.5, 0.5),
        tl.where(tl.maximum(x, 0.0), x, y), tl.softmax(x, axis=-1), tl.sum(x, axis=1), tl.max(x, axis=0),
        tl.min(x, axis=1), x * y - x / 2.0, tl.trans(x), 3.0 - x,
    ]
    for out_arg, r in zip(OUTS, results, strict=True):
        tl.store(out_arg, r)


def _math_reference(x, y):
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    e = np.exp(x32 - x32.max(axis=-1, keepdims=True))
    refs = [
        np.exp(x32), np.log(np.abs(x32) + 1.0), np.sqrt(np.abs(x32)), 1 / (1 + np.exp(-x32)), np.cos(x32),
        np.sin(x32), np.maximum(x32, y32), np.minimum(x32, 0.25), x32 * y32 + x32, np.clip(x32, -0.5, 0.5),
        np.where(np.maximum(x32, 0) != 0, x32, y32), e / e.sum(axis=-1, keepdims=True), x32.sum(axis=1),
        x32.max(axis=0), x32.min(axis=1), x32 * y32 - x32 / 2.0, x32.T, 3.0 - x32,
    ]
    return [r.astype(np.float16) for r in refs]


def test_math_and_reductions_match_numpy(graph):
    eng = _engine(graph)
    res = AddressResolver(graph)
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal((16, 24)).astype(np.float16)
    y_np = rng.standard_normal((16, 24)).astype(np.float16)
    xa, ya = res.hbm_addr(0, 0, 4, 0), res.hbm_addr(0, 0, 4, 1 << 16)
    _put(eng, xa, x_np)
    _put(eng, ya, y_np)
    eng.run()
    refs = _math_reference(x_np, y_np)
    outs = tuple(TensorArg(res.hbm_addr(0, 0, 4, (2 + i) << 16), r.shape, "float16") for i, r in enumerate(refs))
    req = _launch(eng, _math_kernel, [((0, 0, 4), (TensorArg(xa, x_np.shape, "float16"),
                                                    TensorArg(ya, y_np.shape, "float16"), outs))])
    assert req.error is None
    for arg, ref in zip(outs, refs, strict=True):
        got = eng.memory.read_array(arg.addr.encode(), ref.shape, "float16")
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_data_mode_does_not_change_timing(graph):
    logs = []
    for data in (False, True):
        eng = _engine(graph, data=data)
        res = AddressResolver(graph)
        x_np = np.ones((16, 24), np.float16)
        xa, ya = res.hbm_addr(0, 0, 4, 0), res.hbm_addr(0, 0, 4, 1 << 16)
        _put(eng, xa, x_np)
        _put(eng, ya, x_np)
        eng.run()
        refs = _math_reference(x_np, x_np)
        outs = tuple(TensorArg(res.hbm_addr(0, 0, 4, (2 + i) << 16), r.shape, "float16")
                     for i, r in enumerate(refs))
        req = _launch(eng, _math_kernel, [((0, 0, 4), (TensorArg(xa, (16, 24), "float16"),
                                                        TensorArg(ya, (16, 24), "float16"), outs))])
        logs.append((req.latency_ns, [(r.t_start, r.t_end, r.component_id, r.op_name) for r in eng.oplog.records]))
    assert logs[0] == logs[1]


def _expect_kernel_error(graph, fn, args=(), match=""):
    eng = _engine(graph, data=False)
    req = _launch(eng, fn, [((0, 1, 2), args)], name="bad")
    assert isinstance(req.error, KernelError)
    msg = str(req.error)
    assert "'bad'" in msg and "sip0.cube1.pe2" in msg and match in msg
    return msg


def test_a_raising_kernel_names_kernel_pe_and_message(graph):
    def kernel(tl):
        raise ValueError("boom at step 3")

    _expect_kernel_error(graph, kernel, match="ValueError: boom at step 3")


def test_dot_shape_mismatch(graph):
    def kernel(tl):
        tl.dot(tl.zeros((4, 8)), tl.zeros((4, 8)))

    _expect_kernel_error(graph, kernel, match="do not form [M, K] @ [K, N]")


def test_store_shape_mismatch(graph):
    dst = TensorArg(AddressResolver(graph).hbm_addr(0, 1, 2), (4, 4), "float32")

    def kernel(tl, D):
        tl.store(D, tl.zeros((4, 8)))

    _expect_kernel_error(graph, kernel, (dst,), match="destination is (4, 4) float32")


def test_scratch_overflow(graph):
    def kernel(tl):
        tl.zeros((1024, 1024))  # 4 MiB of f32 in a 1 MiB scratch

    msg = _expect_kernel_error(graph, kernel, match=ScratchOverflowError.__name__)
    assert "1048576" in msg


def test_handle_from_another_kernel_is_rejected(graph):
    leaked = []

    def first(tl):
        leaked.append(tl.zeros((4,)))

    def second(tl):
        tl.exp(leaked[0])

    eng = _engine(graph, data=False)
    _launch(eng, first, [((0, 0, 0), ())], name="first")
    req = _launch(eng, second, [((0, 0, 1), ())], name="second")
    assert isinstance(req.error, KernelError) and "created by another kernel" in str(req.error)
    assert TLError.__name__ in str(req.error)


def test_hbm_operand_must_be_loaded_first(graph):
    arg = TensorArg(AddressResolver(graph).hbm_addr(0, 1, 2), (4, 4), "float16")

    def kernel(tl, A):
        tl.exp(tl.ref(A))

    _expect_kernel_error(graph, kernel, (arg,), match="tl.load it into the TCM first")


def test_gemm_time_counts_full_tiles(graph):
    """A 32x32x32 dot uses half of one 32x64x32 tile but costs the full tile: 2*32*64*32 / 8e3 ns."""
    eng = _engine(graph, data=False)

    def kernel(tl):
        tl.dot(tl.zeros((32, 32), "float16"), tl.zeros((32, 32), "float16"))

    _launch(eng, kernel, [((0, 0, 0), ())])
    (gemm,) = [r for r in eng.oplog.records if r.op_name == "gemm_float16"]
    assert gemm.t_end - gemm.t_start == pytest.approx(2 * 32 * 64 * 32 / 8e3)


def test_command_list_mode_records_without_time(graph):
    from kernbench.components.pe.commands import ComputeCmd, DmaReadCmd, DmaWriteCmd
    from kernbench.components.pe.composite_cmd import CompositeCmd
    from kernbench.components.pe.composite_plan import split
    from kernbench.tl import record

    res = AddressResolver(graph)
    a = TensorArg(res.hbm_addr(0, 0, 0), (64, 32), "float16")
    b = TensorArg(res.hbm_addr(0, 0, 0, 1 << 20), (32, 128), "float16")
    c = TensorArg(res.hbm_addr(0, 0, 0, 2 << 20), (64, 128), "float32")

    def kernel(tl, a, b, c):
        x = tl.load(a)
        tl.store(c, tl.dot(x, tl.load(b)) * 2.0)
        tl.wait(tl.composite(x, b, c))

    cmds = record(kernel, a, b, c, spec=graph.spec, pe=(0, 0, 0))
    assert [type(c_).__name__ for c_ in cmds] == [
        "DmaReadCmd", "DmaReadCmd", "ComputeCmd", "ComputeCmd", "DmaWriteCmd", "CompositeCmd"]
    assert isinstance(cmds[0], DmaReadCmd) and cmds[0].nbytes == 64 * 32 * 2
    gemm = cmds[2]
    # the default tile is tm 32 x tn 32 x tk 64: M 64 -> 2 blocks, N 128 -> 4, K 32 -> 1
    assert isinstance(gemm, ComputeCmd) and gemm.engine == "gemm" and gemm.work == 2 * 4 * 1
    assert isinstance(cmds[4], DmaWriteCmd) and cmds[4].nbytes == 64 * 128 * 4
    comp = cmds[5]
    assert isinstance(comp, CompositeCmd)
    plan = split(comp, (32, 32, 64)).plan
    assert plan.variant == "load_ref" and plan.n_tiles == 8


def test_compute_on_an_unloaded_argument_says_to_load_it(graph):
    arg = TensorArg(AddressResolver(graph).hbm_addr(0, 1, 2), (4, 4), "float16")

    def kernel(tl, a):
        tl.exp(a)

    _expect_kernel_error(graph, kernel, (arg,), match="is a tensor argument in HBM; tl.load it first")


def test_tl_imports_on_its_own():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import kernbench.tl"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_comm_virtual_channel_does_not_queue_behind_compute(graph):
    from kernbench.components.pe.commands import CommandError, DmaWriteCmd
    from kernbench.sim.engine import Request
    from kernbench.topology.address import PhysAddr

    res = AddressResolver(graph)
    finish = {}
    for vc in ("compute", "comm"):
        eng = GraphEngine(graph, default_registry(), record_hops=False)
        dma = eng.components["sip0.cube0.pe0.pe_dma"]
        tcm = PhysAddr(0, 0, "tcm", 0, 0).encode()
        owner = Request(0, None, 0.0, eng.env.event())
        dma.enqueue(DmaWriteCmd(tcm, res.hbm_addr(0, 0, 1).encode(), 1 << 20, eng.env.event()), owner)
        dma.enqueue(DmaWriteCmd(tcm, res.hbm_addr(0, 0, 2).encode(), 4096, eng.env.event(), vc=vc), owner)
        eng.run()
        times = {r.params["nbytes"]: r.t_end for r in eng.oplog.records if r.op_name == "dma_write"}
        finish[vc] = times
    # on the same (compute) channel the small write waits for the 1 MiB one; on the comm channel it does not
    assert finish["compute"][4096] > finish["compute"][1 << 20]
    assert finish["comm"][4096] < finish["comm"][1 << 20]
    with pytest.raises(CommandError, match="unknown DMA virtual channel 'bulk'"):
        DmaWriteCmd(0, 0, 1, None, vc="bulk")


def test_a_kernel_waiting_forever_is_a_deadlock_naming_the_pe(graph):
    from kernbench.components.pe.cpu import PeCpu
    from kernbench.sim.errors import DeadlockError

    class Stuck:  # a minimal kernel language over the PE_CPU's host protocol
        def __init__(self, slot):
            self.slot = slot
            self.waiting = "an event nothing triggers"
            self.pending_events = []

    def kernel(ctx):
        ctx.slot.suspend(ctx.slot.event())  # an event nothing will ever trigger

    eng = GraphEngine(graph, default_registry().replace("pe_cpu", PeCpu.with_language(Stuck)))
    req = eng.submit(KernelLaunchMsg("stuck", kernel, (((0, 2, 3), ()),)))
    with pytest.raises(DeadlockError) as info:
        eng.wait(req)
    msg = str(info.value)
    assert "KernelLaunchMsg" in msg
    assert "sip0.cube2.pe3 runs kernel 'stuck' waiting for an event nothing triggers" in msg
