"""Math-engine operations of the kernel language: elementwise maps, reductions, layout changes and fills.

Each op checks its TCM operands, allocates its result in scratch and issues
one :class:`~kernbench.components.pe.commands.ComputeCmd` (FETCH, the math
engine, STORE). In data mode the command carries its numpy effect, computed
in f32 for f16 operands and rounded to the result's dtype.

:class:`ElementwiseOps` is mixed into :class:`~kernbench.tl.context.TLContext`;
it uses the context's operand checks (``_tcm``, ``_own``), scratch (``_new``),
issuer and hazard tracker.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

import numpy as np

from kernbench.components.dtypes import DTYPES
from kernbench.components.pe.commands import ComputeCmd
from kernbench.components.pe.math_kinds import UNARY
from kernbench.tl.tensors import TensorHandle, TLError

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    **{name: UNARY[name] for name in ("exp", "sqrt", "abs", "sigmoid")},  # the math engine's own kinds
    "log": np.log, "cos": np.cos, "sin": np.sin,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "maximum": np.maximum, "minimum": np.minimum,
}
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == np.float16 else x


class ElementwiseOps:
    """``tl.exp``, ``tl.maximum``, ``tl.sum``, ``tl.softmax``, ``tl.trans``, ``tl.full``, ... (the math engine)."""

    __slots__ = ()

    def _run(self, engine: str, op: str, inputs: Sequence[TensorHandle], out: TensorHandle, work: int,
             fn: Callable[..., np.ndarray], params: dict | None = None) -> TensorHandle:
        reads = [(h.addr, h.shape, h.dtype) for h in inputs]
        dst, shape, dtype = out.addr, out.shape, out.dtype

        def compute(mem) -> None:
            args = [_f32(mem.read_array(a, s, d)) for a, s, d in reads]
            mem.write(dst, np.asarray(fn(*args), dtype=np.float32 if dtype == "float16" else dtype)
                      .astype(dtype).reshape(shape))

        self._issuer.issue(ComputeCmd(engine, op, sum(h.nbytes for h in inputs), out.nbytes, work, self._issuer.event(),
                               compute, params or {}, len(inputs)))
        return out

    def _unary(self, op: str, x: TensorHandle) -> TensorHandle:
        self._tcm(op, x)
        return self._run("math", op, (x,), self._new(x.shape, x.dtype), x.size, _UNARY[op])

    def exp(self, x: TensorHandle) -> TensorHandle:
        """Elementwise e**x."""
        return self._unary("exp", x)

    def log(self, x: TensorHandle) -> TensorHandle:
        """Elementwise natural logarithm."""
        return self._unary("log", x)

    def sqrt(self, x: TensorHandle) -> TensorHandle:
        """Elementwise square root."""
        return self._unary("sqrt", x)

    def abs(self, x: TensorHandle) -> TensorHandle:
        """Elementwise absolute value."""
        return self._unary("abs", x)

    def sigmoid(self, x: TensorHandle) -> TensorHandle:
        """Elementwise 1 / (1 + e**-x)."""
        return self._unary("sigmoid", x)

    def cos(self, x: TensorHandle) -> TensorHandle:
        """Elementwise cosine."""
        return self._unary("cos", x)

    def sin(self, x: TensorHandle) -> TensorHandle:
        """Elementwise sine."""
        return self._unary("sin", x)

    def _binary(self, op: str, a, b) -> TensorHandle:
        handles = [x for x in (a, b) if isinstance(x, TensorHandle)]
        if not handles:
            raise TLError(f"tl.{op}: at least one operand must be a tensor")
        self._tcm(op, *handles)
        for x in (a, b):
            if not isinstance(x, (TensorHandle, int, float)):
                raise TLError(f"tl.{op}: operands must be tensors or Python numbers, got {type(x).__name__}")
        shapes = [x.shape for x in handles]
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise TLError(f"tl.{op}: shapes {shapes[0]} and {shapes[-1]} do not broadcast") from None
        dtype = handles[0].dtype
        if any(h.dtype != dtype for h in handles):
            raise TLError(f"tl.{op}: operands are {handles[0].dtype} and {handles[-1].dtype}; mixed dtypes are not "
                          f"supported, convert one first")
        fn = _BINARY[op]
        if isinstance(a, TensorHandle) and isinstance(b, TensorHandle):
            return self._run("math", op, (a, b), self._new(shape, dtype), math.prod(shape), fn)
        if isinstance(a, TensorHandle):
            sb = float(b)
            return self._run("math", op, (a,), self._new(shape, dtype), math.prod(shape), lambda x: fn(x, sb),
                             {"scalar": sb})
        sa = float(a)
        return self._run("math", op, (b,), self._new(shape, dtype), math.prod(shape), lambda y: fn(sa, y),
                         {"scalar": sa})

    def maximum(self, a, b) -> TensorHandle:
        """Elementwise maximum (tensor/tensor or tensor/number)."""
        return self._binary("maximum", a, b)

    def minimum(self, a, b) -> TensorHandle:
        """Elementwise minimum (tensor/tensor or tensor/number)."""
        return self._binary("minimum", a, b)

    def fma(self, a: TensorHandle, b: TensorHandle, c: TensorHandle) -> TensorHandle:
        """Elementwise a * b + c."""
        self._tcm("fma", a, b, c)
        shape = self._broadcast("fma", a, b, c)
        return self._run("math", "fma", (a, b, c), self._new(shape, a.dtype), math.prod(shape),
                         lambda x, y, z: x * y + z)

    def clamp(self, x: TensorHandle, lo: float, hi: float) -> TensorHandle:
        """Elementwise min(max(x, lo), hi)."""
        self._tcm("clamp", x)
        if lo > hi:
            raise TLError(f"tl.clamp: lo={lo} is above hi={hi}")
        return self._run("math", "clamp", (x,), self._new(x.shape, x.dtype), x.size, lambda v: np.clip(v, lo, hi))

    def where(self, cond: TensorHandle, a: TensorHandle, b: TensorHandle) -> TensorHandle:
        """Elementwise ``a`` where ``cond`` is non-zero, else ``b``."""
        self._tcm("where", cond, a, b)
        shape = self._broadcast("where", cond, a, b)
        return self._run("math", "where", (cond, a, b), self._new(shape, a.dtype), math.prod(shape),
                         lambda c, x, y: np.where(c != 0, x, y))

    def _broadcast(self, op: str, *handles: TensorHandle) -> tuple[int, ...]:
        try:
            return tuple(np.broadcast_shapes(*(h.shape for h in handles)))
        except ValueError:
            raise TLError(f"tl.{op}: shapes {[h.shape for h in handles]} do not broadcast") from None

    def _reduce(self, op: str, x: TensorHandle, axis: int | None, keepdims: bool = False) -> TensorHandle:
        self._tcm(op, x)
        if axis is not None and not -len(x.shape) <= axis < len(x.shape):
            raise TLError(f"tl.{op}: axis {axis} is out of range for shape {x.shape}")
        if axis is None:
            shape: tuple[int, ...] = (1,) * len(x.shape) if keepdims else (1,)
        else:
            ax = axis % len(x.shape)
            shape = tuple(1 if i == ax else s for i, s in enumerate(x.shape)) if keepdims else \
                tuple(s for i, s in enumerate(x.shape) if i != ax) or (1,)
        fn = _REDUCE[op]
        return self._run("math", op, (x,), self._new(shape, x.dtype), x.size,
                         lambda v: fn(v, axis=axis, keepdims=keepdims), {"axis": axis})

    def sum(self, x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:
        """Sum over ``axis`` (all elements when None); ``keepdims`` keeps the reduced axis with size 1."""
        return self._reduce("sum", x, axis, keepdims)

    def max(self, x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:
        """Maximum over ``axis`` (all elements when None); ``keepdims`` keeps the reduced axis with size 1."""
        return self._reduce("max", x, axis, keepdims)

    def min(self, x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:
        """Minimum over ``axis`` (all elements when None); ``keepdims`` keeps the reduced axis with size 1."""
        return self._reduce("min", x, axis, keepdims)

    def softmax(self, x: TensorHandle, axis: int = -1) -> TensorHandle:
        """Numerically stable softmax along ``axis``; the math engine makes four passes (max, exp, sum, divide)."""
        self._tcm("softmax", x)
        if not -len(x.shape) <= axis < len(x.shape):
            raise TLError(f"tl.softmax: axis {axis} is out of range for shape {x.shape}")

        def fn(v):
            e = np.exp(v - v.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

        return self._run("math", "softmax", (x,), self._new(x.shape, x.dtype), 4 * x.size, fn, {"axis": axis})

    def trans(self, x: TensorHandle) -> TensorHandle:
        """A real transpose of the last two axes, written to a new TCM tensor."""
        self._tcm("trans", x)
        if len(x.shape) < 2:
            raise TLError(f"tl.trans needs at least 2 dimensions, got shape {x.shape}")
        shape = (*x.shape[:-2], x.shape[-1], x.shape[-2])
        return self._run("math", "transpose", (x,), self._new(shape, x.dtype), x.size,
                         lambda v: np.swapaxes(v, -1, -2))

    def copy_to(self, dst: TensorHandle, src: TensorHandle) -> TensorHandle:
        """Copy a TCM tensor into another TCM tensor of the same shape and dtype (math engine, op ``copy``)."""
        for name, h in (("dst", dst), ("src", src)):
            if not isinstance(h, TensorHandle) or h.space != "tcm":
                raise TLError(f"tl.copy_to: {name} must be a TCM tensor, got {h!r}")
        self._tcm("copy_to", src)
        self._own(dst)
        self._hazards.await_ready(dst)  # a load or receive still filling dst would land after the copy
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise TLError(f"tl.copy_to: dst is {dst.shape} {dst.dtype} but src is {src.shape} {src.dtype}")
        self._hazards.sync(dst.addr, dst.addr + dst.nbytes, write=True)
        return self._run("math", "copy", (src,), dst, src.size, lambda v: v)

    def broadcast(self, x: TensorHandle, shape: Sequence[int]) -> TensorHandle:
        """A new TCM tensor holding ``x`` broadcast to ``shape`` (numpy rules); bytes follow the new shape."""
        self._tcm("broadcast", x)
        shape = self._shape("broadcast", shape)
        try:
            np.broadcast_shapes(x.shape, shape)
            if np.broadcast_shapes(x.shape, shape) != shape:
                raise ValueError
        except ValueError:
            raise TLError(f"tl.broadcast: shape {x.shape} cannot be broadcast to {shape}") from None
        return self._run("math", "broadcast", (x,), self._new(shape, x.dtype), math.prod(shape),
                         lambda v: np.broadcast_to(v, shape), {"shape": shape})

    def repeat(self, x: TensorHandle, axis: int, n: int) -> TensorHandle:
        """A new TCM tensor with every element of ``x`` repeated ``n`` times along ``axis`` (``numpy.repeat``)."""
        self._tcm("repeat", x)
        if not isinstance(n, int) or n < 1:
            raise TLError(f"tl.repeat: n must be a positive integer, got {n!r}")
        if not -len(x.shape) <= axis < len(x.shape):
            raise TLError(f"tl.repeat: axis {axis} is out of range for shape {x.shape}")
        ax = axis % len(x.shape)
        shape = tuple(s * n if i == ax else s for i, s in enumerate(x.shape))
        return self._run("math", "repeat", (x,), self._new(shape, x.dtype), math.prod(shape),
                         lambda v: np.repeat(v, n, axis=ax), {"axis": ax, "n": n})

    def full(self, shape: Sequence[int], value: float, dtype: str = "float32") -> TensorHandle:
        """A new TCM tensor filled with ``value``."""
        shape = self._shape("full", shape)
        self._dtype(dtype)
        out = self._new(shape, dtype)
        return self._run("math", "fill", (), out, out.size, lambda: np.full(out.shape, value), {"value": value})

    def zeros(self, shape: Sequence[int], dtype: str = "float32") -> TensorHandle:
        """A new TCM tensor of zeros."""
        return self.full(self._shape("zeros", shape), 0.0, dtype)

    def arange(self, start: int, stop: int | None = None, dtype: str = "int32") -> TensorHandle:
        """A new 1-D TCM tensor holding ``start, start+1, ..., stop-1``."""
        if stop is None:
            start, stop = 0, start
        if stop <= start:
            raise TLError(f"tl.arange({start}, {stop}) is empty")
        self._dtype(dtype)
        out = self._new((stop - start,), dtype)
        return self._run("math", "iota", (), out, out.size, lambda: np.arange(start, stop))

    def _dtype(self, dtype: str) -> None:
        if dtype not in DTYPES:
            raise TLError(f"unsupported dtype {dtype!r}; use one of {', '.join(DTYPES)}")
