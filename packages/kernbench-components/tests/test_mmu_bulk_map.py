"""A mapping message's entries merged into the PE MMU's table at once give the table one-by-one installs give.

``PeMmu.on_control`` merges a message of many disjoint entries in one pass (``_insert_disjoint``); entries that
overlap each other or the table fall back to cutting and inserting one by one. Either way the table must be
exactly what installing the entries in order gives (later mappings win).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from kernbench.components.pe.mmu import MmuMapMsg, PeMmu


class _Engine:
    def __init__(self) -> None:
        self.finished: list[tuple[object, float]] = []

    def finish(self, request, t_end):
        self.finished.append((request, t_end))

    def memo(self, make):  # what GraphEngine.memo does
        memos = self.__dict__.setdefault("_memos", {})
        if make not in memos:
            memos[make] = make(self)
        return memos[make]


def _mmu(table: list[tuple[int, int, int]]) -> PeMmu:
    node = SimpleNamespace(id="mmu", type="pe_mmu", overhead_ns=2.0, attrs={"translate_ns": 1.0})
    mmu = PeMmu(_Engine(), node)
    for lo, hi, pa in table:
        mmu.install(lo, pa, hi - lo)
    return mmu


def _one_by_one(table, entries):
    mmu = _mmu(table)
    for va, pa, nbytes in entries:
        mmu.install(va, pa, nbytes)
    return mmu.intervals


def _table(rng: random.Random) -> list[tuple[int, int, int]]:
    out, va = [], 1_000_000 + rng.randrange(0, 1000)
    for _ in range(rng.randrange(0, 60)):
        n = rng.choice([1, 64, 128, 4096])
        out.append((va, va + n, rng.randrange(1 << 30)))
        va += n + rng.choice([0, 0, 64, 1000])
    if rng.random() < 0.3:  # rows of another tensor, 64 B every 256 B: new rows can slot in between
        out += [(2_000_000 + r * 256, 2_000_000 + r * 256 + 64, rng.randrange(1 << 30)) for r in range(40)]
    rng.shuffle(out)
    return out


def _entries(rng: random.Random, table) -> tuple[tuple[int, int, int], ...]:
    kind = rng.choice(["rows", "rows", "between", "overlap_table", "overlap_each_other", "empty_entry"])
    base = rng.choice([0, 5_000_000, 10_000_000])
    width, pitch = rng.choice([(64, 256), (128, 128), (32, 4096)])
    if kind == "between":  # interleaved with the table's rows at 2_000_000 (or with nothing)
        base, width, pitch = 2_000_000 + 128 + rng.choice([-64, 0]), 64, 256
    if kind == "overlap_table" and table:
        base = table[0][0] + 1
    rows = [(base + r * pitch, rng.randrange(1 << 30), width) for r in range(rng.randrange(8, 80))]
    if kind == "overlap_each_other":
        rows.append((rows[3][0] + 1, 7, width))
    if kind == "empty_entry":
        rows.append((rows[-1][0] + pitch, 9, 0))
    rng.shuffle(rows)
    return tuple(rows)


@pytest.mark.parametrize("seed", range(300))
def test_a_message_installs_what_installing_its_entries_in_order_does(seed):
    rng = random.Random(seed)
    table = _table(rng)
    entries = _entries(rng, table)
    mmu = _mmu(table)
    request = object()
    mmu.on_control(MmuMapMsg(0, 0, 0, entries), 10.0, SimpleNamespace(request=request))
    assert mmu.intervals == _one_by_one(table, entries)
    assert mmu.engine.finished == [(request, 12.0)]


def test_disjoint_rows_are_merged_in_one_pass_and_overlaps_are_not():
    rows = tuple((1000 + r * 256, r << 20, 64) for r in range(16))
    mmu = _mmu([(0, 100, 5), (1000 + 64, 1000 + 128, 6), (50_000, 50_100, 7)])  # between rows 0 and 1
    assert mmu._insert_disjoint(rows)
    assert [lo for lo, _, _ in mmu.intervals] == sorted([0, 1064, 50_000] + [lo for lo, _, _ in rows])
    overlapping = ((1000 + 32, 1, 64), *rows[1:])
    before = mmu.intervals
    assert not mmu._insert_disjoint(overlapping)
    assert mmu.intervals == before
