"""The geometry of a tensor block a command names: address, shape, dtype, memory space and row pitch.

:class:`Operand` is the one block type of the PE: commands carry it, the
composite pipeline cuts it into tile blocks, and the kernel language's
tensor handles delegate their geometry to it. A 2-D block cut from a wider
row-major tensor keeps the parent's row *pitch* (bytes between the starts of
consecutive rows); a contiguous tensor has pitch 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernbench.components.dtypes import itemsize


@dataclass(frozen=True, slots=True)
class Operand:
    """A tensor block: encoded address, shape (elements), dtype, memory space and row pitch (bytes).

    ``space`` is ``"tcm"`` (the data is already in this PE's TCM: *pinned*)
    or ``"hbm"`` (anywhere else; streamed by DMA). ``pitch`` is the byte
    distance between rows of a 2-D block cut from a wider tensor (0: rows are
    contiguous).
    """

    addr: int
    shape: tuple[int, ...]
    dtype: str
    space: str
    pitch: int = 0

    @property
    def pinned(self) -> bool:
        """True when the data is already in TCM and needs no DMA."""
        return self.space == "tcm"

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        """Size of the tensor's data in bytes."""
        return math.prod(self.shape) * itemsize(self.dtype)

    @property
    def row_pitch(self) -> int:
        """Bytes between the starts of consecutive rows of a 2-D operand."""
        return self.pitch or self.shape[-1] * itemsize(self.dtype)

    @property
    def span(self) -> int:
        """Bytes from the first to the last byte the operand covers (a block spans its row pitch)."""
        if not self.pitch:
            return self.nbytes
        return (self.shape[0] - 1) * self.pitch + self.shape[1] * itemsize(self.dtype)

    def block_addr(self, r0: int, c0: int) -> int:
        """Address of element (r0, c0) of the 2-D operand (a block DMA's start)."""
        return self.addr + r0 * self.row_pitch + c0 * itemsize(self.dtype)

    def row_layout(self, cols: int) -> tuple[int, int]:
        """(row bytes, row pitch) of a block ``cols`` wide; (0, 0) when the block is one contiguous range."""
        if cols == self.shape[1] and not self.pitch:
            return 0, 0
        return cols * itemsize(self.dtype), self.row_pitch

    def block(self, r0: int, r1: int, c0: int, c1: int) -> Operand:
        """The 2-D block ``[r0:r1, c0:c1]`` of this 2-D operand; it keeps the row pitch unless it spans whole
        rows of a contiguous tensor."""
        pitch = self.row_pitch
        narrower = (c1 - c0) != self.shape[1] or self.pitch
        return Operand(self.addr + r0 * pitch + c0 * itemsize(self.dtype), (r1 - r0, c1 - c0), self.dtype,
                       self.space, pitch if narrower else 0)
