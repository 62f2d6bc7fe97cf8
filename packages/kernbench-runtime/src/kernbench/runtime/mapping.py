"""A tensor's virtual address range, installed in and removed from the MMUs of the PEs that hold it.

With virtual addressing (a context's default) every tensor gets one range of
virtual addresses from the session's
:class:`~kernbench.runtime.allocator.VirtualAllocator`. :class:`VirtualMapping`
installs it with ``MmuMapMsg`` requests sent through the fabric, so their
latency is part of deploying the tensor, and removes it the same way when the
tensor is freed. Kernels can then address the tensor by virtual address,
including the shards other PEs hold (``tl.global_ref``).
"""

from __future__ import annotations

from itertools import chain, count, repeat

import numpy as np

from kernbench.components.pe.mmu import MmuMapMsg
from kernbench.runtime.allocator import VirtualAllocator
from kernbench.runtime.placement import Shard
from kernbench.runtime.tensors import Tensor
from kernbench.topology.address import PhysAddr


class VirtualMapping:
    """Mapping and unmapping a tensor's virtual range in the MMUs (part of
    :class:`~kernbench.runtime.context.RuntimeContext`)."""

    _va: VirtualAllocator

    def _map(self, t: Tensor) -> None:
        """Install the tensor's virtual range in the MMU of every PE holding part of it (through the fabric).

        Each PE maps every part of the tensor to one copy of it: its own shard
        where it holds that part, else a copy in its own cube (same PE index
        first), else the copy on the same PE index of the nearest-numbered
        cube. Replicated parts therefore always resolve to the closest copy,
        and a PE never maps one virtual byte twice.
        """
        self._map_on(t, [(s.sip, s.cube, s.pe) for s, _ in t.shards])

    def _map_also(self, t: Tensor, pes: list[tuple[int, int, int]]) -> None:
        """Install the tensor's virtual range in the MMUs of ``pes`` (sip, cube, pe) that do not map it yet, with
        the same choice of copies as :meth:`_map`; :meth:`_unmap` removes these entries with the rest. This is how
        a launch gives a tensor passed :func:`~kernbench.runtime.launching.by_address` to PEs without a shard."""
        holders = {(s.sip, s.cube, s.pe) for s, _ in t.shards}
        new = [pe for pe in dict.fromkeys(pes) if pe not in holders and pe not in t.mapped_also]
        if new:
            self._map_on(t, new)
            t.mapped_also.update(new)

    def _map_on(self, t: Tensor, pes: list[tuple[int, int, int]]) -> None:
        item = np.dtype(t.dtype).itemsize
        cols = t.shape[-1] if t.shape else 1
        copies: dict[tuple, list[tuple[Shard, PhysAddr]]] = {}
        for part in t.shards:
            copies.setdefault((part[0].rows, part[0].cols), []).append(part)
        entries_of: dict[int, tuple] = {}

        def entries(part) -> tuple:
            shard, addr = part
            key = id(shard)
            if key not in entries_of:
                (r0, r1), (c0, c1) = shard.rows, shard.cols
                pa = addr.encode()
                if c1 - c0 == cols:
                    entries_of[key] = ((t.va + r0 * cols * item, pa, shard.nbytes),)
                else:  # row r at t.va + (r * cols + c0) * item, packed in the shard at pa + (r - r0) * width
                    width, pitch = (c1 - c0) * item, cols * item
                    entries_of[key] = tuple(zip(count(t.va + (r0 * cols + c0) * item, pitch), count(pa, width),
                                                repeat(width, r1 - r0)))
            return entries_of[key]

        def closest(cube: int, pe: int, group):
            if len(group) == 1:  # a part held once: that copy
                return group[0]
            return min(group, key=lambda p: (p[0].pe != pe or p[0].cube != cube, p[0].cube != cube,
                                            p[0].pe != pe, abs(p[0].cube - cube), p[0].cube, p[0].pe))

        built: dict[tuple[int, ...], tuple] = {}  # PEs that map the same copies share one entries tuple
        reqs = []
        for sip, cube, pe in pes:
            chosen = [closest(cube, pe, group) for group in copies.values()]
            key = tuple(id(part) for part in chosen)  # the parts live in t.shards
            if key not in built:
                built[key] = tuple(chain.from_iterable(entries(part) for part in chosen))
            reqs.append(self.engine.submit(MmuMapMsg(sip, cube, pe, built[key])))
        self._drain(reqs)

    def _unmap(self, t: Tensor) -> None:
        """Remove the tensor's virtual range from the MMUs that mapped it."""
        pes = [*((s.sip, s.cube, s.pe) for s, _ in t.shards), *sorted(t.mapped_also)]
        reqs = [self.engine.submit(MmuMapMsg(sip, cube, pe, ((t.va, 0, t.nbytes),), unmap=True))
                for sip, cube, pe in pes]
        self._drain(reqs)
