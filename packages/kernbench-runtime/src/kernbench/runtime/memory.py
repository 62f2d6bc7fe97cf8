"""Device memory held by one session: a PE's TCM and HBM slice, and each cube's shared SRAM.

:class:`MemoryOps` is the part of :class:`~kernbench.runtime.context.RuntimeContext`
that owns the allocators. Every PE a session touches gets a
:class:`~kernbench.runtime.allocator.PEMemAllocator` (its TCM and its slice
of the cube's HBM) on first use, and every cube a
:class:`~kernbench.runtime.allocator.FreeList` over its SRAM. Tensor shards
take HBM from them; :meth:`~MemoryOps.reserve` and :meth:`~MemoryOps.release`
hand out memory that belongs to no tensor (IPCQ receive rings and other
buffers a package sets up for its kernels).
"""

from __future__ import annotations

from kernbench.runtime.allocator import FreeList, PEMemAllocator
from kernbench.runtime.tensors import RuntimeApiError
from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr


class MemoryOps:
    """Per-PE and per-cube allocators of a session, and reserving memory outside any tensor."""

    _alloc: dict[tuple[int, int, int], PEMemAllocator]
    _sram: dict[tuple[int, int], FreeList]

    def reserve(self, kind: str, sip: int, cube: int, pe: int, nbytes: int) -> PhysAddr:
        """Reserve ``nbytes`` of device memory outside any tensor: a PE's ``"tcm"`` or ``"hbm"``, or the cube's
        ``"sram"`` (``pe`` ignored). Used for buffers such as IPCQ receive rings; give it back with
        :meth:`release`."""
        self._check_open("reserve")
        if kind == "hbm":
            return self._allocator(sip, cube, pe).alloc_hbm(nbytes)
        if kind == "tcm":
            return self._allocator(sip, cube, pe).alloc_tcm(nbytes)
        if kind == "sram":
            region = self._sram_region(sip, cube)
            return PhysAddr(sip, cube, "sram", region.alloc(nbytes, 256), 0)
        raise RuntimeApiError(f"unknown memory kind {kind!r}; use tcm, sram or hbm")

    def release(self, kind: str, addr: PhysAddr, nbytes: int) -> None:
        """Give back memory from :meth:`reserve`."""
        self._check_open("release")
        if kind == "hbm":  # an HBM address names its PE through the slice its offset falls in
            self._allocator(addr.sip, addr.cube, addr.offset // self.spec.hbm_slice_bytes).free_hbm(addr, nbytes)
        elif kind == "tcm":
            self._allocator(addr.sip, addr.cube, addr.pe).free_tcm(addr, nbytes)
        else:
            self._sram_region(addr.sip, addr.cube).free(addr.offset, nbytes)

    def _sram_region(self, sip: int, cube: int) -> FreeList:
        """The free list of a cube's SRAM (made on first use)."""
        region = self._sram.get((sip, cube))
        if region is None:
            cap = int(self.spec.cube.sram.capacity_mib * (1 << 20))
            region = self._sram[(sip, cube)] = FreeList(cap, f"SRAM of {nm.cube_prefix(sip, cube)}")
        return region

    def _allocator(self, sip: int, cube: int, pe: int) -> PEMemAllocator:
        """The TCM and HBM allocator of a PE (made on first use)."""
        key = (sip, cube, pe)
        alloc = self._alloc.get(key)
        if alloc is None:
            alloc = self._alloc[key] = PEMemAllocator(sip, cube, pe, self.spec)
        return alloc
