"""The composite builder: a ``tl.composite`` call checked and lowered to one :class:`CompositeCmd`.

It resolves the call forms (GEMM or elementwise head, positional or keyword
operands, prologue-only), expands prologue recipes (``kernbench.tl.recipes``)
into kernel-scoped math ops with their scratch, turns epilogue items into
ops, binds a recipe's primary output to the GEMM's ``a``, picks the output
(given, ``out_ptr``, or new scratch), and checks the result against the
scheduler's phase rules and the descriptor-size cap. It issues nothing: the
context issues the command and tracks it.

Recipe scratch allocated at kernel level (outside any scratch scope) is kept
per recipe and operand shapes and reused by later calls, so a loop of
composites does not grow the scratch.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernbench.components.pe.commands import CommandError
from kernbench.components.pe.composite_cmd import SCOPES, CompositeCmd, OpSpec
from kernbench.components.pe.composite_plan import split
from kernbench.components.pe.math_kinds import EPILOGUE, HEADS, STANDALONE, standalone_shape
from kernbench.components.pe.operand import Operand
from kernbench.tl.recipes import RECIPES
from kernbench.tl.tensors import TensorArg, TensorHandle, TLError


class DescriptorTooLarge(TLError, ValueError):
    """A composite's descriptor is larger than the topology's ``pe.cost_model.max_composite_logical_bytes``."""


class CompositeBuilder:
    """Lowers ``tl.composite`` calls of one kernel (``ctx``, its TLContext) to composite commands."""

    __slots__ = ("_recipe_slots", "ctx")

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._recipe_slots: dict[tuple, dict[str, TensorHandle]] = {}  # kernel-level recipe scratch, reused

    def build(self, operands: tuple, op: str | None, a, b, x, out, out_ptr, prologue: Sequence[dict],
              epilogue: Sequence[dict], out_dtype: str, done) -> tuple[CompositeCmd, TensorHandle]:
        """Check a ``tl.composite`` call and build its command (completing on ``done``) and its output handle."""
        head, inputs, positional_out = self._composite_head(operands, op, a, b, x, prologue)
        if positional_out is not None:
            if out is not None:
                raise TLError("tl.composite: the output was given positionally and as out=")
            out = positional_out
        ops: list[OpSpec] = []
        rw: list[TensorHandle] = []
        primary = None
        for item in prologue:  # a primary output handed back to the kernel gets its own memory
            primary = self._expand_recipe(item, ops, rw, fresh_primary=head is None)
        if head == "gemm":
            if inputs[0] is None:
                if primary is None:
                    raise TLError("tl.composite: the GEMM needs an 'a' operand (or a prologue recipe whose primary "
                                  "output it takes)")
                inputs[0] = primary
            elif primary is not None:
                raise TLError("tl.composite: auto-bind conflict: the prologue recipe's primary output would become "
                              "the GEMM's 'a', but 'a' was also given; leave 'a' out or drop the recipe")
        if head is None:
            if epilogue or out is not None or out_ptr is not None:
                raise TLError("tl.composite: a composite without a head takes no out, out_ptr or epilogue")
            result = primary if primary is not None else self._handle_of(ops[-1].out)
        else:
            ha, hb = (self._composite_operand(h, name) for h, name in zip(inputs, ("a", "b"), strict=False)) \
                if head == "gemm" else (self._composite_operand(inputs[0], "x"), None)
            m, n = self._head_shape(head, ha, hb)
            result = self._composite_out(out, out_ptr, (m, n), out_dtype)
            o = result.operand
            if head == "gemm":
                ops.append(OpSpec("gemm", "kernel", {"a": ha.operand, "b": hb.operand},
                                  {"m": m, "n": n, "k": ha.shape[1]}, o))
            else:
                ops.append(OpSpec(head, "output_tile", {"x": ha.operand}, {"m": m, "n": n}, o))
            ops.extend(self._epilogue(item, result) for item in epilogue)
            if all(h is not result for h in rw):
                rw.append(result)
        cmd = CompositeCmd(tuple(ops), tuple(h.operand for h in rw), done)
        try:
            split(cmd, self.ctx._tile)
        except CommandError as exc:
            raise TLError(f"tl.composite: {exc}") from None
        cap = self.ctx._descriptor_cap
        if cmd.logical_bytes > cap:
            raise DescriptorTooLarge(
                f"tl.composite: the descriptor would be {cmd.logical_bytes} bytes, over the {cap}-byte cap "
                f"(pe.cost_model.max_composite_logical_bytes); split the ops over two composites")
        return cmd, result

    def _composite_head(self, operands: tuple, op: str | None, a, b, x, prologue
                        ) -> tuple[str | None, list, object]:
        """The head op (None: prologue only), its input slots and a positional output, from the call forms."""
        if operands and isinstance(operands[0], str):
            if op is not None:
                raise TLError("tl.composite: give the head op positionally or as op=, not both")
            op, operands = operands[0], operands[1:]
        if op is None:
            op = "gemm" if (operands or a is not None or b is not None) else None
        if op is None:
            if x is not None or not prologue:
                raise TLError("tl.composite: nothing to run; give a head op with its operands or a prologue")
            return None, [], None
        if op != "gemm" and op not in HEADS:
            raise TLError(f"tl.composite: unknown head op {op!r}; use 'gemm' or one of {', '.join(HEADS)}")
        n_in = 2 if op == "gemm" else 1
        if operands:
            if a is not None or b is not None or x is not None:
                raise TLError("tl.composite: give the operands positionally or by keyword, not both")
            if len(operands) not in (n_in, n_in + 1):
                raise TLError(f"tl.composite({op!r}, ...) takes {n_in} input(s) and an optional output, "
                              f"got {len(operands)} operand(s)")
            return op, list(operands[:n_in]), operands[n_in] if len(operands) > n_in else None
        if op == "gemm":
            if x is not None:
                raise TLError("tl.composite: a GEMM takes a= and b=, not x=")
            if b is None:
                raise TLError("tl.composite: the GEMM needs a 'b' operand")
            return op, [a, b], None
        src = x if x is not None else a
        if src is None or b is not None:
            raise TLError(f"tl.composite({op!r}): give exactly one input, x=")
        return op, [src], None

    def _composite_operand(self, h, name: str) -> TensorHandle:
        """A head operand: owned, loaded (a pending lazy load is awaited) and physically addressed."""
        h = self.ctx._ref("composite", h) if isinstance(h, TensorArg) else h
        if not isinstance(h, TensorHandle):
            raise TLError(f"tl.composite: operand {name!r} must be a tensor, got {type(h).__name__}")
        self.ctx._own(h)
        self.ctx._hazards.await_ready(h)
        if len(h.shape) != 2:
            raise TLError(f"tl.composite: operand {name!r} must be 2-D, got shape {h.shape}")
        return self._physical(h)

    def _head_shape(self, head: str, ha: TensorHandle, hb: TensorHandle | None) -> tuple[int, int]:
        if head != "gemm":
            return ha.shape
        if ha.shape[1] != hb.shape[0]:
            raise TLError(f"tl.composite: shapes {ha.shape} and {hb.shape} do not form [M, K] @ [K, N]")
        return ha.shape[0], hb.shape[1]

    def _composite_out(self, out, out_ptr, shape: tuple[int, int], out_dtype: str) -> TensorHandle:
        """The composite's output handle: given (TCM or HBM), from ``out_ptr`` (HBM), or new TCM scratch."""
        if out is not None and out_ptr is not None:
            raise TLError("tl.composite: give out= or out_ptr=, not both")
        if out_ptr is not None:
            if not isinstance(out_ptr, int) or isinstance(out_ptr, bool):
                raise TLError(f"tl.composite: out_ptr must be an encoded HBM address (int), got {out_ptr!r}")
            self.ctx._dtype(out_dtype)
            ho = TensorHandle(self.ctx, Operand(out_ptr, shape, out_dtype, "hbm"))
            self.ctx._dma_target("composite", ho)
            return ho
        if out is None:
            self.ctx._dtype(out_dtype)
            return self.ctx._new(shape, out_dtype)
        ho = self.ctx._ref("composite", out) if isinstance(out, TensorArg) else out
        if not isinstance(ho, TensorHandle):
            raise TLError(f"tl.composite: out must be a tensor, got {type(ho).__name__}")
        self.ctx._own(ho)
        self.ctx._hazards.await_ready(ho)
        ho = self._physical(ho)
        if ho.shape != shape:
            raise TLError(f"tl.composite: output is {ho.shape} but the result is {shape}")
        if ho.space == "hbm":
            self.ctx._dma_target("composite", ho)
        return ho

    def _expand_recipe(self, item: dict, ops: list, rw: list, fresh_primary: bool = False) -> TensorHandle | None:
        """Append a prologue recipe's ops to ``ops`` (its RW operands to ``rw``); returns its primary output."""
        if not isinstance(item, dict) or "op" not in item:
            raise TLError(f"tl.composite: each prologue item is a dict with an 'op', got {item!r}")
        recipe = RECIPES.get(item["op"])
        if recipe is None:
            raise TLError(f"tl.composite: unknown prologue recipe {item['op']!r}; known: {', '.join(RECIPES)}")
        given = set(item) - {"op"}
        if given != set(recipe.operands):
            raise TLError(f"tl.composite: recipe {recipe.name!r} takes operands {', '.join(recipe.operands)}, "
                          f"got {', '.join(sorted(given)) or 'none'}")
        slots: dict[str, TensorHandle] = {}
        for name in recipe.operands:
            h = item[name]
            if isinstance(h, TensorArg) or (isinstance(h, TensorHandle) and h.space != "tcm"):
                raise TLError(f"tl.composite: recipe {recipe.name!r} operand {name!r} is in HBM; prologue recipe "
                              f"operands must be in the TCM (tl.load it first)")
            if not isinstance(h, TensorHandle):
                raise TLError(f"tl.composite: recipe {recipe.name!r} operand {name!r} must be a tensor, got "
                              f"{type(h).__name__}")
            self.ctx._own(h)
            self.ctx._hazards.await_ready(h)
            slots[name] = h
        internal = recipe.internal_slots
        scope_depth = self.ctx._scratch.nested
        cached = None if scope_depth else self._recipe_slots.get(
            (recipe.name, tuple((slots[n].shape, slots[n].dtype) for n in recipe.operands)))
        for step in recipe.steps:
            if step.kind == "gemm":
                srcs = dict(zip(("a", "b"), step.srcs, strict=True))
                shape = (slots[step.srcs[0]].shape[0], slots[step.srcs[1]].shape[1])
                extra = {"m": shape[0], "n": shape[1], "k": slots[step.srcs[0]].shape[1]}
            else:
                kind = STANDALONE.get(step.kind)
                if kind is None:
                    raise TLError(f"tl.composite: recipe {recipe.name!r} uses unknown op kind {step.kind!r}")
                srcs = dict(zip(kind.slots, step.srcs, strict=True))
                extra = dict(step.extra)
                try:
                    shape = standalone_shape(step.kind, tuple(slots[s].shape for s in step.srcs), extra)
                except ValueError:
                    raise TLError(f"tl.composite: recipe {recipe.name!r} step {step.kind!r}: operand shapes "
                                  f"{[slots[s].shape for s in step.srcs]} do not broadcast; check the shapes of "
                                  f"{', '.join(recipe.operands)}") from None
            dst = slots.get(step.dst)
            if dst is None:
                fresh = fresh_primary and step.dst == recipe.primary_out
                if cached is not None and not fresh and step.dst in cached:
                    dst = cached[step.dst]
                else:
                    dtype = slots[recipe.primary_dtype_from].dtype if step.dst == recipe.primary_out else "float32"
                    dst = self.ctx._new(shape, dtype)
                slots[step.dst] = dst
            if dst.shape != shape:
                raise TLError(f"tl.composite: recipe {recipe.name!r} writes a {shape} result of {step.kind!r} into "
                              f"{step.dst!r}, which is {dst.shape}; check the operand shapes")
            ops.append(OpSpec(step.kind, "kernel", {slot: slots[s].operand for slot, s in srcs.items()}, extra,
                              dst.operand))
        if not scope_depth:  # kernel-level slots are reused by later calls with the same shapes
            entry = self._recipe_slots.setdefault(
                (recipe.name, tuple((slots[n].shape, slots[n].dtype) for n in recipe.operands)), {})
            for name in internal:
                if name not in entry and not (fresh_primary and name == recipe.primary_out):
                    entry[name] = slots[name]
        for name, mode in recipe.operands.items():
            if mode == "RW" and all(h is not slots[name] for h in rw):
                rw.append(slots[name])
        return slots[recipe.primary_out] if recipe.primary_out else None

    def _handle_of(self, o: Operand) -> TensorHandle:
        return TensorHandle(self.ctx, Operand(o.addr, o.shape, o.dtype, o.space))

    def _physical(self, h: TensorHandle) -> TensorHandle:
        """The same tensor addressed physically (a composite's operand must be one contiguous range)."""
        if not h.virtual:
            return h
        addr, _ = self.ctx._phys(h)
        return TensorHandle(self.ctx, Operand(addr, h.shape, h.dtype, h.space, h.pitch))

    def _epilogue(self, item: dict, result: TensorHandle) -> OpSpec:
        if not isinstance(item, dict) or "op" not in item:
            raise TLError(f"tl.composite: each epilogue item is a dict with an 'op', got {item!r}")
        op = item["op"]
        if op not in EPILOGUE:
            raise TLError(f"tl.composite: unknown epilogue op {op!r}; known: {', '.join(EPILOGUE)}")
        operand_name, extras = EPILOGUE[op]
        fields = (*extras, *([operand_name] if operand_name else []))
        missing = [f for f in fields if f not in item]
        if missing:
            raise TLError(f"tl.composite: epilogue op {op!r} needs field(s) {', '.join(missing)}")
        scope = item.get("scope", "output_tile")
        scope = "kernel" if scope == "once" else scope
        if scope not in SCOPES:
            raise TLError(f"tl.composite: epilogue scope {scope!r} is invalid; use one of {', '.join(SCOPES)}")
        unknown = set(item) - {"op", "scope", *fields}
        if unknown:
            raise TLError(f"tl.composite: epilogue op {op!r} has unknown field(s) {', '.join(sorted(unknown))}")
        operands = {}
        if operand_name:
            h = item[operand_name]
            if not isinstance(h, TensorHandle) or h.space != "tcm":
                raise TLError(f"tl.composite: epilogue op {op!r}: {operand_name} must be a TCM tensor, got {h!r}")
            self.ctx._own(h)
            self.ctx._hazards.await_ready(h)
            n = result.shape[1]
            want = (n,) if op == "bias" else result.shape
            if h.shape != want:
                raise TLError(f"tl.composite: epilogue op {op!r}: {operand_name} must have shape {want}, "
                              f"got {h.shape}")
            operands[operand_name] = h.operand
        extra = {e: float(item[e]) for e in extras}
        return OpSpec(op, scope, operands, extra, result.operand)
