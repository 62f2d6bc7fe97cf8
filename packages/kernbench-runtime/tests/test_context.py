"""RuntimeContext end to end: deploy, launch, read back, errors."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components import KernelError
from kernbench.runtime import AllocationError, DPPolicy, RuntimeApiError, RuntimeContext, session
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


@pytest.mark.parametrize("policy", [
    DPPolicy(num_cubes=1, num_pes=1),
    DPPolicy(cube="row_wise", pe="column_wise", num_cubes=3, num_pes=2),
    DPPolicy(cube="column_wise", pe="row_wise", num_cubes=2, num_pes=3, cube_start=5),
])
def test_round_trip(graph, policy):
    arr = np.arange(12 * 10, dtype=np.float16).reshape(12, 10)
    ctx = RuntimeContext(graph, data=True)
    t = ctx.from_numpy(arr, policy)
    np.testing.assert_array_equal(ctx.to_numpy(t), arr)
    assert ctx.now_ns > 0


def test_sharded_gemm_matches_numpy(graph):
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal((130, 72)).astype(np.float16)
    b_np = rng.standard_normal((72, 40)).astype(np.float16)
    with session(graph, data=True) as torch:
        rows = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=4, num_pes=2)
        a = torch.from_numpy(a_np, rows)
        b = torch.from_numpy(b_np, DPPolicy(num_cubes=4, num_pes=2))
        c = torch.empty((130, 40), "float32", rows)

        def mm(tl, a, b, c):
            tl.store(c, tl.dot(tl.load(a), tl.load(b)))

        res = torch.wait(torch.launch("mm", mm, a, b, c))
        assert len(res.reports) == 8 and len(set(res.pe_exec_start_ns.values())) == 1
        np.testing.assert_allclose(torch.to_numpy(c), a_np.astype(np.float32) @ b_np.astype(np.float32),
                                   rtol=1e-4, atol=1e-4)


def test_to_numpy_needs_data_mode(graph):
    ctx = RuntimeContext(graph)
    t = ctx.zeros((4, 4))
    with pytest.raises(RuntimeApiError, match="to_numpy needs real numerics: create the context with data=True"):
        ctx.to_numpy(t)
    with pytest.raises(RuntimeApiError, match="peek needs real numerics: create the context with data=True"):
        ctx.peek(t)


def test_allocation_beyond_capacity_names_size_and_largest_block(graph):
    ctx = RuntimeContext(graph)
    slice_bytes = graph.spec.hbm_slice_bytes
    with pytest.raises(AllocationError) as info:
        ctx.empty((slice_bytes // 2 + 1,), "float16", DPPolicy(num_cubes=1, num_pes=1))
    msg = str(info.value)
    assert str(slice_bytes + 2) in msg and str(slice_bytes) in msg


def test_launch_needs_a_shard_on_every_target(graph):
    ctx = RuntimeContext(graph)
    a = ctx.empty((8, 8), policy=DPPolicy(num_cubes=2, num_pes=1))
    b = ctx.empty((8, 8), policy=DPPolicy(num_cubes=1, num_pes=1))
    with pytest.raises(RuntimeApiError, match=r"tensor argument 1 has no shard on PE sip0\.cube1\.pe0"):
        ctx.launch("k", lambda tl, a, b: None, a, b)


def test_wait_raises_the_kernel_error(graph):
    ctx = RuntimeContext(graph)
    a = ctx.empty((8, 8), policy=DPPolicy(num_cubes=1, num_pes=2))

    def kernel(tl, a):
        if tl.program_id(0) == 1:
            raise RuntimeError("only PE 1 fails")

    with pytest.raises(KernelError, match=r"kernel 'k' failed on sip0\.cube0\.pe1: RuntimeError: only PE 1 fails"):
        ctx.wait(ctx.launch("k", kernel, a))


def test_free_and_cleanup_return_memory(graph):
    ctx = RuntimeContext(graph)
    t = ctx.empty((1024,), policy=DPPolicy(num_cubes=1, num_pes=1))
    alloc = ctx._allocator(0, 0, 0)
    assert alloc.hbm.used > 0
    ctx.cleanup()
    assert alloc.hbm.used == 0 and t.freed
    with pytest.raises(RuntimeApiError, match="freed"):
        ctx.free(t)


def test_bad_device(graph):
    with pytest.raises(RuntimeApiError, match="device 7 does not exist"):
        RuntimeContext(graph, device=7)
