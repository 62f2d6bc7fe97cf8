"""Tests of the first-fit free list, the per-PE HBM/TCM allocator and the virtual allocator.

Expected values are worked out by hand from the default topology (2 SIPs, 16 cubes of 8 PEs,
48 GiB HBM per cube -> a 6 GiB slice per PE, 16 MiB TCM with a 1 MiB scratch region at the top,
256-byte HBM bursts) or by an independent model of first-fit inside the property tests.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.runtime.allocator import AllocationError, FreeList, PEMemAllocator, VirtualAllocator
from kernbench.topology import AddressResolver, KernbenchError, PhysAddr, compile_spec, decode, spec_from_dict

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
SLICE = 6 * GIB  # 48 GiB / 8 PEs
TCM = 16 * MIB
SCRATCH = 1 * MIB


@pytest.fixture(scope="module")
def spec():
    return spec_from_dict({})


@pytest.fixture(scope="module")
def resolver(spec):
    return AddressResolver(compile_spec(spec))


def check_invariants(fl: FreeList, live: dict[int, int]) -> None:
    """used + free == capacity; blocks sorted, non-empty, non-adjacent, in range; no overlaps at all."""
    blocks = list(fl.free_blocks)
    assert fl.used == sum(live.values())
    assert fl.used + sum(size for _, size in blocks) == fl.capacity
    for start, size in blocks:
        assert size > 0
        assert fl.base <= start and start + size <= fl.base + fl.capacity
    for (s0, z0), (s1, _) in itertools.pairwise(blocks):
        assert s0 + z0 < s1, "free blocks must be sorted and separated (adjacent ones coalesce)"
    spans = sorted([(s, s + z, "free") for s, z in blocks] + [(o, o + n, "live") for o, n in live.items()])
    for (_, e0, _), (s1, _, _) in itertools.pairwise(spans):
        assert e0 <= s1, f"overlap in {spans}"
    assert fl.largest_free == max((z for _, z in blocks), default=0)


# --------------------------------------------------------------------------- FreeList


def test_first_fit_takes_the_lowest_block_that_fits():
    fl = FreeList(100, "test region")
    assert fl.alloc(10) == 0
    assert fl.alloc(20) == 10
    assert fl.alloc(30) == 30
    fl.free(0, 10)
    fl.free(30, 30)
    assert fl.free_blocks == ((0, 10), (30, 70))
    assert fl.alloc(5) == 0  # first block, although the second one is larger
    assert fl.alloc(8) == 30  # 5 bytes left at 5 are too few: next block
    assert fl.free_blocks == ((5, 5), (38, 62))
    assert fl.used == 20 + 5 + 8


def test_exact_fit_removes_the_block():
    fl = FreeList(100, "test region")
    fl.alloc(10)
    fl.alloc(90)
    fl.free(0, 10)
    assert fl.free_blocks == ((0, 10),)
    assert fl.alloc(10) == 0
    assert fl.free_blocks == ()
    assert fl.largest_free == 0
    assert fl.used == fl.capacity == 100


def test_free_coalesces_with_both_neighbours():
    fl = FreeList(30, "test region")
    a, b, c = fl.alloc(10), fl.alloc(10), fl.alloc(10)
    fl.free(a, 10)
    fl.free(c, 10)
    assert fl.free_blocks == ((0, 10), (20, 10))
    fl.free(b, 10)
    assert fl.free_blocks == ((0, 30),)
    assert fl.used == 0


def test_alignment_leaves_the_gap_free_and_reuses_it():
    fl = FreeList(1000, "test region")
    assert fl.alloc(3) == 0
    assert fl.alloc(16, align=64) == 64
    assert fl.free_blocks == ((3, 61), (80, 920))
    assert fl.alloc(50) == 3  # first fit lands in the alignment gap
    assert fl.alloc(100, align=128) == 128
    assert fl.free_blocks == ((53, 11), (80, 48), (228, 772))
    assert fl.used == 3 + 16 + 50 + 100


def test_alignment_is_of_the_absolute_offset():
    fl = FreeList(100, "based", base=10)
    assert fl.alloc(1, align=16) == 16
    assert fl.alloc(1) == 10
    assert fl.free_blocks == ((11, 5), (17, 93))


def test_alignment_that_cannot_fit_reports_overflow():
    fl = FreeList(100, "test region")
    fl.alloc(1)
    with pytest.raises(AllocationError, match=r"99 bytes"):
        fl.alloc(99, align=64)  # 99 bytes fit at offset 1 but not at offset 64


def test_overflow_message_names_request_region_and_largest_block():
    fl = FreeList(100, "HBM slice of sipX")
    a = fl.alloc(40)
    fl.alloc(20)
    fl.alloc(40)
    fl.free(a, 40)
    with pytest.raises(AllocationError) as info:
        fl.alloc(41)
    msg = str(info.value)
    assert isinstance(info.value, KernbenchError)
    assert "41 bytes" in msg
    assert "HBM slice of sipX" in msg
    assert re.search(r"largest free block is 40 bytes", msg)
    assert "free tensors" in msg and "shard" in msg
    assert fl.used == 60  # a failed alloc changes nothing
    assert fl.free_blocks == ((0, 40),)


@pytest.mark.parametrize("nbytes", [0, -1])
def test_non_positive_sizes_are_rejected(nbytes):
    fl = FreeList(100, "test region")
    with pytest.raises(AllocationError, match=str(nbytes)):
        fl.alloc(nbytes)
    fl.alloc(10)
    with pytest.raises(AllocationError):
        fl.free(0, nbytes)


def test_bad_alignment_and_types_are_rejected():
    fl = FreeList(100, "test region")
    with pytest.raises(AllocationError, match="alignment"):
        fl.alloc(1, align=0)
    with pytest.raises(AllocationError, match="integer"):
        fl.alloc(1.5)
    with pytest.raises(AllocationError, match="integer"):
        fl.alloc(True)


def test_double_free_raises():
    fl = FreeList(100, "test region")
    a = fl.alloc(10)
    fl.alloc(10)
    fl.free(a, 10)
    with pytest.raises(AllocationError, match="already free"):
        fl.free(a, 10)
    assert fl.used == 10
    assert fl.free_blocks == ((0, 10), (20, 80))


@pytest.mark.parametrize(("offset", "nbytes"), [(5, 10), (15, 10), (0, 30), (18, 5)])
def test_free_overlapping_a_free_block_raises(offset, nbytes):
    fl = FreeList(100, "test region")
    fl.alloc(10)
    fl.alloc(10)
    fl.free(0, 10)  # free: [0, 10) and [20, 100); live: [10, 20)
    with pytest.raises(AllocationError):
        fl.free(offset, nbytes)
    assert fl.free_blocks == ((0, 10), (20, 80))


@pytest.mark.parametrize(("offset", "nbytes"), [(-1, 2), (95, 10), (100, 1)])
def test_free_outside_the_region_raises(offset, nbytes):
    fl = FreeList(100, "test region")
    fl.alloc(100)
    with pytest.raises(AllocationError, match="leaves the region"):
        fl.free(offset, nbytes)


def _first_fit_model(blocks, nbytes, align):
    """Independent first-fit: the aligned start in the first block that holds the request."""
    for start, size in blocks:
        offset = (start + align - 1) // align * align
        if offset + nbytes <= start + size:
            return offset
    return None


ops = st.lists(st.one_of(
    st.tuples(st.just("alloc"), st.integers(1, 300), st.sampled_from([1, 1, 2, 16, 64])),
    st.tuples(st.just("free"), st.integers(0, 10_000), st.just(0)),
), max_size=60)


@settings(max_examples=200, deadline=None)
@given(ops=ops, capacity=st.integers(1, 2000), base=st.sampled_from([0, 7, 4096]), data=st.data())
def test_random_alloc_free_keeps_invariants(ops, capacity, base, data):
    fl = FreeList(capacity, "prop region", base=base)
    live: dict[int, int] = {}
    for op, x, align in ops:
        if op == "alloc":
            expected = _first_fit_model(fl.free_blocks, x, align)
            if expected is None:
                with pytest.raises(AllocationError):
                    fl.alloc(x, align)
            else:
                got = fl.alloc(x, align)
                assert got == expected
                assert got % align == 0
                live[got] = x
        elif live:
            offset = sorted(live)[x % len(live)]
            fl.free(offset, live.pop(offset))
        check_invariants(fl, live)
    # Free everything in a random order: the region is one block again.
    for offset in data.draw(st.permutations(sorted(live))):
        fl.free(offset, live.pop(offset))
        check_invariants(fl, live)
    assert fl.free_blocks == ((base, capacity),)
    assert fl.used == 0


# --------------------------------------------------------------------------- PEMemAllocator


@pytest.mark.parametrize("pe", range(8))
def test_hbm_addresses_decode_into_the_pes_slice(spec, resolver, pe):
    alloc = PEMemAllocator(1, 3, pe, spec)
    first = alloc.alloc_hbm(1000)
    second = alloc.alloc_hbm(10)
    for addr, n in ((first, 1000), (second, 10)):
        d = decode(addr.encode())
        assert d == addr
        assert (d.sip, d.cube, d.kind) == (1, 3, "hbm")
        assert pe * SLICE <= d.offset and d.offset + n <= (pe + 1) * SLICE
        assert d.offset % 256 == 0
        assert resolver.resolve(addr, n) == f"sip1.cube3.hbm_ctrl.pe{pe}"
    assert first.offset == pe * SLICE
    assert second.offset == pe * SLICE + 1024  # 1000 bytes, next 256-byte burst boundary


def test_hbm_free_returns_the_space(spec):
    alloc = PEMemAllocator(0, 0, 2, spec)
    a = alloc.alloc_hbm(4096)
    alloc.free_hbm(a, 4096)
    assert alloc.hbm.used == 0
    assert alloc.alloc_hbm(4096) == a


def test_whole_slice_then_one_byte_overflows(spec):
    alloc = PEMemAllocator(0, 3, 5, spec)
    addr = alloc.alloc_hbm(SLICE)
    assert addr == PhysAddr(0, 3, "hbm", 5 * SLICE)
    with pytest.raises(AllocationError) as info:
        alloc.alloc_hbm(1)
    msg = str(info.value)
    assert "HBM slice of sip0.cube3.pe5" in msg
    assert "1 bytes" in msg
    assert "largest free block is 0 bytes" in msg


def test_freeing_another_units_address_raises(spec):
    a = PEMemAllocator(0, 0, 0, spec)
    b = PEMemAllocator(0, 0, 1, spec)
    addr = b.alloc_hbm(256)
    with pytest.raises(AllocationError):
        a.free_hbm(addr, 256)  # lies in PE 1's slice
    tcm = b.alloc_tcm(64)
    with pytest.raises(AllocationError, match="another unit"):
        a.free_tcm(tcm, 64)
    with pytest.raises(AllocationError, match="another unit"):
        b.free_hbm(tcm, 64)


# Composite staging at the bottom of the TCM: two buffers for each of a, b and c, each the largest block of the
# default tm 32 x tn 32 x tk 64 tile (32 * 64 elements) at 4 bytes.
STAGING = 2 * 3 * 32 * 64 * 4


def test_tcm_excludes_the_staging_and_scratch_regions(spec, resolver):
    alloc = PEMemAllocator(1, 15, 7, spec)
    assert alloc.tcm_scratch_range == (TCM - SCRATCH, TCM)
    assert alloc.tcm_staging_range == (0, STAGING)
    heap = TCM - SCRATCH - STAGING
    assert alloc.tcm.capacity == heap
    addr = alloc.alloc_tcm(heap)
    assert addr == PhysAddr(1, 15, "tcm", STAGING, pe=7)
    assert resolver.resolve(addr, heap) == "sip1.cube15.pe7.pe_tcm"
    with pytest.raises(AllocationError, match=r"TCM of sip1\.cube15\.pe7"):
        alloc.alloc_tcm(1)
    alloc.free_tcm(addr, heap)
    assert alloc.tcm.used == 0


def test_tcm_scratch_size_comes_from_the_spec():
    spec = spec_from_dict({"pe": {"tcm": {"capacity_mib": 4, "scratch_mib": 2.5}}})
    alloc = PEMemAllocator(0, 0, 0, spec)
    assert alloc.tcm_scratch_range == (1536 * KIB, 4 * MIB)
    alloc.alloc_tcm(1536 * KIB - STAGING)
    with pytest.raises(AllocationError):
        alloc.alloc_tcm(16)


def test_staging_grows_with_the_gemm_tile():
    spec = spec_from_dict({"pe": {"gemm": {"tile_m": 64, "tile_n": 64, "tile_k": 128}}})
    assert PEMemAllocator(0, 0, 0, spec).tcm_staging_range == (0, 2 * 3 * 64 * 128 * 4)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 3 * MIB), min_size=1, max_size=30), pe=st.integers(0, 7))
def test_tcm_allocations_never_touch_staging_or_scratch(spec, sizes, pe):
    alloc = PEMemAllocator(0, 1, pe, spec)
    spans = []
    for n in sizes:
        try:
            addr = alloc.alloc_tcm(n)
        except AllocationError:
            continue
        d = decode(addr.encode())
        assert (d.kind, d.pe) == ("tcm", pe)
        assert d.offset % 16 == 0
        assert d.offset >= STAGING and d.offset + n <= TCM - SCRATCH
        spans.append((d.offset, d.offset + n))
    spans.sort()
    for (_, e0), (s1, _) in itertools.pairwise(spans):
        assert e0 <= s1


def test_hbm_burst_alignment_follows_the_spec():
    spec = spec_from_dict({"cube": {"hbm": {"burst_bytes": 64}}})
    alloc = PEMemAllocator(0, 0, 1, spec)
    a = alloc.alloc_hbm(1)
    b = alloc.alloc_hbm(1)
    assert b.offset - a.offset == 64


def test_nonexistent_pe_is_rejected(spec):
    with pytest.raises(AllocationError, match="8 PEs"):
        PEMemAllocator(0, 0, 8, spec)


# --------------------------------------------------------------------------- VirtualAllocator


def test_va_defaults_round_up_to_pages():
    va = VirtualAllocator()
    base = 1 << 32
    assert (va.base, va.capacity, va.page_bytes) == (base, 64 * GIB, 4096)
    assert va.alloc(1) == base
    assert va.alloc(4096) == base + 4096
    assert va.alloc(4097) == base + 8192
    assert va.alloc(10) == base + 16384
    assert va.used == 4096 + 4096 + 8192 + 4096


def test_va_coalesces_on_free():
    va = VirtualAllocator(base=0x10000, size=16 * 4096)
    a, b, c = va.alloc(5000), va.alloc(4096), va.alloc(1)
    assert (a, b, c) == (0x10000, 0x10000 + 8192, 0x10000 + 12288)
    va.free(b, 4096)
    va.free(a, 5000)
    assert va.free_blocks == ((0x10000, 12288), (0x10000 + 16384, 12 * 4096))
    va.free(c, 1)
    assert va.free_blocks == ((0x10000, 16 * 4096),)
    assert va.used == 0


def test_va_reuses_the_first_hole():
    va = VirtualAllocator(base=0, size=10 * 4096)
    a = va.alloc(2 * 4096)
    va.alloc(4096)
    va.free(a, 2 * 4096)
    assert va.alloc(100) == 0
    assert va.alloc(4096) == 4096
    assert va.alloc(1) == 3 * 4096


def test_va_overflow_names_the_rounded_request():
    va = VirtualAllocator(base=0, size=8 * 4096)
    va.alloc(5 * 4096)
    with pytest.raises(AllocationError) as info:
        va.alloc(3 * 4096 + 1)
    msg = str(info.value)
    assert "12289 bytes" in msg and "16384 bytes" in msg
    assert "virtual address space" in msg
    assert "largest free block is 12288 bytes" in msg
    assert va.alloc(3 * 4096) == 5 * 4096  # the failed request changed nothing


def test_va_rejects_unaligned_space_and_bad_sizes():
    with pytest.raises(AllocationError, match="page"):
        VirtualAllocator(base=100, size=4096)
    with pytest.raises(AllocationError, match="page"):
        VirtualAllocator(page_bytes=0)
    va = VirtualAllocator()
    with pytest.raises(AllocationError):
        va.alloc(0)
    with pytest.raises(AllocationError, match="already free"):
        va.free(va.base, 1)


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(1, 5 * 4096), max_size=40), page=st.sampled_from([256, 4096]))
def test_va_allocations_are_page_aligned_and_disjoint(sizes, page):
    base, size = 64 * page, 50 * page
    va = VirtualAllocator(base=base, size=size, page_bytes=page)
    spans = []
    for n in sizes:
        pages = -(-n // page)
        try:
            addr = va.alloc(n)
        except AllocationError:
            assert va.largest_free < pages * page
            continue
        assert addr % page == 0
        assert base <= addr and addr + pages * page <= base + size
        spans.append((addr, addr + pages * page))
    spans.sort()
    for (_, e0), (s1, _) in itertools.pairwise(spans):
        assert e0 <= s1
    assert va.used == sum(e - s for s, e in spans)
