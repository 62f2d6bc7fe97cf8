"""Kernel-side TCM buffers that live for the whole kernel and are reused from one step to the next.

A kernel that attends many (head, row block) steps cannot allocate its
running state and tile buffers afresh for each step: kernel-level scratch
is never released, and inside a ``tl.scratch_scope`` a composite's recipe
temporaries are fresh on every call, so a long loop would grow without
bound. :class:`Buffers` hands out one persistent buffer per (name, shape,
dtype), allocated the first time it is asked for; later steps reuse it. The
kernel language orders every reuse after the commands still reading or
writing the buffer (a load or receive into it waits for them), so reuse is
safe without explicit waits.
"""

from __future__ import annotations

import math

F32 = "float32"


class Buffers:
    """Persistent TCM buffers of one kernel, by name, shape and dtype (allocate outside any scratch scope)."""

    __slots__ = ("_bufs", "tl")

    def __init__(self, tl) -> None:
        self.tl = tl
        self._bufs: dict = {}

    def get(self, name, shape: tuple[int, ...], dtype: str = F32, fill: float = 0.0):
        """The buffer ``name`` of this shape and dtype; filled with ``fill`` when first allocated."""
        key = (name, tuple(shape), dtype)
        buf = self._bufs.get(key)
        if buf is None:
            buf = self._bufs[key] = self.tl.full(shape, fill, dtype)
        return buf

    def load(self, name, src):
        """Start a lazy DMA of the HBM block ``src`` into the buffer ``name`` of its shape; returns the buffer."""
        key = (name, tuple(src.shape), src.dtype)
        buf = self._bufs.get(key)
        if buf is None:
            buf = self._bufs[key] = self.tl.load(src)
        else:
            self.tl.load(src, out=buf)
        return buf

    def state(self, rows: int, d: int, *, transposed: bool = False, slot: int = 0):
        """A fresh online-softmax state ``(m, l, O)`` for ``rows`` query rows: ``m`` and ``l`` are ``(rows, 1)``
        (``(1, rows)`` when ``transposed``), ``O`` is ``(rows, d)``, all float32. States of different ``slot``
        numbers are distinct buffers (a kernel keeping several row blocks at once).

        NOTE: only ``m`` is reset to -inf on reuse. The first merge into a state
        multiplies ``l`` and ``O`` by ``exp(m - m_new) = exp(-inf) = 0``, and the
        values left there by the previous step are finite, so they vanish; this
        saves two copies per step.
        """
        shape = (1, rows) if transposed else (rows, 1)
        name = ("m_t" if transposed else "m", slot)
        key = (name, shape, F32)
        if key in self._bufs:
            self.tl.copy_to(self._bufs[key], self.get("m_init", shape, F32, -math.inf))
            m = self._bufs[key]
        else:
            m = self.get(name, shape, F32, -math.inf)
        return m, self.get(("l_t" if transposed else "l", slot), shape), self.get(("O", slot), (rows, d))
