"""Deployed tensors: the :class:`Tensor` record, its shard shapes, and the host calls that create, read and free one.

A :class:`Tensor` is a logical shape and dtype placed by a
:class:`~kernbench.runtime.placement.DPPolicy` into shards, each an HBM range
on one PE. :class:`TensorOps` is the part of
:class:`~kernbench.runtime.context.RuntimeContext` that deploys them:
allocating every shard (:meth:`~TensorOps.empty`), writing them over the host
memory path (H2D), reading them back (D2H) or straight from memory
(:meth:`~TensorOps.peek`), and giving them back. It also checks that a tensor
handed to a session is a live tensor of that session.

This module also defines :class:`RuntimeApiError`, the error every part of the
host runtime raises for misuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kernbench.components.dtypes import DTYPES
from kernbench.runtime.placement import DPPolicy, Shard, resolve_shards
from kernbench.sim import MemoryReadMsg, MemoryWriteMsg
from kernbench.tl import TensorLease
from kernbench.topology.address import PhysAddr
from kernbench.topology.errors import KernbenchError
from kernbench.topology.safe_yaml import quote


class RuntimeApiError(KernbenchError):
    """Misuse of the host runtime (wrong device, data read without data mode, freed tensor, a tensor or handle of
    another session, a closed session)."""


@dataclass(eq=False)
class Tensor:
    """A deployed tensor: logical shape and dtype, its placement, one PA range per shard, and its session.

    Tensors compare by identity: two tensors of equal shape at equal
    addresses in two sessions are different tensors.
    """

    shape: tuple[int, ...]
    dtype: str
    policy: DPPolicy
    sip: int
    shards: list[tuple[Shard, PhysAddr]] = field(repr=False)
    freed: bool = False
    va: int | None = None
    owner: TensorOps | None = field(default=None, repr=False)  # the RuntimeContext that created it
    lease: TensorLease | None = field(default=None, repr=False)  # what its kernel arguments are checked against
    mapped_also: set[tuple[int, int, int]] = field(default_factory=set, repr=False)  # by_address launch PEs

    @property
    def label(self) -> str:
        """``float16[256, 256]``: dtype and shape, for messages."""
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    @property
    def nbytes(self) -> int:
        """Logical size in bytes (one copy)."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def shard_on(self, sip: int, cube: int, pe: int) -> tuple[Shard, PhysAddr] | None:
        """This tensor's shard on a PE, if it has one."""
        for shard, addr in self.shards:
            if (shard.sip, shard.cube, shard.pe) == (sip, cube, pe):
                return shard, addr
        return None


def assemble(t: Tensor, parts: list) -> np.ndarray:
    """The logical tensor from its shards' bytes (one ``uint8`` array per shard, in shard order)."""
    rows = math.prod(t.shape[:-1]) if len(t.shape) > 1 else 1
    cols = t.shape[-1] if t.shape else 1
    out = np.zeros((rows, cols), dtype=t.dtype)
    for (shard, _), raw in zip(t.shards, parts, strict=True):
        r, c = shard.rows, shard.cols
        out[r[0]:r[1], c[0]:c[1]] = raw.view(t.dtype).reshape(r[1] - r[0], c[1] - c[0])
    return out.reshape(t.shape)


def check_shape(shape: object) -> tuple[int, ...]:
    """``shape`` as a tuple of positive ints (an int is a 1-d shape); :class:`RuntimeApiError` otherwise."""
    dims = (shape,) if isinstance(shape, int) and not isinstance(shape, bool) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        raise RuntimeApiError(f"shape {quote(shape)} is not a shape; pass an int or a tuple of ints") from None
    if not dims or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in dims):
        raise RuntimeApiError(f"shape {quote(shape)} is invalid; expected one or more positive integers, e.g. "
                              f"(256, 256)")
    return tuple(int(d) for d in dims)


def shard_shape(shape: tuple[int, ...], shard: Shard) -> tuple[int, ...]:
    """The shape a kernel sees for one shard of a tensor of ``shape``: the whole shape when the shard is the
    whole tensor, ``(cols,)`` for a 1-d tensor, else ``(rows, cols)``."""
    rows, cols = shard.rows[1] - shard.rows[0], shard.cols[1] - shard.cols[0]
    if len(shape) <= 1:
        return (cols,)
    if (rows, cols) == (math.prod(shape[:-1]), shape[-1]):
        return shape
    return rows, cols


