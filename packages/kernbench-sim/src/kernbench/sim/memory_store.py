"""Byte-exact device memory for data mode, keyed by 51-bit physical address.

The store is sparse: memory is held in 64 KiB pages created on first write,
so a 48 GiB HBM costs nothing until touched. Unwritten bytes read as zero.
Typed access goes through numpy views; callers get copies, never views into
the store, so a later write cannot change a value already read.
"""

from __future__ import annotations

import numpy as np

PAGE_BITS = 16
PAGE_BYTES = 1 << PAGE_BITS


class MemoryStore:
    """Sparse byte memory over the physical address space."""

    __slots__ = ("_pages",)

    def __init__(self) -> None:
        self._pages: dict[int, np.ndarray] = {}

    def write(self, addr: int, data: np.ndarray | bytes) -> None:
        """Store ``data`` (any dtype, C order) starting at byte address ``addr``."""
        raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray)) else \
            np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        pos, end, off = addr, addr + raw.size, 0
        while pos < end:
            page, start = pos >> PAGE_BITS, pos & (PAGE_BYTES - 1)
            n = min(PAGE_BYTES - start, end - pos)
            buf = self._pages.get(page)
            if buf is None:
                buf = self._pages[page] = np.zeros(PAGE_BYTES, dtype=np.uint8)
            buf[start:start + n] = raw[off:off + n]
            pos += n
            off += n

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes at ``addr`` (zeros where never written)."""
        out = np.zeros(nbytes, dtype=np.uint8)
        pos, end, off = addr, addr + nbytes, 0
        while pos < end:
            page, start = pos >> PAGE_BITS, pos & (PAGE_BYTES - 1)
            n = min(PAGE_BYTES - start, end - pos)
            buf = self._pages.get(page)
            if buf is not None:
                out[off:off + n] = buf[start:start + n]
            pos += n
            off += n
        return out

    def read_array(self, addr: int, shape: tuple[int, ...], dtype: str | np.dtype) -> np.ndarray:
        """A copy of a C-ordered array of ``shape``/``dtype`` stored at ``addr``."""
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        return self.read(addr, n).view(dt).reshape(shape)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst`` (overlap-safe)."""
        self.write(dst, self.read(src, nbytes))

    def pages(self) -> list[tuple[int, bytes]]:
        """Every allocated page as ``(base address, its bytes)``, in address order (for digests and dumps)."""
        return [(page << PAGE_BITS, self._pages[page].tobytes()) for page in sorted(self._pages)]

    @property
    def bytes_touched(self) -> int:
        """Bytes of pages allocated so far."""
        return len(self._pages) * PAGE_BYTES
