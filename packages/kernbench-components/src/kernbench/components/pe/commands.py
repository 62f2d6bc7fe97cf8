"""Commands a kernel issues to its PE, as frozen records.

A command carries what the engines need for timing (bytes, tiles, elements)
and, for data mode, a ``compute`` callable that applies the operation's
numeric effect to the memory store when the command completes. ``done`` is
the :class:`~kernbench.sim.protocol.Completion` the issuing kernel waits on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kernbench.sim.memory_store import MemoryStore
from kernbench.sim.protocol import Completion
from kernbench.topology.errors import KernbenchError

Compute = Callable[[MemoryStore], None]

# Descriptor field sizes (bytes) for the dispatch cost model (ADR 0013).
FRAMING, OPCODE, ENUM, HANDLE, SCALAR, LENGTH = 4, 1, 1, 8, 4, 1


def extra_bytes(value: object) -> int:
    """Descriptor bytes of one extra parameter: bool 1, number 4, tuple 1 + 4 per item, tag 1."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, (int, float)):
        return SCALAR
    if isinstance(value, (tuple, list)):
        return LENGTH + SCALAR * len(value)
    if isinstance(value, str) or value is None:
        return 1
    return SCALAR
VIRTUAL_CHANNELS = ("compute", "comm")


class CommandError(KernbenchError):
    """A PE command was built with an invalid field."""


@dataclass(frozen=True, slots=True)
class DmaCmd:
    """A DMA copy of ``nbytes`` from ``src`` to ``dst`` (encoded physical addresses).

    ``copy_data`` is False for a composite's staging transfers, whose numbers
    the composite computes from its operands directly. A 2-D block copy gives
    ``row_bytes`` and the byte pitch of rows at the source and destination.
    ``translate_ns`` is the MMU translation the DMA pays before it starts.
    ``vc`` is the virtual channel: ``"compute"`` (kernel data) or ``"comm"``
    (collective traffic), each with its own queues so one never waits behind
    the other.
    """

    src: int
    dst: int
    nbytes: int
    done: Completion = field(repr=False, compare=False)
    copy_data: bool = True
    row_bytes: int = 0
    src_pitch: int = 0
    dst_pitch: int = 0
    translate_ns: float = 0.0
    vc: str = "compute"

    def __post_init__(self) -> None:
        if self.vc not in VIRTUAL_CHANNELS:
            raise CommandError(f"unknown DMA virtual channel {self.vc!r}; use one of {', '.join(VIRTUAL_CHANNELS)}")

    @property
    def logical_bytes(self) -> int:
        """Descriptor size: framing, opcode, source and destination addresses, size (+ 2-D layout)."""
        return FRAMING + OPCODE + 2 * HANDLE + SCALAR + (3 * SCALAR if self.row_bytes else 0)

    @property
    def rows(self) -> int:
        """Rows of a 2-D (strided) copy; 1 for a contiguous one."""
        return self.nbytes // self.row_bytes if self.row_bytes else 1

    def copy(self, mem: MemoryStore) -> None:
        """Apply the copy to the memory store, row by row when strided."""
        if not self.row_bytes:
            mem.copy(self.dst, self.src, self.nbytes)
            return
        for r in range(self.rows):
            mem.copy(self.dst + r * self.dst_pitch, self.src + r * self.src_pitch, self.row_bytes)

    def span(self, pitch: int) -> int:
        """Bytes from the first to the last byte touched on the side with this pitch."""
        return (self.rows - 1) * pitch + self.row_bytes if self.row_bytes else self.nbytes


@dataclass(frozen=True, slots=True)
class DmaReadCmd(DmaCmd):
    """Read into this PE's TCM at ``dst`` from ``src`` (HBM, SRAM or another TCM), over the read channel."""


@dataclass(frozen=True, slots=True)
class DmaWriteCmd(DmaCmd):
    """Write this PE's TCM at ``src`` to ``dst`` anywhere in the system, over the write channel."""


@dataclass(frozen=True, slots=True)
class ComputeCmd:
    """A GEMM or math operation on TCM operands: FETCH inputs, compute, STORE the output.

    ``engine`` is ``"gemm"`` (``work`` = tiles, each costing a full tile) or
    ``"math"`` (``work`` = elements). Byte counts are what moves between TCM
    and the register file.
    """

    engine: str
    op: str
    fetch_bytes: int
    store_bytes: int
    work: int
    done: Completion = field(repr=False, compare=False)
    compute: Compute | None = field(default=None, repr=False, compare=False)
    params: dict = field(default_factory=dict, repr=False, compare=False)
    operands: int = 1

    @property
    def logical_bytes(self) -> int:
        """Descriptor size: framing, opcode, operand addresses, output address, extra parameters."""
        return (FRAMING + OPCODE + LENGTH + HANDLE * self.operands + HANDLE
                + LENGTH + sum(extra_bytes(v) for v in self.params.values()))


@dataclass(frozen=True, slots=True)
class CyclesCmd:
    """Keep the PE_CPU busy for ``cycles`` clock cycles (``tl.cycles``)."""

    cycles: int
    done: Completion = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class IpcqSendCmd:
    """Send ``nbytes`` of this PE's TCM at ``src`` to the neighbour in ``direction`` (PE_IPCQ).

    ``done`` fires when the IPCQ has taken the message (a slot was free);
    ``delivered`` when its last byte has landed in the peer's receive slot.
    """

    direction: str
    src: int
    nbytes: int
    done: Completion = field(repr=False, compare=False)
    delivered: Completion = field(repr=False, compare=False)

    @property
    def logical_bytes(self) -> int:
        """Descriptor size: framing, opcode, direction, source address, size."""
        return FRAMING + OPCODE + ENUM + HANDLE + SCALAR


@dataclass(frozen=True, slots=True)
class IpcqRecvCmd:
    """Receive the next ``nbytes`` message from ``direction`` into this PE's TCM at ``dst`` (PE_IPCQ).

    ``consume=False`` is the diagnostic form that skips the copy's time.
    """

    direction: str
    dst: int
    nbytes: int
    done: Completion = field(repr=False, compare=False)
    consume: bool = True

    @property
    def logical_bytes(self) -> int:
        """Descriptor size: framing, opcode, direction, destination address, size."""
        return FRAMING + OPCODE + ENUM + HANDLE + SCALAR
