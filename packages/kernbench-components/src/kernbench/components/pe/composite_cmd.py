"""The composite command: a flat, ordered list of ops the PE scheduler turns into one pipelined run.

A :class:`CompositeCmd` carries ``ops`` (each an :class:`OpSpec`) and the
``rw_handles`` it reads and updates in place. The command has no "head" or
"epilogue" fields: the scheduler finds the *driver* of the tile loop and
places every other op by its position relative to the driver (the phase) and
its scope (the repetition within that phase):

=====================  ===============  ======================================
position               scope            runs
=====================  ===============  ======================================
before the driver      ``kernel``       once, in order, before the tile loop
the driver             —                drives the tile loop
after the driver       ``k_tile``       on every K step's partial block
after the driver       ``output_tile``  on every output block, before STORE
after the driver       ``kernel``       once over the whole output, at the end
=====================  ===============  ======================================

The driver is the GEMM op (at most one per command), or in a GEMM-free
command the first ``output_tile``-scoped elementwise head op; a command with
neither runs its ``kernel``-scoped ops once each, in order. Where data is
streamed follows the operands: a GEMM or head operand that is not
``pinned`` (still in HBM) is DMA-read block by block inside the loop, a
pinned one (already in TCM) is fetched in place; the output is DMA-written
only when it lives in HBM.

``logical_bytes`` is the descriptor size the PE_CPU pays to issue the
command (ADR 0013): framing, the op list and the read-write handle list.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.components.pe.commands import ENUM, FRAMING, HANDLE, LENGTH, OPCODE, extra_bytes
from kernbench.components.pe.operand import Operand
from kernbench.sim.protocol import Completion

SCOPES = ("kernel", "k_tile", "output_tile")


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One op of a composite: its kind, scope, named tensor operands, scalar extras and output tensor."""

    kind: str
    scope: str
    operands: dict[str, Operand] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    out: Operand | None = None

    @property
    def logical_bytes(self) -> int:
        """Descriptor size: opcode, scope, the operand list, the output address, the extras list."""
        return (OPCODE + ENUM + LENGTH + HANDLE * len(self.operands) + (HANDLE if self.out is not None else 0)
                + LENGTH + sum(extra_bytes(v) for v in self.extra.values()))


@dataclass(frozen=True, slots=True)
class CompositeCmd:
    """A flat op list run as one pipelined command; ``done`` fires when its last result is written."""

    ops: tuple[OpSpec, ...]
    rw_handles: tuple[Operand, ...]
    done: Completion = field(repr=False, compare=False)

    @property
    def logical_bytes(self) -> int:
        """Descriptor size (ADR 0013): framing, the op list, the read-write handle list."""
        return FRAMING + LENGTH + sum(op.logical_bytes for op in self.ops) + LENGTH + HANDLE * len(self.rw_handles)

    def ranges(self) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
        """(read ranges, write ranges) as ``(start, end)`` byte addresses, for hazard checks between commands."""
        reads = {(o.addr, o.addr + o.span) for op in self.ops for o in op.operands.values()}
        writes = {(op.out.addr, op.out.addr + op.out.span) for op in self.ops if op.out is not None}
        writes.update((o.addr, o.addr + o.span) for o in self.rw_handles)
        return tuple(reads), tuple(writes)


def overlaps(start: int, end: int, ranges) -> bool:
    """Whether the byte range ``[start, end)`` intersects any ``(start, end)`` range of ``ranges``."""
    return any(s < end and start < e for s, e in ranges)
