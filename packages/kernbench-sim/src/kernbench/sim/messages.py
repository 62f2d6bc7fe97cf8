"""Request messages the host runtime and tools submit to :class:`GraphEngine`.

All are frozen: the engine stamps a correlation id on a separate
:class:`~kernbench.sim.engine.Request` rather than mutating the message.
Sizes are bytes; addresses are :class:`~kernbench.topology.PhysAddr`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.topology.address import PhysAddr


@dataclass(frozen=True, slots=True)
class MemoryWriteMsg:
    """Host-to-device write (H2D) of ``nbytes`` to ``dst`` over the direct memory path."""

    dst: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class MemoryReadMsg:
    """Device-to-host read (D2H): a command travels to ``src``, the data returns to the host."""

    src: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class PeDmaWriteMsg:
    """PE-initiated DMA write: PE (sip, cube, pe) pushes ``nbytes`` to ``dst``."""

    sip: int
    cube: int
    pe: int
    dst: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class PeDmaReadMsg:
    """PE-initiated DMA read: PE (sip, cube, pe) pulls ``nbytes`` from ``src``."""

    sip: int
    cube: int
    pe: int
    src: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class McpuDmaWriteMsg:
    """M_CPU-initiated DMA write from cube (sip, cube)'s M_CPU to ``dst``; skips PE pipelines."""

    sip: int
    cube: int
    dst: PhysAddr
    nbytes: int


Message = MemoryWriteMsg | MemoryReadMsg | PeDmaWriteMsg | PeDmaReadMsg | McpuDmaWriteMsg
