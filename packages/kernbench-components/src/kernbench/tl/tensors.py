"""The tensors a kernel sees: :class:`TensorArg` (a launch argument) and :class:`TensorHandle` (a kernel tensor).

A handle's geometry (address, shape, dtype, space, row pitch) is one
:class:`~kernbench.components.pe.operand.Operand`, the same block type the
PE's commands carry, so handing a tensor to a command copies nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kernbench.components.dtypes import nbytes
from kernbench.components.pe.operand import Operand
from kernbench.topology.address import PhysAddr
from kernbench.topology.errors import KernbenchError


class TLError(KernbenchError):
    """A kernel used the ``tl`` API wrongly (shapes, dtypes, foreign handles, HBM operands)."""


class TensorLease:
    """The host's hold on one deployed tensor, shared by every :class:`TensorArg` made from it.

    The runtime creates it with the tensor and marks it ``gone`` when the
    tensor is freed (or its session closes). A kernel checks it on every
    ``tl`` call that takes a tensor argument, so an argument kept past its
    tensor's life, or carried into a kernel of another session, fails
    before any command is issued instead of reaching memory that now holds
    something else.
    """

    __slots__ = ("gone", "label", "owner")

    def __init__(self, label: str, owner: object) -> None:
        self.label = label  # ``float16[8, 64]``
        self.owner = owner  # the session that created the tensor (anything with a ``name``)
        self.gone: str | None = None  # why the tensor's memory is no longer its own, once it is not

    def revoke(self, why: str) -> None:
        """The tensor's memory is released (``why``: ``"was freed"``, ...); every argument made from it is dead."""
        if self.gone is None:
            self.gone = why


@dataclass(frozen=True, slots=True)
class TensorArg:
    """A tensor argument as a PE receives it: its local shard's address, shape and dtype.

    With virtual addressing the argument also carries ``va`` (the shard's
    virtual address, when the shard is contiguous in the tensor's layout)
    and the whole tensor's virtual base and shape, so a kernel can address
    any part of it with :meth:`~kernbench.tl.context.TLContext.global_ref` (the PE's MMU
    translates each access). ``lease`` (set by the runtime) ties the argument
    to its tensor's life and session; hand-made arguments have none. A tensor
    passed by address only (``kernbench.runtime.by_address``) has no local
    shard on the PE: ``addr`` is None and ``shape`` empty, and only
    ``global_ref`` reaches it.
    """

    addr: PhysAddr | None
    shape: tuple[int, ...]
    dtype: str
    va: int | None = None
    tensor_va: int | None = None
    tensor_shape: tuple[int, ...] | None = None
    lease: TensorLease | None = field(default=None, compare=False, repr=False)

    @property
    def nbytes(self) -> int:
        """Size of the shard in bytes."""
        return nbytes(self.shape, self.dtype)


class TensorHandle:
    """A tensor inside a kernel: its block (where it lives, shape, dtype) and its state in the kernel.

    ``space`` is ``"hbm"`` (a reference made by ``tl.ref``: no data moved)
    or ``"tcm"`` (data in the PE's TCM). ``virtual`` handles hold a virtual
    address the PE's MMU translates on access. ``ready`` is the completion
    event of a lazy load or receive still filling the tensor, ``scope`` the
    scratch scope it was allocated in (0 = the kernel's outermost). ``lease``
    is the tensor argument's :class:`TensorLease` for a reference into one (and
    every block of it), so a reference made before the host freed the tensor
    dies with it.
    """

    __slots__ = ("ctx", "lease", "operand", "ready", "scope", "virtual")

    def __init__(self, ctx, operand: Operand, virtual: bool = False,
                 lease: TensorLease | None = None) -> None:  # ctx: the owning TLContext
        self.ctx = ctx
        self.operand = operand
        self.virtual = virtual
        self.lease = lease
        self.ready = None
        self.scope = 0

    @property
    def addr(self) -> int:
        """Encoded address (virtual when :attr:`virtual`)."""
        return self.operand.addr

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape in elements."""
        return self.operand.shape

    @property
    def dtype(self) -> str:
        """Element type."""
        return self.operand.dtype

    @property
    def space(self) -> str:
        """``"tcm"`` or ``"hbm"``."""
        return self.operand.space

    @property
    def pitch(self) -> int:
        """Bytes between rows of a 2-D block of a larger HBM tensor; 0 = contiguous."""
        return self.operand.pitch

    @property
    def span(self) -> int:
        """Bytes from the first to the last byte this handle covers (a block spans its row pitch)."""
        return self.operand.span

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self.operand.nbytes

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.operand.shape)

    def __getitem__(self, key) -> TensorHandle:
        """A 2-D block ``h[r0:r1, c0:c1]`` of an HBM tensor (a strided DMA source or destination)."""
        if self.space != "hbm" or len(self.shape) != 2:
            raise TLError("only 2-D HBM tensors can be sliced into blocks; slice before tl.load")
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, slice) for k in key)):
            raise TLError(f"block slicing takes two slices h[r0:r1, c0:c1], got {key!r}")
        for axis, k, size in zip(("rows", "columns"), key, self.shape, strict=True):
            bad = [v for v in (k.start, k.stop) if v is not None and not -size <= v <= size]
            if bad:  # slice.indices would clamp it silently to a smaller block
                raise TLError(f"block [{_slice_text(key[0])}, {_slice_text(key[1])}] is out of range for a tensor "
                              f"of shape {self.shape}: {axis} {_slice_text(k)} reach past its {size} {axis}; slice "
                              f"within the shape")
        (r0, r1, rs), (c0, c1, cs) = (k.indices(s) for k, s in zip(key, self.shape, strict=True))
        if rs != 1 or cs != 1 or r1 <= r0 or c1 <= c0:
            raise TLError(f"block {key!r} of a tensor of shape {self.shape} is empty or strided")
        return TensorHandle(self.ctx, self.operand.block(r0, r1, c0, c1), self.virtual, self.lease)

    def __repr__(self) -> str:
        return f"TensorHandle({self.space}, shape={self.shape}, dtype={self.dtype})"

    # Operators dispatch to the handle's own (running) kernel context.
    def __add__(self, other):
        return self.ctx._binary("add", self, other)

    def __radd__(self, other):
        return self.ctx._binary("add", other, self)

    def __sub__(self, other):
        return self.ctx._binary("sub", self, other)

    def __rsub__(self, other):
        return self.ctx._binary("sub", other, self)

    def __mul__(self, other):
        return self.ctx._binary("mul", self, other)

    def __rmul__(self, other):
        return self.ctx._binary("mul", other, self)

    def __truediv__(self, other):
        return self.ctx._binary("div", self, other)

    def __rtruediv__(self, other):
        return self.ctx._binary("div", other, self)

    def __neg__(self):
        return self.ctx._binary("mul", self, -1.0)

    def __matmul__(self, other):
        return self.ctx.dot(self, other)


def _slice_text(k: slice) -> str:
    """``0:1000`` for ``slice(0, 1000)`` (``:`` parts left out stay empty, a step is shown)."""
    text = f"{'' if k.start is None else k.start}:{'' if k.stop is None else k.stop}"
    return text if k.step is None else f"{text}:{k.step}"
