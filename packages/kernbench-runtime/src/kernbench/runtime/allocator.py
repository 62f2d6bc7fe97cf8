"""Host-side memory allocators: per-PE HBM slice and TCM, and the device virtual address space.

Every size and offset here is in bytes.

All three allocators share one algorithm, :class:`FreeList`: the free space
is a list of ``(start, size)`` blocks kept sorted by ``start``; ``alloc``
takes the first block that can hold the request (first-fit) and ``free``
merges the returned range with the free blocks touching it (coalescing).
The workload is stack-like (deploy tensors, run kernels, free them in
roughly the same order), so first-fit fragments little and stays cheap.

Unlike the earlier implementation this design is based on, ``free`` *does*
validate its argument. A bisect on the sorted block starts finds the free
blocks on either side of the range, so a double free, or any free that
overlaps space that is already free or lies outside the region, raises
:class:`AllocationError` in O(log n) instead of silently corrupting the
free list. (A range that straddles two live allocations is not detected:
that would require tracking every allocation.)

Allocation never partly succeeds: when no free block fits, the allocator
raises :class:`AllocationError` naming the request, the region, and the
largest free block, so fragmentation can be told apart from running out of
memory.
"""

from __future__ import annotations

import operator
from bisect import bisect_right

from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr
from kernbench.topology.errors import KernbenchError
from kernbench.topology.spec import TopologySpec
from kernbench.topology.tcm_layout import TcmLayout

MIB = 1 << 20
TCM_ALIGN_BYTES = 16
"""Alignment of TCM allocations, bytes."""

_FIX = ("free tensors you no longer need, or use smaller tensors or shard them over more "
        "cubes/PEs with a DPPolicy (row_wise / column_wise)")


class AllocationError(KernbenchError):
    """A memory request cannot be served, or a free does not match allocated memory.

    The message names the request in bytes, the region it was made against
    (an HBM slice, a TCM, the virtual address space), the largest free block
    and how to fix it.
    """


