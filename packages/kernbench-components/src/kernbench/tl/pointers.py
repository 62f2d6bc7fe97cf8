"""The pointer form of the kernel language: ``def kernel(a_ptr, ..., n, *, tl)``, a thin front over :class:`TLContext`.

Kernels written for the earlier simulator take their tensors as byte
addresses and ``tl`` as a keyword-only argument. Such a kernel is recognised
by its signature (:func:`pointer_form`); :func:`call_kernel` then hands it
a :class:`PointerTL` as ``tl=`` and every tensor argument of the launch as
a :class:`Pointer`, an ``int`` that remembers the tensor argument (and so
the tensor's lease) it points into. ``a_ptr + row * row_bytes`` is another
pointer into the same tensor; ``tl.load(ptr, shape, dtype)`` reads the
``shape`` elements stored row-major from that byte on.

Nothing here issues a command of its own: every call becomes the same
:class:`TLContext` call a kernel in the tensor spelling would make, so the
two spellings of one kernel cost the same simulated time. What differs is
only spelling (see ``docs/migration.md``): reductions keep the reduced axis
(size 1), ``tl.dot`` returns its inputs' dtype, dtypes may be written
``"f16"``/``"f32"``/``"i32"``, and ``program_id``/``num_programs`` default
to axis 0. Composites are in :mod:`kernbench.tl.compat`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from kernbench.components.dtypes import nbytes
from kernbench.components.pe.operand import Operand
from kernbench.tl.compat import CompositeFront
from kernbench.tl.tensors import TensorArg, TensorHandle, TLError
from kernbench.topology.address import decode

#: dtype spellings the pointer form accepts, each mapped to the name the rest of KernBench uses.
DTYPE_SPELLINGS: dict[str, str] = {
    "f16": "float16", "fp16": "float16", "half": "float16", "float16": "float16",
    "f32": "float32", "fp32": "float32", "float": "float32", "float32": "float32",
    "i32": "int32", "int32": "int32", "bool": "bool", "i1": "bool",
}


def dtype_name(op: str, dtype: str) -> str:
    """The KernBench name of a dtype spelling (``"f16"`` -> ``"float16"``); :class:`TLError` for an unknown one."""
    name = DTYPE_SPELLINGS.get(dtype) if isinstance(dtype, str) else None
    if name is None:
        known = ", ".join(DTYPE_SPELLINGS)
        hint = " (bfloat16 and 8-bit types are not modelled)" if str(dtype).lower() in ("bf16", "bfloat16", "i8",
                                                                                        "int8", "fp8") else ""
        raise TLError(f"tl.{op}: unknown dtype {dtype!r}{hint}; use one of {known}")
    return name


class Pointer(int):
    """A byte address inside one tensor argument of a launch.

    Its integer value is the encoded physical address (so it prints, compares
    and passes as an ``int``); adding or subtracting an integer gives another
    pointer into the same tensor argument. Any other arithmetic gives a plain
    ``int``, which the kernel language resolves back to the tensor argument
    holding it, or refuses. A pointer may leave its tensor while the kernel
    computes with it; it is checked where it is used.
    """

    def __new__(cls, arg: TensorArg, index: int, offset: int = 0) -> Pointer:
        if arg.addr is None:
            raise TLError(f"tensor argument {index} was passed by_address: a pointer-form kernel addresses its "
                          f"arguments through their local shards, and it has none on this PE; pass the tensor itself")
        base = arg.addr.encode()
        ptr = super().__new__(cls, base + offset)
        ptr.arg, ptr.index, ptr.offset = arg, index, offset
        return ptr

    def _moved(self, delta) -> Pointer:
        if isinstance(delta, bool) or not isinstance(delta, (int, np.integer)):
            return NotImplemented
        return Pointer(self.arg, self.index, self.offset + int(delta))

    def __add__(self, other):
        return self._moved(other)

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, Pointer):
            return int(self) - int(other)
        return self._moved(-other) if isinstance(other, (int, np.integer)) and not isinstance(other, bool) \
            else NotImplemented

    def __reduce__(self):
        return Pointer, (self.arg, self.index, self.offset)

    @property
    def label(self) -> str:
        """``tensor argument 1 (float16[64, 128])``."""
        shape = ", ".join(str(s) for s in self.arg.shape)
        return f"tensor argument {self.index} ({self.arg.dtype}[{shape}])"

    def __repr__(self) -> str:
        return f"Pointer({self.label} + {self.offset} bytes)"


def pointer_form(fn: Callable) -> bool:
    """Whether ``fn`` is a pointer-form kernel: it has a parameter named ``tl`` that is keyword-only, or that is
    not its first parameter (``def k(a_ptr, n, tl)``)."""
    try:
        params = list(inspect.signature(inspect.unwrap(fn)).parameters.values())
    except (TypeError, ValueError):
        return False
    for i, p in enumerate(params):
        if p.name == "tl":
            return p.kind is inspect.Parameter.KEYWORD_ONLY or i > 0
    return False


def call_kernel(fn: Callable, tl, args: Sequence):
    """Run a kernel body: ``fn(tl, *args)``, or for a pointer-form kernel ``fn(*pointers, tl=front)`` with its
    tensor arguments as :class:`Pointer` objects and ``tl`` a :class:`PointerTL` over the same context."""
    if not pointer_form(fn):
        return fn(tl, *args)
    front = PointerTL(tl, args)
    return fn(*front.arguments, tl=front)


class PointerTL(CompositeFront):
    """The ``tl`` a pointer-form kernel receives: the pointer spellings, each lowered to a :class:`TLContext` call.

    Every public ``TLContext`` operation not spelled differently here (``exp``,
    ``maximum``, ``fma``, ``where``, ``softmax``, ``trans``, ``copy_to``,
    ``scratch_scope``, ``wait``, ``cycles``, ...) is the context's own.
    """

    def __init__(self, ctx, args: Sequence) -> None:
        self._ctx = ctx
        self.arguments = tuple(Pointer(a, i) if isinstance(a, TensorArg) else a for i, a in enumerate(args))
        self._pointers = [p for p in self.arguments if isinstance(p, Pointer)]

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._ctx, name)

    def __repr__(self) -> str:
        return f"<pointer-form tl of kernel {self._ctx.kernel!r} on PE {self._ctx.pe}>"

    # ------------------------------------------------------------------ addresses
    def _resolve(self, op: str, ptr) -> Pointer:
        """The pointer ``ptr`` is, or the tensor argument a plain integer address falls in."""
        if isinstance(ptr, Pointer):
            return ptr
        if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)):
            raise TLError(f"tl.{op}: expected a pointer (a tensor argument plus a byte offset), got "
                          f"{type(ptr).__name__}")
        addr = int(ptr)
        for p in self._pointers:
            if int(p) <= addr < int(p) + p.arg.nbytes:
                return p + (addr - int(p))
        have = "; ".join(f"{p.label} at {int(p):#x}" for p in self._pointers) or "none"
        raise TLError(f"tl.{op}: address {addr:#x} is not inside any tensor argument of this launch ({have}); "
                      f"derive pointers from a tensor argument, e.g. a_ptr + row * row_bytes")

    def _block(self, op: str, ptr, shape, dtype: str) -> TensorHandle:
        """An HBM handle over the ``shape`` elements stored row-major at ``ptr``, checked to lie inside its tensor."""
        p = self._resolve(op, ptr)
        shape = self._ctx._shape(op, shape)
        dtype = dtype_name(op, dtype)
        size = nbytes(shape, dtype)
        if p.offset < 0 or p.offset + size > p.arg.nbytes:
            raise TLError(f"tl.{op}: {size} bytes ({dtype}{list(shape)}) at byte {p.offset} of {p.label} overrun it: "
                          f"it holds bytes 0..{p.arg.nbytes} on this PE; read a smaller shape or move the pointer")
        arg = p.arg
        if arg.lease is not None:
            self._ctx._check_arg(op, arg.lease)
        if arg.va is not None:
            h = TensorHandle(self._ctx, Operand(arg.va + p.offset, shape, dtype, "hbm"), virtual=True)
        else:
            h = TensorHandle(self._ctx, Operand(arg.addr.encode() + p.offset, shape, dtype, "hbm"))
        h.lease = arg.lease
        return h

    # ------------------------------------------------------------------ data movement
    def ref(self, ptr, shape=None, dtype: str = "f16") -> TensorHandle:
        """A handle over ``shape`` elements at ``ptr`` in HBM, without moving data (a composite streams it)."""
        if isinstance(ptr, TensorHandle):
            return self._ctx.ref(ptr)
        if shape is None:
            raise TLError("tl.ref(ptr, shape, dtype): give the shape of the block at ptr")
        return self._block("ref", ptr, shape, dtype)

    def load(self, ptr, shape=None, dtype: str = "f16", *, out: TensorHandle | None = None) -> TensorHandle:
        """Start a DMA of the ``shape`` elements stored row-major at ``ptr`` into the TCM; returns at once (the
        first reader waits for the data)."""
        if isinstance(ptr, TensorHandle):
            return self._ctx.load(ptr, out)
        if shape is None:
            raise TLError("tl.load(ptr, shape, dtype): give the shape to read at ptr")
        return self._ctx.load(self._block("load", ptr, shape, dtype), out)

    def store(self, ptr, value: TensorHandle) -> None:
        """DMA the TCM tensor ``value`` to the bytes at ``ptr`` (row-major); waits until written."""
        if isinstance(ptr, TensorHandle):
            return self._ctx.store(ptr, value)
        if not isinstance(value, TensorHandle):
            raise TLError(f"tl.store(ptr, value): value must be a tensor, got {type(value).__name__}")
        return self._ctx.store(self._block("store", ptr, value.shape, value.dtype), value)

    # ------------------------------------------------------------------ identity
    def program_id(self, axis: int = 0) -> int:
        """Axis 0: this PE's index among the launch's PEs in its cube; axis 1: the cube's index."""
        return self._ctx.program_id(axis)

    def num_programs(self, axis: int = 0) -> int:
        """Axis 0: the launch's PEs per cube; axis 1: its cubes."""
        return self._ctx.num_programs(axis)

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        """Ceiling division of integers."""
        return -(-a // b)

    # ------------------------------------------------------------------ values made in the TCM
    def zeros(self, shape, dtype: str = "f16") -> TensorHandle:
        """A new TCM tensor of zeros (one fill on the math engine)."""
        return self._ctx.zeros(shape, dtype_name("zeros", dtype))

    def full(self, shape, value: float, dtype: str = "f16") -> TensorHandle:
        """A new TCM tensor filled with ``value``."""
        return self._ctx.full(shape, value, dtype_name("full", dtype))

    def arange(self, start: int, end: int | None = None, dtype: str = "i32") -> TensorHandle:
        """A new 1-D TCM tensor ``start, ..., end - 1``."""
        return self._ctx.arange(start, end, dtype_name("arange", dtype))

    # ------------------------------------------------------------------ math with the pointer form's conventions
    def dot(self, a: TensorHandle, b: TensorHandle, out_dtype: str | None = None) -> TensorHandle:
        """``a @ b`` on the GEMM engine; the result has ``a``'s dtype unless ``out_dtype`` says otherwise."""
        if not isinstance(a, TensorHandle):
            raise TLError(f"tl.dot: operands must be TCM tensors, got {type(a).__name__}")
        return self._ctx.dot(a, b, a.dtype if out_dtype is None else dtype_name("dot", out_dtype))

    def sum(self, x: TensorHandle, axis: int | None = None) -> TensorHandle:
        """Sum over ``axis``, which is kept with size 1."""
        return self._ctx.sum(x, axis, keepdims=True)

    def max(self, x: TensorHandle, axis: int | None = None) -> TensorHandle:
        """Maximum over ``axis``, which is kept with size 1."""
        return self._ctx.max(x, axis, keepdims=True)

    def min(self, x: TensorHandle, axis: int | None = None) -> TensorHandle:
        """Minimum over ``axis``, which is kept with size 1."""
        return self._ctx.min(x, axis, keepdims=True)

    def clamp(self, x: TensorHandle, min: float, max: float) -> TensorHandle:
        """Elementwise ``min(max(x, min), max)``; the bounds are numbers (tensor bounds: tl.maximum/tl.minimum)."""
        for name, v in (("min", min), ("max", max)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise TLError(f"tl.clamp: {name} must be a number, got {type(v).__name__}; clamp to a tensor with "
                              f"tl.maximum and tl.minimum")
        return self._ctx.clamp(x, float(min), float(max))

    # ------------------------------------------------------------------ messages
    def _dir(self, op: str, dir: str | None, direction: str | None) -> str:
        d = dir if direction is None else direction
        if d is None:
            raise TLError(f"tl.{op}: give the direction, e.g. dir='intra_E'")
        return d

    def send(self, dir: str | None = None, src: TensorHandle | None = None, *,
             src_addr: int | None = None, nbytes: int | None = None, shape=None, dtype: str = "f16",
             space: str = "tcm", direction: str | None = None) -> None:
        """Send a TCM tensor, or ``nbytes`` (or ``shape``/``dtype``) at the TCM address ``src_addr``."""
        d = self._dir("send", dir, direction)
        if src is not None:
            return self._ctx.send(d, src)
        if space != "tcm":
            raise TLError(f"tl.send: space={space!r}: messages leave from the sender's TCM; tl.load the data first")
        if nbytes is None and shape is not None:
            nbytes = nbytes_of(self._ctx._shape("send", shape), dtype_name("send", dtype))
        return self._ctx.send(d, src_addr=None if src_addr is None else int(src_addr), nbytes=nbytes)

    def recv(self, dir: str | None = None, shape=None, dtype: str = "f16", space: str = "tcm",
             dst_addr: int | None = None, dst_space: str | None = None, *, direction: str | None = None
             ) -> TensorHandle:
        """Wait for the next message from ``dir`` into a new TCM tensor; with ``dst_addr`` and ``dst_space`` the
        message lands there instead (``"tcm"``: at that TCM address; ``"hbm"``: received, then stored)."""
        d = self._dir("recv", dir, direction)
        if space != "tcm":
            raise TLError(f"tl.recv: space={space!r}: a message is received into the TCM; give dst_addr= and "
                          f"dst_space='hbm' to store it on")
        if (dst_addr is None) != (dst_space is None):
            raise TLError("tl.recv: give both dst_addr= and dst_space= (copy to a destination), or neither")
        dtype = dtype_name("recv", dtype)
        if dst_space is None:
            return self._ctx.recv(d, shape, dtype)
        if dst_space == "hbm":
            h = self._ctx.recv(d, shape, dtype)
            self.store(dst_addr, h)
            return h
        if dst_space != "tcm":
            raise TLError(f"tl.recv: dst_space must be 'tcm' or 'hbm', got {dst_space!r}")
        where = decode(int(dst_addr))
        if where.kind != "tcm" or (where.sip, where.cube, where.pe) != tuple(self._ctx.pe):
            raise TLError(f"tl.recv: dst_addr {where} is not in this PE's TCM {self._ctx.pe}")
        out = TensorHandle(self._ctx, Operand(int(dst_addr), self._ctx._shape("recv", shape), dtype, "tcm"))
        return self._ctx.recv(d, out=out)

    def recv_async(self, dir: str | None = None, shape=None, dtype: str = "f16", *,
                   direction: str | None = None) -> TensorHandle:
        """Like :meth:`recv` but returns at once; ``tl.wait(future)`` (or its first reader) waits for it."""
        return self._ctx.recv_async(self._dir("recv_async", dir, direction), shape, dtype_name("recv_async", dtype))

    def recv_no_consume(self, dir: str | None = None, shape=None, dtype: str = "f16", *,
                        direction: str | None = None) -> TensorHandle:
        """DIAGNOSTIC ONLY, as in the tensor spelling: a receive without the time of copying out of the slot."""
        return self._ctx.recv_no_consume(self._dir("recv_no_consume", dir, direction), shape,
                                         dtype_name("recv_no_consume", dtype))


def nbytes_of(shape: tuple[int, ...], dtype: str) -> int:
    """Bytes of ``shape`` elements of ``dtype``."""
    return nbytes(shape, dtype)

