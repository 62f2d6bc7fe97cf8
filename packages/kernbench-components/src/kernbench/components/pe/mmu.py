"""PE_MMU: the PE's page table, filled by ``MmuMapMsg`` over the fabric, read synchronously.

Mappings arrive as ``(va, pa, nbytes)`` entries. Page-aligned runs of whole
pages go into the page table; anything else becomes a sub-page region
(checked newest first, later mappings win). This lets a tensor shard that
does not start or end on a page boundary still be addressed by its virtual
address; a real MMU maps whole pages only, so regions are a modeling aid.

``translate`` costs no simulated time itself: the DMA that uses the
translated address pays ``pe.mmu_translate_ns``. An unmapped address, or a
range whose pages are not physically contiguous, raises :class:`MmuFault`.
"""

from __future__ import annotations

from kernbench.sim.component import Component
from kernbench.sim.messages import MmuMapMsg
from kernbench.topology.errors import KernbenchError


class MmuFault(KernbenchError):
    """A virtual address range is not mapped (or not contiguous) in a PE's MMU."""


class PeMmu(Component):
    """Page table + sub-page regions of one PE."""

    __slots__ = ("page", "pages", "regions", "translate_ns")

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.page = engine.spec.pe.mmu_page_bytes
        self.translate_ns = engine.spec.pe.mmu_translate_ns
        self.pages: dict[int, int] = {}
        self.regions: list[tuple[int, int, int]] = []

    def on_control(self, payload: object, t: float, transfer) -> None:
        """Install a mapping message; the host's request completes after the MMU's overhead."""
        if not isinstance(payload, MmuMapMsg):
            super().on_control(payload, t, transfer)
        for va, pa, nbytes in payload.entries:
            self.install(va, pa, nbytes)
        self.engine.finish(transfer.request, t + self.overhead_ns)

    def install(self, va: int, pa: int, nbytes: int) -> None:
        """Map ``nbytes`` from ``va`` to ``pa``."""
        page = self.page
        if va % page == 0 and pa % page == 0 and nbytes % page == 0:
            for i in range(nbytes // page):
                self.pages[va // page + i] = pa + i * page
        else:
            self.regions.append((va, va + nbytes, pa))

    def _lookup(self, va: int) -> tuple[int | None, int]:
        """Physical address of one byte and how many bytes from it the same mapping piece covers."""
        for lo, hi, pa in reversed(self.regions):
            if lo <= va < hi:
                return pa + (va - lo), hi - va
        vpn, off = divmod(va, self.page)
        base = self.pages.get(vpn)
        return (None, 0) if base is None else (base + off, self.page - off)

    def translate(self, va: int, nbytes: int) -> int:
        """The physical address of ``nbytes`` at ``va`` (they must be contiguous in physical memory)."""
        pos, end = va, va + max(nbytes, 1)
        first = expect = None
        while pos < end:
            pa, avail = self._lookup(pos)
            if pa is None:
                where = "is not mapped" if pos == va else f"runs past its mapping at {pos:#x}"
                raise MmuFault(f"{self.id}: virtual range {va:#x}+{nbytes} {where}; tensors are mapped on the PEs "
                               f"of their placement only")
            if first is None:
                first = pa
            elif pa != expect:
                raise MmuFault(f"{self.id}: virtual range {va:#x}+{nbytes} is not contiguous in physical memory "
                               f"(it reaches another shard at {pos:#x}); split the access at the shard boundary")
            step = min(avail, end - pos)
            pos += step
            expect = pa + step
        return first
