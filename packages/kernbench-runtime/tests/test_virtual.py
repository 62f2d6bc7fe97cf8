"""Virtual addresses: MMU maps through the fabric, translation on every DMA, faults as kernel errors."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components import KernelError
from kernbench.components.launch import KernelLaunchMsg
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.tl import TensorArg
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def test_mmu_maps_travel_the_fabric(graph):
    ctx = RuntimeContext(graph)
    ctx.empty((64, 64), policy=DPPolicy(num_cubes=2, num_pes=2))
    maps = [r for r in ctx.oplog.records if r.op_name == "mmu_map"]
    assert len(maps) == 4 and all(r.t_end > r.t_start for r in maps)
    # the map to cube 1 travels one more UCIe crossing than the map to cube 0
    by_cube = sorted(maps, key=lambda r: r.t_end - r.t_start)
    assert by_cube[0].t_end - by_cube[0].t_start < by_cube[-1].t_end - by_cube[-1].t_start


def test_reading_another_pes_shard_by_virtual_address(graph):
    rows, cols, n = 24, 40, 4  # 24*40*2 = 1920-byte shards: boundaries fall inside pages (sub-page regions)
    x_np = np.arange(n * rows * cols, dtype=np.float16).reshape(n * rows, cols)
    with_policy = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2)
    ctx = RuntimeContext(graph, data=True)
    x = ctx.from_numpy(x_np, with_policy)
    y = ctx.empty((n * rows, cols), "float16", with_policy)

    def kernel(tl, x, y):
        me = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        src = (me + 1) % 4
        tl.store(y, tl.load(tl.global_ref(x)[src * rows:(src + 1) * rows, :]))

    ctx.wait(ctx.launch("k", kernel, x, y))
    np.testing.assert_array_equal(ctx.to_numpy(y), np.roll(x_np, -rows, axis=0))
    reads = [r for r in ctx.oplog.records if r.op_name == "dma_read"]
    assert len(reads) == 4


def test_a_block_crossing_two_shards_faults(graph):
    ctx = RuntimeContext(graph)
    policy = DPPolicy(cube="replicate", pe="row_wise", num_cubes=1, num_pes=2)
    x = ctx.empty((64, 32), policy=policy)

    def kernel(tl, x):
        tl.load(tl.global_ref(x)[16:48, :])  # rows 16..47 span PE 0's and PE 1's shards

    with pytest.raises(KernelError, match="not contiguous"):
        ctx.wait(ctx.launch("k", kernel, x))


def test_unmapped_address_faults(graph):
    ctx = RuntimeContext(graph)
    a = ctx.empty((8, 8), policy=DPPolicy(num_cubes=1, num_pes=1))
    b = ctx.empty((8, 8), policy=DPPolicy(num_cubes=1, num_pes=1, cube_start=3))

    def kernel(tl, b):
        tl.load(tl.global_ref(b))  # b is mapped only in the MMU of cube 3's PE 0, not on cube 0

    _shard, addr = b.shards[0]
    arg_b = TensorArg(addr, (8, 8), "float16", None, b.va, (8, 8))
    req = ctx.engine.submit(KernelLaunchMsg("k", kernel, (((0, 0, 0), (arg_b,)),)))
    ctx.engine.run()
    assert isinstance(req.error, KernelError) and "is not mapped" in str(req.error)
    assert a.va != b.va


def test_virtual_and_physical_runs_agree_numerically(graph):
    rng = np.random.default_rng(5)
    a_np = rng.standard_normal((64, 96)).astype(np.float16)
    b_np = rng.standard_normal((96, 64)).astype(np.float16)
    outs = []
    for virtual in (True, False):
        ctx = RuntimeContext(graph, data=True, virtual=virtual)
        pol = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2)
        a = ctx.from_numpy(a_np, pol)
        b = ctx.from_numpy(b_np, DPPolicy(num_cubes=2, num_pes=2))
        c = ctx.empty((64, 64), "float32", pol)
        ctx.wait(ctx.launch("mm", lambda tl, a, b, c: tl.wait(tl.composite(a, b, c)), a, b, c))
        outs.append(ctx.to_numpy(c))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], a_np.astype(np.float32) @ b_np.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_replicated_parts_map_to_the_closest_copy(graph):
    """cube row_wise + pe replicate: every PE reads its own copy of its cube's half, the other half nearby."""
    rows, cols = 32, 64
    x_np = np.arange(2 * rows * cols, dtype=np.float32).reshape(2 * rows, cols) % 997
    ctx = RuntimeContext(graph, data=True)
    policy = DPPolicy(cube="row_wise", pe="replicate", num_cubes=2, num_pes=2)
    x = ctx.from_numpy(x_np.astype(np.float16), policy)
    y = ctx.empty((2 * rows, cols), "float16", DPPolicy(cube="row_wise", pe="replicate", num_cubes=2, num_pes=2))

    def kernel(tl, x, y):
        other = 1 - tl.program_id(1)  # read the other cube's half through the global view
        tl.store(y, tl.load(tl.global_ref(x)[other * rows:(other + 1) * rows, :]))
        tl.load(x)  # the local half by its own virtual address

    ctx.wait(ctx.launch("k", kernel, x, y))
    from kernbench.topology import AddressResolver
    from kernbench.topology import naming as nm
    from kernbench.topology.address import decode

    resolver = AddressResolver(graph)
    reads = [r for r in ctx.oplog.records if r.op_name == "dma_read"]
    assert len(reads) == 8
    for r in reads:  # every PE reads from its own cube, and its own half from its own slice
        me, src = nm.locate(r.component_id), decode(r.params["src"])
        other_half = r.t_start == min(x.t_start for x in reads if x.component_id == r.component_id)
        if other_half:
            assert src.cube != me.cube
        else:
            assert (src.cube, resolver.owner_pe(src)) == (me.cube, me.pe)
    got = ctx.to_numpy(y)
    np.testing.assert_array_equal(got[:rows], x_np[rows:].astype(np.float16))


def test_free_unmaps_and_reused_ranges_resolve_to_the_new_tensor(graph):
    ctx = RuntimeContext(graph, data=True)
    one = DPPolicy(num_cubes=1, num_pes=1)
    old = ctx.from_numpy(np.full((3, 40), 7, np.float16), one)  # 240 bytes: a sub-page interval
    va = old.va
    ctx.free(old)
    mmu = ctx.engine.components["sip0.cube0.pe0.pe_mmu"]
    assert mmu.intervals == []
    new = ctx.from_numpy(np.arange(8 * 512, dtype=np.float16).reshape(8, 512), one)  # page aligned, 8 KiB
    assert new.va == va
    out = ctx.empty((1, 4), "float16", one)

    def kernel(tl, new, out):
        tl.store(out, tl.load(tl.global_ref(new)[0:1, 0:4]))

    ctx.wait(ctx.launch("k", kernel, new, out))
    np.testing.assert_array_equal(ctx.to_numpy(out), [[0, 1, 2, 3]])
