"""Tensors passed to a launch by address only: every PE reaches them with tl.global_ref, nothing else names them."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components.launch import KernelError
from kernbench.runtime import DPPolicy, RuntimeApiError, RuntimeContext, by_address, session
from kernbench.topology import compile_spec, spec_from_dict

ROWS, COLS = 16, 64


def gather_rows(tl, out, table, picks):
    """Each PE copies rows ``picks[(cube, pe)]`` of ``table`` (which lives on one PE of cube 0) into its ``out``."""
    rows = picks[(tl.program_id(1), tl.program_id(0))]
    whole = tl.global_ref(table)
    mine = tl.ref(out)
    for i, r in enumerate(rows):
        tl.store(mine[i:i + 1, :], tl.load(whole[r:r + 1, :]))


def test_pes_without_a_shard_read_any_row_of_a_tensor_passed_by_address():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    picks = {(c, p): [(5 * c + 3 * p) % ROWS, (7 * c + p + 1) % ROWS] for c in range(2) for p in range(2)}
    with session(data=True) as torch:
        src = torch.from_numpy(table, DPPolicy(num_cubes=1, num_pes=1))  # PE 0 of cube 0 only
        out = torch.zeros((4 * 2, COLS), "float16", DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2))
        first = len(torch.oplog.records)
        res = torch.wait(torch.launch("gather", gather_rows, out, by_address(src), picks))
        reads = [r for r in torch.oplog.records[first:] if r.op_name == "hbm_read"]
        got = torch.peek(out)
    assert sorted(res.reports) == ["sip0.cube0.pe0", "sip0.cube0.pe1", "sip0.cube1.pe0", "sip0.cube1.pe1"]
    want = np.concatenate([table[picks[(c, p)]] for c in range(2) for p in range(2)])
    np.testing.assert_array_equal(got, want)
    # every row was read where it lives, in cube 0's HBM, whichever PE asked for it
    assert len(reads) == 8 and {r.component_id.split(".")[1] for r in reads} == {"cube0"}


def _touch_local(tl, out, table):
    tl.load(tl.ref(table))


def test_a_tensor_passed_by_address_has_no_local_shard_to_name():
    with session(data=False) as torch:
        src = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
        out = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=2))
        with pytest.raises(KernelError, match=r"failed on sip0.cube0.pe0: TLError: tl.ref: this tensor argument "
                                              r"\(float16\[16, 64\]\) was passed by_address and has no shard on "
                                              r"this PE; address it with tl.global_ref"):
            torch.wait(torch.launch("local", _touch_local, out, by_address(src)))


def test_by_address_needs_a_plain_tensor_to_place_the_launch_and_virtual_addresses():
    with session(data=False) as torch:
        src = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
        with pytest.raises(RuntimeApiError, match=r"pass at least one tensor \(not by_address\)"):
            torch.launch("none", _touch_local, by_address(src))
        with pytest.raises(RuntimeApiError, match="by_address: expected a tensor of this runtime, got ndarray"):
            by_address(np.zeros(3))
    ctx = RuntimeContext(compile_spec(spec_from_dict({})), virtual=False)
    src = ctx.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
    with pytest.raises(RuntimeApiError, match="argument 1 is passed by_address but its tensor has no virtual "
                                              "addresses"):
        ctx.launch("novirt", _touch_local, src, by_address(src))


def test_a_freed_tensor_passed_by_address_is_refused():
    with session(data=False) as torch:
        src = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
        out = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
        torch.free(src)
        with pytest.raises(RuntimeApiError, match="freed"):
            torch.launch("gone", _touch_local, out, by_address(src))


def _noop(tl, out, table):
    tl.program_id(0)


def test_launch_pes_map_the_tensor_once_to_its_only_copy_and_free_unmaps_them():
    with session(data=False) as torch:
        src = torch.zeros((ROWS, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
        out = torch.zeros((4, COLS), "float16", DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2))
        (_, pa), = src.shards
        first = len(torch.oplog.records)
        torch.wait(torch.launch("one", _noop, out, by_address(src)))
        torch.wait(torch.launch("two", _noop, out, by_address(src)))
        maps = [r for r in torch.oplog.records[first:] if r.op_name == "mmu_map"]
        # the three launch PEs without a shard map it, once, before the first launch; PE 0 of cube 0 has mapped it
        # since its deployment
        assert len(maps) == 3
        far = ("sip0.cube0.pe1", "sip0.cube1.pe0", "sip0.cube1.pe1")
        mmus = [torch.engine.components[f"{pe}.pe_mmu"] for pe in far]

        def src_entries(mmu):
            return [iv for iv in mmu.intervals if src.va <= iv[0] < src.va + src.nbytes]

        for mmu in mmus:
            assert src_entries(mmu) == [(src.va, src.va + src.nbytes, pa.encode())]
        torch.free(src)
        assert [src_entries(mmu) for mmu in mmus] == [[], [], []]
