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

import simpy

from kernbench.components.pe.commands import ENUM, FRAMING, HANDLE, LENGTH, OPCODE, CommandError, extra_bytes
from kernbench.components.pe.math_kinds import EPILOGUE, HEADS, STANDALONE
from kernbench.components.pe.operand import Operand
from kernbench.components.tiling import TilePlan, elementwise_plan, gemm_plan

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
    done: simpy.Event = field(repr=False, compare=False)

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


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A composite split into phases by the scheduler: what runs before, in and after its tile loop.

    ``driver`` is None for a composite of standalone ops only (all in
    ``pre``). ``a``, ``b`` and ``out`` are the driver's operands and output.
    """

    pre: tuple[OpSpec, ...]
    driver: OpSpec | None
    k_ops: tuple[OpSpec, ...]
    tile_ops: tuple[OpSpec, ...]
    post: tuple[OpSpec, ...]
    plan: TilePlan | None
    a: Operand | None
    b: Operand | None
    out: Operand | None


def _driver_index(ops: tuple[OpSpec, ...]) -> int | None:
    gemms = [i for i, op in enumerate(ops) if op.kind == "gemm"]
    if len(gemms) > 1:
        raise CommandError(f"a composite carries at most one GEMM op, got {len(gemms)} (ops {gemms})")
    if gemms:
        return gemms[0]
    for i, op in enumerate(ops):
        if op.scope != "kernel":
            if op.kind not in HEADS:
                raise CommandError(f"composite op {i} ({op.kind!r}) is tile-scoped but there is no driver before it; "
                                   f"a GEMM-free composite is driven by an elementwise head ({', '.join(HEADS)})")
            return i
    return None


def split(cmd: CompositeCmd, tile: tuple[int, int, int]) -> Pipeline:
    """Place the command's ops into phases and build the driver's tile plan with GEMM tile ``tile``.

    Raises :class:`CommandError` for a malformed command (two GEMMs, an
    epilogue kind before the driver, a standalone kind after it, missing
    operands).
    """
    ops = cmd.ops
    if not ops:
        raise CommandError("a composite needs at least one op")
    for op in ops:
        if op.scope not in SCOPES:
            raise CommandError(f"composite op {op.kind!r}: scope {op.scope!r} is not one of {', '.join(SCOPES)}")
    d = _driver_index(ops)
    pre = ops if d is None else ops[:d]
    for op in pre:
        kind = STANDALONE.get(op.kind)
        if kind is None or op.scope != "kernel" or op.out is None:
            raise CommandError(f"composite op {op.kind!r} before the driver must be a kernel-scoped standalone op "
                               f"with an output ({', '.join(STANDALONE)})")
        missing = [s for s in kind.slots if s not in op.operands] + [e for e in kind.extras if e not in op.extra]
        if missing:
            raise CommandError(f"composite op {op.kind!r} is missing {', '.join(missing)}")
    if d is None:
        return Pipeline(pre, None, (), (), (), None, None, None, None)
    driver = ops[d]
    after = ops[d + 1:]
    for op in after:
        if op.kind not in EPILOGUE:
            raise CommandError(f"composite op {op.kind!r} after the driver must be an epilogue op "
                               f"({', '.join(EPILOGUE)})")
    out = driver.out
    if out is None:
        raise CommandError(f"the composite's driver ({driver.kind!r}) needs an output")
    if driver.kind == "gemm":
        a, b = driver.operands.get("a"), driver.operands.get("b")
        if a is None or b is None:
            raise CommandError("the composite's GEMM needs operands 'a' and 'b'")
        m, k = a.shape
        n = b.shape[1]
        variant = f"{'load' if a.pinned else 'ref'}_{'load' if b.pinned else 'ref'}"
        plan = gemm_plan(m, n, k, tile=tile, itemsize_in=a.itemsize, itemsize_out=out.itemsize, variant=variant,
                         out_in_hbm=not out.pinned, itemsize_b=b.itemsize)
    else:
        a, b = driver.operands.get("x"), None
        if a is None:
            raise CommandError(f"the composite's head op {driver.kind!r} needs operand 'x'")
        plan = elementwise_plan(a.shape[0], a.shape[1], tile=tile[:2], itemsize_in=a.itemsize,
                                itemsize_out=out.itemsize, a_in_hbm=not a.pinned, out_in_hbm=not out.pinned)
    return Pipeline(
        pre=pre, driver=driver,
        k_ops=tuple(op for op in after if op.scope == "k_tile"),
        tile_ops=tuple(op for op in after if op.scope == "output_tile"),
        post=tuple(op for op in after if op.scope == "kernel"),
        plan=plan, a=a, b=b, out=out,
    )
