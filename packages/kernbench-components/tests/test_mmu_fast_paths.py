"""The PE MMU's fast table operations give exactly the tables, translations and faults of the plain model.

:class:`_Model` is the specification: a mapping entry cuts its range out of the table interval by interval and
inserts itself (later entries win), an unmap entry cuts its range, a message of many disjoint entries is merged
by bisecting each, and a translation walks the table byte range by byte range. ``PeMmu`` merges whole messages
with slice operations, cuts with one slice deletion, memoises a message's sorted columns and translates a range
inside one interval with one bisection. These tests drive both with random tables and messages (sorted and
shuffled rows, entries adjacent in virtual and physical addresses, overlaps with each other and with the table,
empty and negative entries, unmaps) and compare after every message.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from types import SimpleNamespace

import pytest

from kernbench.components.pe.mmu import MmuFault, MmuMapMsg, PeMmu

Entry = tuple[int, int, int]


class _Model:
    """Reference table: ``(lo, hi, pa)`` intervals kept in insertion-sorted order.

    A message of 8 entries or more that overlap neither each other nor their neighbours in the table is merged
    at once, any other one installed (or cut) entry by entry. In a sorted, disjoint table both give the same
    table; in one that empty or negative entries have disordered they need not, and the MMU keeps that too.
    """

    def __init__(self) -> None:
        self.los: list[int] = []
        self.his: list[int] = []
        self.pas: list[int] = []

    def cut(self, lo: int, hi: int) -> None:
        i = max(bisect_right(self.los, lo) - 1, 0)
        keep, j = [], i
        while j < len(self.los) and self.los[j] < hi:
            a, b, pa = self.los[j], self.his[j], self.pas[j]
            if b > lo:
                keep += [(a, lo, pa)] if a < lo else []
                keep += [(hi, b, pa + (hi - a))] if b > hi else []
            else:
                keep.append((a, b, pa))
            j += 1
        self.los[i:j], self.his[i:j], self.pas[i:j] = ([k[n] for k in keep] for n in range(3))

    def merge(self, entries: tuple[Entry, ...]) -> bool:
        """Merge entries that overlap neither each other nor the intervals next to where they land; False (the
        table untouched) otherwise. In a sorted, disjoint table this is what installing them one by one gives."""
        new, at, prev_hi = sorted(entries), [], None
        for va, _, nbytes in new:
            i = bisect_right(self.los, va)
            if (nbytes <= 0 or (prev_hi is not None and va < prev_hi) or (i and self.his[i - 1] > va)
                    or (i < len(self.los) and self.los[i] < va + nbytes)):
                return False
            at.append(i)
            prev_hi = va + nbytes
        for (va, pa, nbytes), i in reversed(list(zip(new, at, strict=True))):  # last first: indices hold
            self.los.insert(i, va)
            self.his.insert(i, va + nbytes)
            self.pas.insert(i, pa)
        return True

    def message(self, entries: tuple[Entry, ...], unmap: bool) -> None:
        if not unmap and len(entries) >= 8 and self.merge(entries):
            return
        for va, pa, nbytes in entries:
            self.cut(va, va + nbytes)
            if not unmap:
                i = bisect_right(self.los, va)
                self.los.insert(i, va)
                self.his.insert(i, va + nbytes)
                self.pas.insert(i, pa)

    def translate(self, va: int, nbytes: int) -> int | str:
        """The physical address, or the fault's message (``mmu`` stands for the component id)."""
        pos, end, first, expect = va, va + max(nbytes, 1), None, None
        while pos < end:
            i = bisect_right(self.los, pos) - 1
            if not (i >= 0 and pos < self.his[i]):
                where = "is not mapped" if pos == va else f"runs past its mapping at {pos:#x}"
                return (f"mmu: virtual range {va:#x}+{nbytes} {where}; tensors are mapped on the PEs of their "
                        f"placement only")
            pa, avail = self.pas[i] + (pos - self.los[i]), self.his[i] - pos
            if first is None:
                first = pa
            elif pa != expect:
                return (f"mmu: virtual range {va:#x}+{nbytes} is not contiguous in physical memory (it reaches "
                        f"another shard at {pos:#x}); split the access at the shard boundary")
            step = min(avail, end - pos)
            pos, expect = pos + step, pa + step
        return first

    @property
    def intervals(self) -> list[Entry]:
        return list(zip(self.los, self.his, self.pas, strict=True))


class _Engine:
    def __init__(self) -> None:
        self.memos: dict = {}

    def finish(self, request, t_end) -> None:
        pass

    def memo(self, make):  # what GraphEngine.memo does
        if make not in self.memos:
            self.memos[make] = make(self)
        return self.memos[make]


def _mmu() -> PeMmu:
    node = SimpleNamespace(id="mmu", type="pe_mmu", overhead_ns=2.0, attrs={"translate_ns": 1.0})
    return PeMmu(_Engine(), node)


def _send(mmu: PeMmu, entries, unmap: bool = False) -> None:
    mmu.on_control(MmuMapMsg(0, 0, 0, entries, unmap), 0.0, SimpleNamespace(request=None))


