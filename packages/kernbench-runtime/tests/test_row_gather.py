"""tl.load_rows / tl.store_rows: runs of rows between an HBM tensor and one TCM tile, one DMA per run."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernbench.components.launch import KernelError
from kernbench.runtime import DPPolicy, session
from kernbench.tl.rows import row_runs

COLS = 64
LOAD_RUNS = [(3, 2), (10, 1), (0, 4)]  # 7 rows, out of order, one run ending at row 3 where the next one starts
STORE_RUNS = [(8, 3), (1, 4)]


def permute(tl, dst, src, load_runs, store_runs):
    tile = tl.load_rows(tl.ref(src), load_runs)
    tl.store_rows(tl.ref(dst), store_runs, tile)


def _run(load_runs=LOAD_RUNS, store_runs=STORE_RUNS, rows=32):
    table = np.arange(rows * COLS, dtype=np.float32).reshape(rows, COLS).astype(np.float16)
    with session(data=True) as torch:
        src = torch.from_numpy(table, DPPolicy(num_cubes=1, num_pes=1))
        dst = torch.zeros((16, COLS), "float16", DPPolicy(num_cubes=1, num_pes=1))
        first = len(torch.oplog.records)
        torch.wait(torch.launch("permute", permute, dst, src, load_runs, store_runs))
        records = torch.oplog.records[first:]
        return table, torch.peek(dst), records


def test_rows_land_in_the_order_of_the_runs_and_every_run_is_one_dma():
    table, got, records = _run()
    gathered = np.concatenate([table[s:s + n] for s, n in LOAD_RUNS])
    want = np.zeros((16, COLS), np.float16)
    at = 0
    for s, n in STORE_RUNS:
        want[s:s + n] = gathered[at:at + n]
        at += n
    np.testing.assert_array_equal(got, want)
    reads = [r for r in records if r.op_name == "dma_read"]
    writes = [r for r in records if r.op_name == "dma_write"]
    assert [r.params["nbytes"] for r in reads] == [n * COLS * 2 for _, n in LOAD_RUNS]
    assert [r.params["nbytes"] for r in writes] == [n * COLS * 2 for _, n in STORE_RUNS]
    # the gather's DMAs are issued one command dispatch apart, none waiting for the one before to land
    dispatch = next(r.t_end - r.t_start for r in records if r.op_name == "dispatch")
    gaps = [b.t_start - a.t_start for a, b in itertools.pairwise(reads)]
    assert gaps == pytest.approx([dispatch] * 2)
    # the scatter reads the tile only once every run of the gather has landed
    assert min(r.t_start for r in writes) >= max(r.t_end for r in reads)


def test_the_last_row_alone_is_a_run():
    table, got, _ = _run([(31, 1)], [(15, 1)])
    np.testing.assert_array_equal(got[15], table[31])
    assert not got[:15].any()


@pytest.mark.parametrize(("load_runs", "store_runs", "message"), [
    ([(31, 2)], [(0, 2)], r"tl.load_rows: run \(start=31, count=2\) is outside the 32 rows"),
    ([(0, 0)], [(0, 1)], r"tl.load_rows: run \(start=0, count=0\) is outside"),
    ([], [(0, 1)], r"tl.load_rows: no runs given"),
    ([(0, 2)], [(15, 2)], r"tl.store_rows: run \(start=15, count=2\) is outside the 16 rows"),
    ([(0, 2)], [(0, 3)], r"tl.store_rows: the runs cover 3 rows of 64 float16 values but the tile is \(2, 64\)"),
    ([("a", 1)], [(0, 1)], r"tl.load_rows: a run is a \(start, count\) pair of ints"),
])
def test_bad_runs_fail_before_any_dma(load_runs, store_runs, message):
    with pytest.raises(KernelError, match=message):
        _run(load_runs, store_runs)


def test_row_runs_coalesce_consecutive_rows_in_the_order_given():
    assert row_runs([4, 5, 6, 9, 2, 3, 3]) == [(4, 3), (9, 1), (2, 2), (3, 1)]
    assert row_runs([]) == []
