"""Request messages the host runtime and tools submit to :class:`GraphEngine`.

All are frozen: the engine stamps a correlation id on a separate
:class:`~kernbench.sim.engine.Request` rather than mutating the message.
Sizes are bytes; addresses are :class:`~kernbench.topology.PhysAddr`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kernbench.topology.address import PhysAddr


@dataclass(frozen=True, slots=True)
class MemoryWriteMsg:
    """Host-to-device write (H2D) of ``nbytes`` to ``dst`` over the direct memory path.

    ``data`` (data mode only) is the payload committed to memory when the write completes.
    """

    dst: PhysAddr
    nbytes: int
    data: bytes | None = field(default=None, repr=False, compare=False)


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


@dataclass(frozen=True, slots=True)
class KernelLaunchMsg:
    """Launch kernel ``fn`` (named ``kernel``) on every target PE.

    ``targets`` lists ``((sip, cube, pe), args)``: each PE gets its own
    argument tuple (its local tensor shards). The host submits one message;
    IO_CPUs, M_CPUs and PE_CPUs fan it out over control paths.
    """

    kernel: str
    fn: Callable = field(repr=False, compare=False)
    targets: tuple[tuple[tuple[int, int, int], tuple], ...] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class MmuMapMsg:
    """Install (or, with ``unmap``, remove) virtual-to-physical mappings in PE (sip, cube, pe)'s MMU.

    ``entries`` are ``(va, pa, nbytes)``: ``nbytes`` bytes from virtual
    address ``va`` map to the encoded physical address ``pa`` onwards
    (``pa`` is ignored when unmapping).
    """

    sip: int
    cube: int
    pe: int
    entries: tuple[tuple[int, int, int], ...] = field(repr=False)
    unmap: bool = False


@dataclass(frozen=True, slots=True)
class SipLaunch:
    """The part of a :class:`KernelLaunchMsg` the host sends to one SIP's IO_CPU."""

    msg: KernelLaunchMsg
    sip: int
    targets: tuple[tuple[tuple[int, int, int], tuple], ...] = field(repr=False)


Message = MemoryWriteMsg | MemoryReadMsg | PeDmaWriteMsg | PeDmaReadMsg | McpuDmaWriteMsg | KernelLaunchMsg | MmuMapMsg