class TensorOps:
    """The tensor calls of :class:`~kernbench.runtime.context.RuntimeContext`: create, read back, free, check.

    Relies on the rest of the context for allocators (:mod:`~kernbench.runtime.memory`), virtual ranges
    (:mod:`~kernbench.runtime.mapping`), the current device and waiting (:mod:`~kernbench.runtime.devices`)
    and the session checks (:mod:`~kernbench.runtime.lifecycle`).
    """

    _tensors: list[Tensor]
    virtual: bool

    def empty(self, shape, dtype: str = "float16", policy: DPPolicy | None = None) -> Tensor:
        """Allocate a tensor's shards without writing them."""
        self._check_open("empty")
        shape = check_shape(shape)
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise RuntimeApiError(f"unsupported dtype {dtype!r}; use one of {', '.join(DTYPES)}")
        policy = policy or DPPolicy()
        shards = resolve_shards(shape, np.dtype(dtype).itemsize, policy, self.spec, self.device)
        placed: list[tuple[Shard, PhysAddr]] = []
        try:
            for shard in shards:
                placed.append((shard, self._allocator(shard.sip, shard.cube, shard.pe).alloc_hbm(shard.nbytes)))
        except KernbenchError:
            for shard, addr in placed:
                self._allocator(shard.sip, shard.cube, shard.pe).free_hbm(addr, shard.nbytes)
            raise
        t = Tensor(shape, dtype, policy, self.device, placed, owner=self)
        t.lease = TensorLease(t.label, self)
        if self.virtual:
            try:
                t.va = self._va.alloc(t.nbytes)
                self._map(t)
            except KernbenchError:
                for shard, addr in placed:
                    self._allocator(shard.sip, shard.cube, shard.pe).free_hbm(addr, shard.nbytes)
                if t.va is not None:
                    self._va.free(t.va, t.nbytes)
                raise
        self._tensors.append(t)
        return t

    def from_numpy(self, array: np.ndarray, policy: DPPolicy | None = None) -> Tensor:
        """Deploy a numpy array: allocate, then write every shard over the host memory path."""
        self._check_open("from_numpy")
        if np.ndim(array) == 0:  # np.ascontiguousarray would silently make it shape (1,)
            raise RuntimeApiError("from_numpy: a 0-d array has no shape to place; pass array.reshape(1)")
        array = array if isinstance(array, np.ndarray) else np.asarray(array)
        # Allocate first: a broadcast view of 128 GiB (np.broadcast_to) takes no memory until it is made
        # contiguous, so the device must refuse its size before the host is asked for the bytes. Without data
        # mode the values are never needed, so nothing is copied at all.
        t = self.empty(array.shape, str(array.dtype), policy)
        try:
            arr = np.ascontiguousarray(array) if self.data else array
        except BaseException:
            self.free(t)
            raise
        view = arr.reshape(1, -1) if arr.ndim <= 1 else arr.reshape(-1, arr.shape[-1])
        reqs = []
        for shard, addr in t.shards:
            part = view[shard.rows[0]:shard.rows[1], shard.cols[0]:shard.cols[1]] if self.data else None
            reqs.append(self.engine.submit(MemoryWriteMsg(addr, shard.nbytes, part.tobytes() if self.data else None)))
        self._drain(reqs)
        return t

    def zeros(self, shape, dtype: str = "float16", policy: DPPolicy | None = None) -> Tensor:
        """A deployed tensor of zeros (allocated first, so a shape beyond the device fails before any host memory
        is spent on it)."""
        self._check_open("zeros")
        t = self.empty(shape, dtype, policy)
        reqs = [self.engine.submit(MemoryWriteMsg(addr, shard.nbytes, bytes(shard.nbytes) if self.data else None))
                for shard, addr in t.shards]
        self._drain(reqs)
        return t

    def to_numpy(self, t: Tensor) -> np.ndarray:
        """Read a tensor back (D2H reads of every shard, simulated through the fabric) and assemble it; needs data
        mode. To check a result without spending simulated time on it, use :meth:`peek`."""
        self._live(t, "to_numpy")
        if not self.data:
            raise RuntimeApiError("to_numpy needs real numerics: create the context with data=True")
        reqs = [self.engine.submit(MemoryReadMsg(addr, shard.nbytes)) for shard, addr in t.shards]
        self._drain(reqs)
        return assemble(t, [req.result for req in reqs])

    def peek(self, t: Tensor) -> np.ndarray:
        """The tensor's current values, read straight from the simulated memory without a transfer; needs data mode.

        This is how benches and tests verify results: it submits no request,
        takes no simulated time and leaves no op-log row, so a run that checks
        its output reports exactly the timing of one that does not (invariant I4
        of docs/design.md, ADR 0027). :meth:`to_numpy` is the modelled read-back.
        """
        self._live(t, "peek", stopped_ok=True)
        if not self.data:
            raise RuntimeApiError("peek needs real numerics: create the context with data=True")
        memory = self.engine.memory
        return assemble(t, [memory.read(addr.encode(), shard.nbytes) for shard, addr in t.shards])

    def free(self, t: Tensor) -> None:
        """Release a tensor's shards; kernel arguments made from it die with it. In a session that has stopped
        (see :meth:`~kernbench.runtime.lifecycle.SessionLifecycle.close`) nothing is simulated: its memory is only
        given back."""
        self._live(t, "free", stopped_ok=True)
        self._retire(t, "was freed")
        for shard, addr in t.shards:
            self._allocator(shard.sip, shard.cube, shard.pe).free_hbm(addr, shard.nbytes)
        if t.va is not None:
            try:
                if self.engine.halted is None:
                    self._unmap(t)
            finally:
                self._va.free(t.va, t.nbytes)

    def _retire(self, t: Tensor, why: str) -> None:
        """Mark ``t`` freed and out of this session's list; its lease tells kernels ``why`` it is gone."""
        t.freed = True
        self._tensors.remove(t)
        if t.lease is not None:
            t.lease.revoke(why)

    def check_tensor(self, t: Tensor, use: str = "use") -> None:
        """:class:`RuntimeApiError` unless ``t`` is a live tensor of this open session (``use`` names the call)."""
        self._live(t, use)

    def _live(self, t: Tensor, use: str = "use", *, stopped_ok: bool = False) -> None:
        self._check_open(use, stopped_ok=stopped_ok)
        if not isinstance(t, Tensor):
            raise RuntimeApiError(f"{use}: expected a Tensor from this runtime, got {type(t).__name__}")
        if t.owner is not self:
            owner = t.owner.name if t.owner is not None else "no session"
            raise RuntimeApiError(f"{use}: tensor {t.label} belongs to {owner}, not to {self.name}; use a tensor "
                                  f"in the session that created it (copy it with to_numpy / from_numpy)")
        if t.freed:
            raise RuntimeApiError(f"{use}: tensor {t.label} was freed; create it again")
