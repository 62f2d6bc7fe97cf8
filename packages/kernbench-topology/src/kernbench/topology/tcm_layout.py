"""The layout of a PE's TCM: three disjoint regions, derived from the spec, that everyone reads from here.

::

    0                 staging_end                         scratch_start      capacity
    +-----------------+-----------------------------------+------------------+
    | composite       | heap: runtime allocations         | kernel scratch   |
    | staging buffers | (IPCQ receive rings, pinned data) | (tl temporaries) |
    +-----------------+-----------------------------------+------------------+

* **staging** — the composite pipeline's tile buffers: two per operand
  (``a``, ``b``, and the output ``c``) so a tile's DMA can land while the
  previous one is fetched; each holds the largest tile block
  (max(tm·tk, tk·tn, tm·tn) elements of the widest dtype, 4 bytes). Nothing
  else is ever handed these bytes.
* **heap** — what the host runtime allocates in the TCM
  (``PEMemAllocator.alloc_tcm``): IPCQ rings with the ``tcm`` buffer kind.
* **scratch** — the top ``pe.tcm.scratch_mib``: the running kernel's arena.

Offsets are TCM-local bytes; :meth:`TcmLayout.addr` encodes one for a PE.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.topology.address import PhysAddr
from kernbench.topology.errors import SpecError

MIB = 1 << 20
WIDEST_ITEM_BYTES = 4  # float32 / int32: the widest element a staging block holds
STAGING_OPERANDS = ("a", "b", "c")
STAGING_ALIGN = 256


@dataclass(frozen=True, slots=True)
class TcmLayout:
    """A PE's TCM regions as TCM-local byte offsets ``(start, end)``."""

    capacity: int
    block_bytes: int  # one staging buffer
    scratch_bytes: int

    @classmethod
    def of(cls, spec) -> TcmLayout:
        """The layout for topology ``spec`` (its TCM size, scratch size and GEMM tile)."""
        g = spec.pe.gemm
        tm, tn, tk = g.tile_m, g.tile_n, g.tile_k
        block = max(tm * tk, tk * tn, tm * tn) * WIDEST_ITEM_BYTES
        block = -(-block // STAGING_ALIGN) * STAGING_ALIGN
        return cls(int(spec.pe.tcm.capacity_mib * MIB), block, int(spec.pe.tcm.scratch_mib * MIB))

    @property
    def staging(self) -> tuple[int, int]:
        """The composite staging buffers: two per operand a, b, c."""
        return 0, 2 * len(STAGING_OPERANDS) * self.block_bytes

    @property
    def heap(self) -> tuple[int, int]:
        """What the runtime may allocate (IPCQ rings, pinned tensors)."""
        return self.staging[1], self.capacity - self.scratch_bytes

    @property
    def scratch(self) -> tuple[int, int]:
        """The kernel scratch arena at the top."""
        return self.capacity - self.scratch_bytes, self.capacity

    def staging_offset(self, operand: str, buffer: int) -> int:
        """Offset of staging buffer ``buffer`` (0 or 1) of ``operand`` (``a``, ``b`` or ``c``)."""
        return (2 * STAGING_OPERANDS.index(operand) + (buffer & 1)) * self.block_bytes

    @staticmethod
    def addr(sip: int, cube: int, pe: int, offset: int) -> int:
        """The encoded address of TCM offset ``offset`` of PE (sip, cube, pe)."""
        return PhysAddr(sip, cube, "tcm", offset, pe).encode()

    def check(self, source: str) -> None:
        """Raise :class:`SpecError` when the regions do not fit the TCM."""
        lo, hi = self.heap
        if hi < lo:
            raise SpecError(f"{source}: field 'pe.tcm.scratch_mib' = {self.scratch_bytes / MIB:g} leaves no room in "
                            f"the {self.capacity / MIB:g} MiB TCM for the {lo} bytes of composite staging buffers "
                            f"(two per operand of the pe.gemm tile); lower pe.tcm.scratch_mib or raise "
                            f"pe.tcm.capacity_mib")