def _both(mmu: PeMmu, model: _Model, entries, unmap: bool = False) -> None:
    _send(mmu, entries, unmap)
    model.message(entries, unmap)


def _translated(mmu: PeMmu, va: int, nbytes: int) -> int | str:
    try:
        return mmu.translate(va, nbytes)
    except MmuFault as fault:
        return str(fault)


def _rows(rng: random.Random, base: int, n: int) -> list[Entry]:
    """A column shard mapped row by row: ``n`` rows of ``width`` bytes every ``pitch`` bytes, packed in ``pa``."""
    width = rng.choice([16, 64, 256])
    pitch = width * rng.choice([1, 1, 2, 4])  # pitch == width: rows adjacent in both va and pa
    pa = rng.randrange(1 << 30)
    return [(base + r * pitch, pa + r * width, width) for r in range(n)]


def _message(rng: random.Random, model: _Model, weird: bool) -> tuple[tuple[Entry, ...], bool]:
    """A random map or unmap message; with ``weird``, sometimes one with an empty or negative entry."""
    base = rng.choice([0, 4096, 100_000, 1 << 20]) + rng.choice([0, 0, 8, 2048])
    kind = rng.choice(["rows", "rows", "groups", "remap", "overlap_each_other", "unmap", "unmap_some", "few"])
    if kind == "unmap" and model.los:
        lo = rng.choice(model.los) + rng.choice([0, 0, 1, -1, 7])
        return ((lo, 0, rng.choice([1, 16, 300, 5000, 1 << 21])),), True
    if kind == "unmap_some" and len(model.los) >= 2:
        return tuple((lo + rng.choice([0, 3]), 0, hi - lo) for lo, hi, _ in rng.sample(model.intervals, 2)
                     if hi > lo), True
    if kind == "groups":  # several column shards of one tensor, row r of each next to row r of the next
        n, width, groups = rng.randrange(4, 40), 32, rng.randrange(2, 5)
        entries = [(base + (r * groups + g) * width, rng.randrange(1 << 30) + r * width, width)
                   for g in range(groups) for r in range(n)]
    elif kind == "remap" and model.los:  # over what the table holds, shifted: trims intervals on both sides
        entries = _rows(rng, rng.choice(model.los) + rng.choice([0, 5, -5]), rng.randrange(1, 30))
    elif kind == "few":
        entries = _rows(rng, base, rng.randrange(1, 8))
    else:
        entries = _rows(rng, base, rng.randrange(8, 60))
    if kind == "overlap_each_other":
        entries.append((entries[2][0] + 1, 5, entries[2][2]))
    if weird and rng.random() < 0.3:
        entries.insert(rng.randrange(len(entries) + 1), (entries[0][0] + rng.choice([0, 8, 20]), 99,
                                                         rng.choice([0, 0, -8])))
    if rng.random() < 0.5:
        rng.shuffle(entries)
    return tuple(entries), False


def _run(seed: int, weird: bool) -> None:
    rng = random.Random(seed)
    mmu, model = _mmu(), _Model()
    for _ in range(rng.randrange(1, 12)):
        entries, unmap = _message(rng, model, weird)
        if not entries:
            continue
        _both(mmu, model, entries, unmap)
        assert mmu.intervals == model.intervals
        for _ in range(20):
            va = rng.choice(model.los or [0]) + rng.choice([0, 0, 1, -1, 15, 16, 64, 300])
            nbytes = rng.choice([0, 1, 16, 17, 64, 100, 4096, -3])
            assert _translated(mmu, va, nbytes) == model.translate(va, nbytes), (va, nbytes)


@pytest.mark.parametrize("seed", range(300))
def test_messages_build_the_one_by_one_table_and_translate_like_it(seed):
    _run(seed, weird=False)


@pytest.mark.parametrize("seed", range(300))
def test_empty_and_negative_entries_leave_the_table_the_one_by_one_model_builds(seed):
    _run(seed, weird=True)


@pytest.mark.parametrize(("lo", "hi"), [(0, 10), (5, 10), (10, 20), (15, 25), (0, 40), (12, 18), (20, 30),
                                        (19, 31), (30, 40), (-5, 0), (45, 60), (10, 10), (13, 13), (25, 5)])
def test_unmapping_trims_the_first_and_last_intervals_and_drops_the_ones_between(lo, hi):
    table = (((10, 100, 10), (20, 200, 10), (30, 300, 5)))  # [10,20) [20,30) adjacent, [30,35), gap to 40
    mmu, model = _mmu(), _Model()
    for entries, unmap in [(table, False), (((40, 400, 5),), False), (((lo, 0, hi - lo),), True)]:
        _both(mmu, model, entries, unmap)
    assert mmu.intervals == model.intervals


def test_a_table_made_untidy_by_an_empty_entry_is_cut_interval_by_interval():
    """An empty entry inside an interval splits it and leaves a zero-length interval after the split's
    right part; an unmap across it must then keep the right part's remainder, as one-by-one cutting does."""
    mmu, model = _mmu(), _Model()
    for entries, unmap in [(((0, 1000, 100),), False), (((50, 7, 0),), False), (((40, 0, 20),), True)]:
        _both(mmu, model, entries, unmap)
    assert model.intervals == [(0, 40, 1000), (60, 100, 1060)]
    assert mmu.intervals == model.intervals


