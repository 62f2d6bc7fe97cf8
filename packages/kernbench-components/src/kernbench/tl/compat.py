"""``tl.composite`` in the pointer form's spelling, lowered to the tensor spelling's composite.

The pointer form writes ``tl.composite(op, a, b=None, out_ptr=0,
math_op=None, epilogue=None, acc_dtype=None, tile_shape=None)``: ``op`` is
``"gemm"`` or ``"math"`` (with ``math_op`` naming the elementwise head),
``out_ptr`` is 0 for a result in new TCM scratch or a pointer for one
written to HBM, and a ``bias`` epilogue item names its vector ``"bias"``.
The later keywords (``prologue=``, ``out=``) pass through. The result is the
output tensor; ``tl.wait(result)`` waits for the composite, as a completion
handle did.

Every validation error is a :class:`CompositeError`, which is also a
``ValueError`` (the pointer form's contract raised ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kernbench.components.pe.math_kinds import HEADS
from kernbench.tl.tensors import TensorArg, TensorHandle, TLError


class CompositeError(TLError, ValueError):
    """A pointer-form ``tl.composite`` call is invalid (unknown op, missing field, wrong operand)."""


_F32 = ("f32", "fp32", "float", "float32")


class CompositeFront:
    """The pointer form's ``tl.composite`` (mixed into :class:`~kernbench.tl.pointers.PointerTL`)."""

    def composite(self, op: str | None = None, a=None, b=None, out_ptr=0, math_op: str | None = None,
                  epilogue: Sequence[dict] | None = None, acc_dtype: str | None = None, tile_shape=None, *,
                  prologue: Sequence[dict] = (), out: TensorHandle | None = None, x=None) -> TensorHandle:
        """One pipelined composite (non-blocking): ``epilogue(a @ b)`` for ``op="gemm"``, ``epilogue(math_op(a))``
        for ``op="math"``; returns its output tensor at once."""
        try:
            return self._composite(op, a, b, out_ptr, math_op, epilogue, acc_dtype, tile_shape, prologue, out, x)
        except CompositeError:
            raise
        except TLError as exc:
            if type(exc) is not TLError:  # DescriptorTooLarge, ScratchOverflowError, ...: keep their type
                raise
            raise CompositeError(str(exc)) from None

    def _composite(self, op, a, b, out_ptr, math_op, epilogue, acc_dtype, tile_shape, prologue, out, x):
        ctx = self._ctx
        self._composite_tile(tile_shape)
        if acc_dtype is not None and acc_dtype not in _F32:
            raise CompositeError(f"tl.composite: acc_dtype={acc_dtype!r}: the GEMM engine accumulates in float32 "
                                 f"only; leave acc_dtype out or give 'f32'")
        if x is not None:
            if a is not None:
                raise CompositeError("tl.composite: give the math operand as a= or x=, not both")
            a = x
        if op == "math":
            if math_op not in HEADS:
                raise CompositeError(f"tl.composite(op='math'): math_op={math_op!r} is not an elementwise head; use "
                                     f"one of {', '.join(HEADS)}")
            if isinstance(a, TensorArg) or (isinstance(a, TensorHandle) and a.space != "tcm") or \
                    not isinstance(a, TensorHandle):
                raise CompositeError("tl.composite(op='math'): the math operand must be a TCM tensor (tl.load it "
                                     "first)")
            head = math_op
        elif math_op is not None:
            raise CompositeError(f"tl.composite: math_op={math_op!r} goes with op='math', not op={op!r}")
        elif op is None or op == "gemm" or op in HEADS:
            head = op
        else:
            raise CompositeError(f"tl.composite: unknown op {op!r}; use 'gemm', 'math' (with math_op=) or one of "
                                 f"{', '.join(HEADS)}")
        items = [self._epilogue_item(item) for item in (epilogue or ())]
        if out_ptr is not None and not (isinstance(out_ptr, int) and not isinstance(out_ptr, bool) and out_ptr == 0):
            if out is not None:
                raise CompositeError("tl.composite: give out_ptr= or out=, not both")
            if head is None:
                raise CompositeError("tl.composite: out_ptr needs a head op (gemm or math)")
            out = self._composite_hbm_out(head, a, b, out_ptr)
        out_dtype = "float32" if acc_dtype is not None or not isinstance(a, TensorHandle) else a.dtype
        if head is None:
            return ctx.composite(prologue=prologue, epilogue=items, out=out, out_dtype=out_dtype)
        if head == "gemm":
            return ctx.composite(op="gemm", a=a, b=b, out=out, prologue=prologue, epilogue=items, out_dtype=out_dtype)
        if b is not None:
            raise CompositeError(f"tl.composite: a math head ({head}) takes one operand, a=; b= was given")
        return ctx.composite(op=head, x=a, out=out, prologue=prologue, epilogue=items, out_dtype=out_dtype)

    def _composite_tile(self, tile_shape) -> None:
        if tile_shape is None:
            return
        tile = tuple(self._ctx._tile)
        given = tuple(tile_shape) if isinstance(tile_shape, (tuple, list)) else (tile_shape,)
        if given not in (tile, tile[:2]):
            raise CompositeError(f"tl.composite: tile_shape={tile_shape!r} is not offered: the GEMM tile is the "
                                 f"topology's pe.gemm tile (tile_m, tile_n, tile_k) = {tile}; leave tile_shape out")

    def _composite_hbm_out(self, head: str, a, b, out_ptr) -> TensorHandle:
        """The HBM output block at ``out_ptr``: the result's shape in its tensor's dtype."""
        if not isinstance(a, TensorHandle):
            raise CompositeError("tl.composite: with out_ptr, give the 'a' operand as a tensor (the output shape "
                                 "follows it)")
        if head == "gemm":
            if not isinstance(b, TensorHandle):
                raise CompositeError("tl.composite: the GEMM needs a 'b' operand")
            shape = (a.shape[0], b.shape[-1])
        else:
            shape = a.shape
        ptr = self._resolve("composite", out_ptr)
        return self._block("composite", ptr, shape, ptr.arg.dtype)

    @staticmethod
    def _epilogue_item(item) -> dict:
        """An epilogue item in the tensor spelling (``bias`` names its vector ``vector``)."""
        if not isinstance(item, dict) or "op" not in item:
            raise CompositeError(f"tl.composite: each epilogue item is a dict with an 'op', got {item!r}")
        if item["op"] == "bias" and "bias" in item and "vector" not in item:
            item = {("vector" if k == "bias" else k): v for k, v in item.items()}
        return item
