"""The MMU mapping a PE receives for a column-sharded tensor: one entry per row of every column shard.

A row-split shard is one contiguous virtual range; a column shard's rows are ``cols * itemsize`` bytes apart
in the tensor's virtual range but packed one after another in the shard's memory, so each row is its own
``(va, pa, nbytes)`` entry. Every PE maps every column group to one copy (its own, else one in its cube), in
the order of the tensor's shards; these tests spell the entries out row by row and compare.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components.pe.mmu import MmuMapMsg
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _maps(ctx: RuntimeContext, shape: tuple[int, int], policy: DPPolicy):
    """The tensor and the mapping messages its creation submitted, by (sip, cube, pe)."""
    sent: list[MmuMapMsg] = []
    submit = ctx.engine.submit

    def spy(msg):
        if isinstance(msg, MmuMapMsg):
            sent.append(msg)
        return submit(msg)

    ctx.engine.submit = spy
    t = ctx.empty(shape, "float16", policy)
    ctx.engine.submit = submit
    return t, {(m.sip, m.cube, m.pe): m.entries for m in sent}


def _rows_of(t, shard, addr) -> list[tuple[int, int, int]]:
    item, cols = np.dtype(t.dtype).itemsize, t.shape[-1]
    (r0, r1), (c0, c1) = shard.rows, shard.cols
    width = (c1 - c0) * item
    return [(t.va + (r * cols + c0) * item, addr.encode() + (r - r0) * width, width) for r in range(r0, r1)]


def test_each_pe_maps_every_column_shard_row_by_row(graph):
    ctx = RuntimeContext(graph)
    t, maps = _maps(ctx, (6, 40), DPPolicy(cube="column_wise", pe="column_wise", num_cubes=2, num_pes=2))
    everything = [e for shard, addr in t.shards for e in _rows_of(t, shard, addr)]
    assert len(everything) == 4 * 6
    assert set(maps) == {(s.sip, s.cube, s.pe) for s, _ in t.shards}
    assert all(list(entries) == everything for entries in maps.values())


def test_replicated_column_shards_map_to_the_copy_in_the_pes_own_cube(graph):
    ctx = RuntimeContext(graph)
    t, maps = _maps(ctx, (5, 48), DPPolicy(cube="replicate", pe="column_wise", num_cubes=2, num_pes=3))
    assert len(maps) == 6
    for (_, cube, _), entries in maps.items():
        copies = [part for part in t.shards if part[0].cube == cube]  # the column groups, in order, in my cube
        assert list(entries) == [e for shard, addr in copies for e in _rows_of(t, shard, addr)]
    cube0, cube1 = ({e[1] for e in maps[(0, c, 0)]} for c in (0, 1))
    assert not cube0 & cube1  # the two cubes' copies are different memory


def test_a_row_split_shard_is_one_entry(graph):
    ctx = RuntimeContext(graph)
    t, maps = _maps(ctx, (8, 40), DPPolicy(cube="row_wise", pe="row_wise", num_cubes=1, num_pes=2))
    want = [(t.va + s.rows[0] * 40 * 2, a.encode(), s.nbytes) for s, a in t.shards]
    assert all(list(entries) == want for entries in maps.values())