def test_a_table_made_untidy_by_a_negative_unmap_merges_like_one_by_one():
    """A negative-length unmap leaves two overlapping pieces; a later message must not be merged as if the
    table were sorted and disjoint."""
    mmu, model = _mmu(), _Model()
    rows = tuple((200 + r * 16, 5000 + r * 16, 8) for r in range(10))
    for entries, unmap in [(((0, 1000, 100),), False), (((60, 0, -20),), True), (rows, False),
                           (((30, 0, 40),), True)]:
        _both(mmu, model, entries, unmap)
        assert mmu.intervals == model.intervals


def test_one_entries_object_maps_the_same_in_tables_that_differ():
    """The memoised columns of a message are the entries' own: a second MMU whose table overlaps them still
    falls back to one-by-one installs, and a third with a free gap gets the same intervals."""
    rows = tuple((1000 + r * 64, 9000 + r * 32, 32) for r in range(16))
    free, busy, spare = _mmu(), _mmu(), _mmu()
    _send(busy, ((1000 + 5 * 64 + 8, 1, 100),))
    _send(spare, ((0, 5, 100),))
    model = _Model()
    model.message(((1000 + 5 * 64 + 8, 1, 100),), False)
    model.message(rows, False)
    for mmu in (free, busy, spare):
        _send(mmu, rows)
    assert free.intervals == [(va, va + n, pa) for va, pa, n in rows]
    assert busy.intervals == model.intervals
    assert spare.intervals == [(0, 100, 5), *free.intervals]


def test_a_mutated_entries_list_is_not_taken_for_the_entries_it_held():
    """Entries given as a list (not the message's tuple) may change between messages: each message is read
    afresh."""
    entries = [(1000 + r * 64, 9000 + r * 32, 32) for r in range(16)]
    first, second = _mmu(), _mmu()
    _send(first, entries)
    entries[3] = (1000 + 3 * 64, 7, 48)
    _send(second, entries)
    assert (1192, 1240, 7) in second.intervals and (1192, 1224, 9096) in first.intervals


def test_rows_that_interleave_the_table_are_merged_in_order():
    """New rows falling in several gaps of the table (between another tensor's rows) take their sorted places;
    one that overlaps a table row sends the whole message one by one."""
    table = tuple((5000 + r * 128, r, 64) for r in range(20))
    between = tuple((5000 + r * 128 + 64, 10_000 + r, 64) for r in range(20))
    mmu, model = _mmu(), _Model()
    for entries in (table, between, (*between[:5], (5000 + 6 * 128 + 32, 77, 64))):
        _both(mmu, model, entries)
        assert mmu.intervals == model.intervals
    assert [lo for lo, _, _ in mmu.intervals[:4]] == [5000, 5064, 5128, 5192]


@pytest.mark.parametrize("messages", [
    # a negative entry among rows: the message goes one by one (and the table becomes untidy), not in one merge
    [((366, 5016, 8),), ((39, 5032, 8), (47, 5040, 8), (55, 5048, 8), (63, 5056, 8), (71, 5064, 8), (79, 5072, 8),
                         (372, 553, -30), (263, 490, 20))],
    # rows merged into a table that negative entries left with overlapping intervals: the untidy table's merge
    [((338, 299, 64), (352, 141, -30)), ((343, 884, -30), (331, 230, 64), (337, 625, 5), (298, 748, -30)),
     ((348, 5000, 4), (396, 5048, 4), (388, 5040, 4), (384, 5036, 4), (372, 5024, 4), (392, 5044, 4),
      (364, 5016, 4), (352, 5004, 4))],
])
def test_messages_with_negative_entries_build_the_one_by_one_table(messages):
    mmu, model = _mmu(), _Model()
    for entries in messages:
        _both(mmu, model, entries)
        assert mmu.intervals == model.intervals


def test_the_columns_memo_is_one_per_engine_and_shared_by_its_mmus():
    """PEs of one engine mapping the same entries object split it once (the engine's memo keeps the last one);
    another engine keeps its own, so a second engine never sees the first one's state."""
    from kernbench.components.pe.mmu import _LastColumns

    node = SimpleNamespace(id="mmu", type="pe_mmu", overhead_ns=2.0, attrs={"translate_ns": 1.0})
    engine, other = _Engine(), _Engine()
    first, second, elsewhere = PeMmu(engine, node), PeMmu(engine, node), PeMmu(other, node)
    entries = tuple((4096 * i, 65536 + 1024 * i, 1024) for i in range(40))
    for mmu in (first, second, elsewhere):
        _send(mmu, entries)
    memo = engine.memo(_LastColumns)
    assert memo.entries is entries and other.memo(_LastColumns) is not memo
    tables = [list(zip(m.los, m.his, m.pas, strict=True)) for m in (first, second, elsewhere)]
    assert tables[0] == tables[1] == tables[2]
    assert tables[0][:2] == [(0, 1024, 65536), (4096, 5120, 66560)] and len(tables[0]) == 40
