"""The composite planner: a :class:`CompositeCmd`'s flat op list placed into the phases of one pipelined run.

The scheduler calls :func:`split` on every composite it receives (the kernel
language calls it too, to refuse a malformed command at emit). It finds the
driver (the GEMM, or else the first tile-scoped elementwise head), checks
every op against the phase rules, and builds the driver's tile plan
(:mod:`~kernbench.components.tiling`); see
:mod:`~kernbench.components.pe.composite_cmd` for the phase table.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.components.pe.commands import CommandError
from kernbench.components.pe.composite_cmd import SCOPES, CompositeCmd, OpSpec
from kernbench.components.pe.math_kinds import EPILOGUE, HEADS, STANDALONE
from kernbench.components.pe.operand import Operand
from kernbench.components.tiling import TilePlan, elementwise_plan, gemm_plan


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