def _as_count(value: object, what: str, where: str) -> int:
    """``value`` as a Python int, or :class:`AllocationError` naming it."""
    if isinstance(value, bool):
        raise AllocationError(f"{what} for {where} must be an integer number of bytes, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise AllocationError(f"{what} for {where} must be an integer number of bytes, got {value!r}") from None


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


class FreeList:
    """First-fit allocator with coalescing over the byte range ``[base, base + capacity)``.

    Models one contiguous memory region (an HBM slice, the allocatable part
    of a TCM, a virtual address range). Offsets returned by :meth:`alloc`
    and accepted by :meth:`free` are absolute, i.e. include ``base``
    (``base`` defaults to 0, giving region-local offsets). Alignment is
    applied to the absolute offset.
    """

    __slots__ = ("_base", "_capacity", "_name", "_sizes", "_starts", "_used")

    def __init__(self, capacity: int, name: str, *, base: int = 0) -> None:
        """Create a region of ``capacity`` bytes, all free, described as ``name`` in errors."""
        capacity = _as_count(capacity, "capacity", name)
        base = _as_count(base, "base", name)
        if capacity < 0 or base < 0:
            raise AllocationError(f"{name}: capacity ({capacity}) and base ({base}) must not be negative")
        self._name = name
        self._base = base
        self._capacity = capacity
        self._used = 0
        # Parallel lists sorted by start: bisect works on plain ints.
        self._starts: list[int] = [base] if capacity else []
        self._sizes: list[int] = [capacity] if capacity else []

    # ------------------------------------------------------------------ inspection

    @property
    def name(self) -> str:
        """Human-readable name of the region, used in error messages."""
        return self._name

    @property
    def base(self) -> int:
        """First byte offset of the region."""
        return self._base

    @property
    def capacity(self) -> int:
        """Size of the region, bytes."""
        return self._capacity

    @property
    def used(self) -> int:
        """Bytes currently allocated (alignment gaps stay free and are not counted)."""
        return self._used

    @property
    def largest_free(self) -> int:
        """Size of the largest free block, bytes (0 when the region is full)."""
        return max(self._sizes, default=0)

    @property
    def free_blocks(self) -> tuple[tuple[int, int], ...]:
        """The free blocks as ``(start, size)`` pairs in address order."""
        return tuple(zip(self._starts, self._sizes, strict=True))

    def __repr__(self) -> str:
        return (f"FreeList({self._name!r}, capacity={self._capacity}, used={self._used}, "
                f"free_blocks={len(self._starts)})")

    # ------------------------------------------------------------------ operations

    def alloc(self, nbytes: int, align: int = 1) -> int:
        """Reserve ``nbytes`` bytes at an offset that is a multiple of ``align``; return the offset.

        First-fit: the lowest-addressed free block that can hold the request
        after aligning its start is used. The bytes skipped to reach the
        aligned start stay free, as does the remainder of the block.
        """
        nbytes = _as_count(nbytes, "allocation size", self._name)
        align = _as_count(align, "alignment", self._name)
        if nbytes <= 0:
            raise AllocationError(f"cannot allocate {nbytes} bytes in {self._name}: the size must be positive; "
                                  f"skip the allocation for an empty tensor")
        if align <= 0:
            raise AllocationError(f"alignment {align} for {self._name} is invalid; expected a positive byte count")
        starts, sizes = self._starts, self._sizes
        for i, (start, size) in enumerate(zip(starts, sizes, strict=True)):
            offset = _round_up(start, align)
            gap = offset - start
            if size < gap + nbytes:
                continue
            tail = size - gap - nbytes
            if gap:
                sizes[i] = gap
                if tail:
                    starts.insert(i + 1, offset + nbytes)
                    sizes.insert(i + 1, tail)
            elif tail:
                starts[i] = offset + nbytes
                sizes[i] = tail
            else:
                del starts[i]
                del sizes[i]
            self._used += nbytes
            return offset
        free_total = self._capacity - self._used
        aligned = f" aligned to {align} bytes" if align > 1 else ""
        raise AllocationError(
            f"cannot allocate {nbytes} bytes{aligned} in {self._name}: the largest free block is "
            f"{self.largest_free} bytes ({free_total} of {self._capacity} bytes free); {_FIX}")

    def free(self, offset: int, nbytes: int) -> None:
        """Return ``[offset, offset + nbytes)`` to the free space, merging it with adjacent free blocks.

        Raises :class:`AllocationError` if the range leaves the region or
        overlaps a free block (a double free or a wrong offset/size).
        """
        offset = _as_count(offset, "offset", self._name)
        nbytes = _as_count(nbytes, "free size", self._name)
        end = offset + nbytes
        if nbytes <= 0:
            raise AllocationError(f"cannot free {nbytes} bytes at offset {offset} in {self._name}: "
                                  f"the size must be positive; pass the size given to alloc")
        if offset < self._base or end > self._base + self._capacity:
            raise AllocationError(
                f"cannot free [{offset}, {end}) in {self._name}: the range leaves the region "
                f"[{self._base}, {self._base + self._capacity}); pass the offset and size returned by alloc")
        starts, sizes = self._starts, self._sizes
        i = bisect_right(starts, offset)  # starts[i-1] <= offset < starts[i]
        prev_end = starts[i - 1] + sizes[i - 1] if i else None
        has_next = i < len(starts)
        if (prev_end is not None and prev_end > offset) or (has_next and starts[i] < end):
            raise AllocationError(
                f"cannot free [{offset}, {end}) in {self._name}: part of the range is already free "
                f"(double free, or an offset/size that alloc did not return); free each allocation once, "
                f"with the offset and size of its alloc")
        merge_prev = prev_end == offset
        merge_next = has_next and starts[i] == end
        if merge_prev and merge_next:
            sizes[i - 1] += nbytes + sizes[i]
            del starts[i]
            del sizes[i]
        elif merge_prev:
            sizes[i - 1] += nbytes
        elif merge_next:
            starts[i] = offset
            sizes[i] += nbytes
        else:
            starts.insert(i, offset)
            sizes.insert(i, nbytes)
        self._used -= nbytes


class PEMemAllocator:
    """Physical memory of one PE: its HBM slice and the allocatable part of its TCM.

    The HBM slice is the PE's contiguous ``spec.hbm_slice_bytes`` of its
    cube's HBM, cube-wide offsets ``[pe * slice, (pe + 1) * slice)``. HBM
    allocations are aligned to the HBM burst (``spec.cube.hbm.burst_bytes``,
    256 bytes by default) so a tensor starts on a pseudo-channel boundary.

    The TCM's allocatable part is the *heap* of its
    :class:`~kernbench.topology.tcm_layout.TcmLayout`: the composite staging
    buffers below it and the kernel scratch (the top ``pe.tcm.scratch_mib``
    MiB) above it are never handed out here. TCM allocations are 16-byte
    aligned.
    """

    __slots__ = ("_cube", "_hbm", "_hbm_align", "_layout", "_pe", "_sip", "_tcm", "_where")

    def __init__(self, sip: int, cube: int, pe: int, spec: TopologySpec) -> None:
        """Build the allocators of PE ``pe`` of cube ``cube`` of SIP ``sip`` for topology ``spec``."""
        self._sip, self._cube, self._pe = sip, cube, pe
        self._where = nm.pe_prefix(sip, cube, pe)
        if not 0 <= pe < spec.pes_per_cube:
            raise AllocationError(f"{self._where}: PE {pe} does not exist; each cube has {spec.pes_per_cube} PEs")
        slice_bytes = spec.hbm_slice_bytes
        self._hbm = FreeList(slice_bytes, f"HBM slice of {self._where}", base=pe * slice_bytes)
        self._hbm_align = spec.cube.hbm.burst_bytes
        self._layout = TcmLayout.of(spec)
        lo, hi = self._layout.heap
        self._tcm = FreeList(hi - lo, f"TCM of {self._where}", base=lo)

    @property
    def hbm(self) -> FreeList:
        """The HBM-slice free list (cube-wide HBM offsets)."""
        return self._hbm

    @property
    def tcm(self) -> FreeList:
        """The TCM free list (TCM-local offsets of the heap: staging and scratch regions excluded)."""
        return self._tcm

    @property
    def tcm_scratch_range(self) -> tuple[int, int]:
        """The kernel scratch region as half-open TCM offsets ``(start, end)``, bytes."""
        return self._layout.scratch

    @property
    def tcm_staging_range(self) -> tuple[int, int]:
        """The composite staging buffers as half-open TCM offsets ``(start, end)``, bytes."""
        return self._layout.staging

    def alloc_hbm(self, nbytes: int, align: int | None = None) -> PhysAddr:
        """Allocate ``nbytes`` in this PE's HBM slice; ``align`` defaults to the HBM burst size."""
        offset = self._hbm.alloc(nbytes, self._hbm_align if align is None else align)
        return PhysAddr(self._sip, self._cube, "hbm", offset)

    def free_hbm(self, addr: PhysAddr, nbytes: int) -> None:
        """Free ``nbytes`` at ``addr``, an address returned by :meth:`alloc_hbm`."""
        self._check_owner(addr, "hbm")
        self._hbm.free(addr.offset, nbytes)

    def alloc_tcm(self, nbytes: int) -> PhysAddr:
        """Allocate ``nbytes`` (16-byte aligned) in this PE's TCM, outside the scratch region."""
        offset = self._tcm.alloc(nbytes, TCM_ALIGN_BYTES)
        return PhysAddr(self._sip, self._cube, "tcm", offset, self._pe)

    def free_tcm(self, addr: PhysAddr, nbytes: int) -> None:
        """Free ``nbytes`` at ``addr``, an address returned by :meth:`alloc_tcm`."""
        self._check_owner(addr, "tcm")
        self._tcm.free(addr.offset, nbytes)

    def _check_owner(self, addr: PhysAddr, kind: str) -> None:
        if not isinstance(addr, PhysAddr):
            raise AllocationError(f"{self._where}: expected a PhysAddr to free, got {addr!r}")
        pe_ok = addr.pe == self._pe if kind == "tcm" else True
        if addr.kind != kind or addr.sip != self._sip or addr.cube != self._cube or not pe_ok:
            raise AllocationError(f"cannot free {addr} with the {kind.upper()} allocator of {self._where}: "
                                  f"it belongs to another unit; free it with the allocator that returned it")

    def __repr__(self) -> str:
        return f"PEMemAllocator({self._where}, hbm={self._hbm!r}, tcm={self._tcm!r})"


class VirtualAllocator:
    """The device-wide virtual address space: page-aligned first-fit with coalescing.

    Models the VA range ``[base, base + size)`` the runtime maps tensors
    into. Every request is rounded up to whole pages of ``page_bytes`` and
    starts on a page boundary; :meth:`alloc` returns the virtual address as
    an int. ``free`` releases the same rounded-up size.
    """

    __slots__ = ("_list", "_page")

    def __init__(self, base: int = 1 << 32, size: int = 64 << 30, page_bytes: int = 4096) -> None:
        """Create a VA space of ``size`` bytes at ``base`` with pages of ``page_bytes`` bytes."""
        where = "virtual address space"
        base = _as_count(base, "base", where)
        size = _as_count(size, "size", where)
        page_bytes = _as_count(page_bytes, "page size", where)
        if page_bytes <= 0:
            raise AllocationError(f"page size {page_bytes} for the {where} is invalid; expected a positive "
                                  f"byte count")
        if base % page_bytes or size % page_bytes:
            raise AllocationError(f"the {where} [{base:#x}, +{size}) is not page-aligned; base and size must "
                                  f"be multiples of the {page_bytes}-byte page")
        self._page = page_bytes
        self._list = FreeList(size, where, base=base)

    @property
    def page_bytes(self) -> int:
        """Page size, bytes."""
        return self._page

    @property
    def base(self) -> int:
        """Lowest virtual address."""
        return self._list.base

    @property
    def capacity(self) -> int:
        """Size of the VA space, bytes."""
        return self._list.capacity

    @property
    def used(self) -> int:
        """Bytes allocated (whole pages)."""
        return self._list.used

    @property
    def largest_free(self) -> int:
        """Largest free block, bytes."""
        return self._list.largest_free

    @property
    def free_blocks(self) -> tuple[tuple[int, int], ...]:
        """Free blocks as ``(va, size)`` pairs in address order."""
        return self._list.free_blocks

    def pages_bytes(self, nbytes: int) -> int:
        """``nbytes`` rounded up to whole pages."""
        return _round_up(_as_count(nbytes, "size", "the virtual address space"), self._page)

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` rounded up to whole pages; return the page-aligned virtual address."""
        nbytes = _as_count(nbytes, "allocation size", self._list.name)
        if nbytes <= 0:
            return self._list.alloc(nbytes)  # raises the size error
        rounded = self.pages_bytes(nbytes)
        try:
            return self._list.alloc(rounded, self._page)
        except AllocationError:
            lst = self._list
            raise AllocationError(
                f"cannot allocate {nbytes} bytes ({rounded} bytes in whole {self._page}-byte pages) in the "
                f"{lst.name}: the largest free block is {lst.largest_free} bytes "
                f"({lst.capacity - lst.used} of {lst.capacity} bytes free); {_FIX}") from None

    def free(self, va: int, nbytes: int) -> None:
        """Release the pages of an allocation made by :meth:`alloc` with the same ``nbytes``."""
        nbytes = _as_count(nbytes, "free size", self._list.name)
        self._list.free(va, self.pages_bytes(nbytes) if nbytes > 0 else nbytes)

    def __repr__(self) -> str:
        return f"VirtualAllocator(base={self.base:#x}, capacity={self.capacity}, page_bytes={self._page})"


__all__ = ["TCM_ALIGN_BYTES", "AllocationError", "FreeList", "PEMemAllocator", "VirtualAllocator"]
