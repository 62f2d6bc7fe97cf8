"""Launching kernels from the host and waiting for them.

A launch targets the PEs holding the first tensor argument's shards; every
tensor argument must have a shard on each of those PEs, which the kernel
receives there as a :class:`~kernbench.tl.TensorArg` (its local shard, plus
virtual addresses when the tensor has them). A tensor wrapped in
:func:`by_address` is exempt: every PE receives it by its virtual address
only, with no local shard, and reaches any part of it with
``tl.global_ref`` (its MMU translating each access, the bytes crossing the
fabric from wherever they live). Other arguments (numbers, strings) pass
through unchanged. :class:`LaunchOps` submits one
``KernelLaunchMsg`` and returns a :class:`LaunchHandle`; ``wait`` runs the
simulation until it completes.

What a PE actually runs is the kernel wrapped in :class:`KernelBody`, which
ties its ``tl`` to the launching session and marks the greenlet as a kernel
so host calls made from it are refused (:func:`running_kernel`).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from greenlet import getcurrent

from kernbench.components.launch import KernelLaunchMsg, LaunchResult
from kernbench.runtime.placement import Shard
from kernbench.runtime.tensors import RuntimeApiError, Tensor, shard_shape
from kernbench.sim import Request
from kernbench.tl import TensorArg, TLContext, call_kernel
from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr


@dataclass(frozen=True)
class ByAddress:
    """A launch argument: ``tensor`` passed to every PE of the launch by its virtual address only (see
    :func:`by_address`)."""

    tensor: Tensor


def by_address(tensor: Tensor) -> ByAddress:
    """Pass ``tensor`` to a launch by its virtual address: every PE of the launch may address any part of it with
    ``tl.global_ref``, whether or not it holds a shard (``tl.ref``/``tl.load`` of it are refused, since it has no
    local shard to name). The tensor needs virtual addresses (a context made with ``virtual=True``, the default)."""
    if not isinstance(tensor, Tensor):
        raise RuntimeApiError(f"by_address: expected a tensor of this runtime, got {type(tensor).__name__}")
    return ByAddress(tensor)


@dataclass(eq=False)
class LaunchHandle:
    """A submitted launch of one session; :meth:`~kernbench.runtime.context.RuntimeContext.wait` completes it."""

    name: str
    request: Request
    owner: LaunchOps | None = field(default=None, repr=False)  # the RuntimeContext that launched it

    @property
    def result(self) -> LaunchResult | None:
        """Per-PE reports once the launch has completed."""
        return self.request.result


#: Greenlets running a kernel body launched by a runtime -> the kernel's name (host calls from them are refused).
_IN_KERNEL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def running_kernel() -> str | None:
    """The name of the kernel the calling greenlet is running, or None when it runs host code."""
    return _IN_KERNEL.get(getcurrent())


class KernelBody:
    """What a PE runs for ``launch(name, fn, ...)``: ``fn`` itself, inside a few checks.

    Before the body it binds the kernel's ``tl`` to its session (so tensor
    arguments of other sessions are refused) and marks its greenlet as a
    kernel (so ``torch.*`` host calls from it are refused). A ``SystemExit``
    becomes a failure of the launch, which leaves the session usable; a
    generator or coroutine returned instead of a result fails it too. After
    the body, :meth:`~kernbench.tl.TLContext.end_kernel` checks what it left.
    """

    __slots__ = ("__wrapped__", "name", "session")

    def __init__(self, fn: Callable, name: str, session: LaunchOps) -> None:
        self.__wrapped__ = fn  # what check_kernel and inspect.unwrap look at
        self.name = name
        self.session = session

    def __call__(self, tl, *args):
        me = getcurrent()
        _IN_KERNEL[me] = self.name
        try:
            if isinstance(tl, TLContext):
                tl.bind_session(self.session)
            try:
                out = call_kernel(self.__wrapped__, tl, args)  # fn(tl, *args), or fn(*ptrs, tl=tl)
            except SystemExit as exc:
                raise RuntimeApiError(f"the kernel raised SystemExit({exc.code!r}); a kernel cannot end the "
                                      f"program: return from it, or raise an exception to fail the launch") from None
            if inspect.isgenerator(out) or inspect.iscoroutine(out) or inspect.isasyncgen(out):
                kind = type(out).__name__
                if not inspect.isasyncgen(out):
                    out.close()  # no "never awaited" warning later
                raise RuntimeApiError(f"the kernel returned a {kind} instead of running its body; a kernel is a "
                                      f"plain function whose tl calls run as it is called (no yield, no async)")
            if isinstance(tl, TLContext):
                tl.end_kernel()
            return out
        finally:
            _IN_KERNEL.pop(me, None)


class LaunchOps:
    """Launching kernels and waiting for them (part of :class:`~kernbench.runtime.context.RuntimeContext`)."""

    _launches: list[LaunchHandle]

    def launch(self, name: str, fn: Callable, *args) -> LaunchHandle:
        """Launch ``fn(tl, *args)`` on every PE holding a shard of the first tensor argument."""
        self._check_open(f"launch {name!r}")
        if not callable(fn):
            raise RuntimeApiError(f"launch {name!r}: the kernel must be a function fn(tl, ...), got "
                                  f"{type(fn).__name__}")
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not tensors:
            raise RuntimeApiError(f"launch {name!r}: pass at least one tensor (not by_address) to decide the target "
                                  f"PEs")
        for t in tensors:
            self._live(t, f"launch {name!r}")
        for i, a in enumerate(args):
            if isinstance(a, ByAddress):
                self._live(a.tensor, f"launch {name!r}")
                if a.tensor.va is None:
                    raise RuntimeApiError(f"launch {name!r}: argument {i} is passed by_address but its tensor has no "
                                          f"virtual addresses; make the context with virtual=True (the default)")
        pes = sorted({(s.sip, s.cube, s.pe) for s, _ in tensors[0].shards})
        for a in args:
            if isinstance(a, ByAddress):
                self._map_also(a.tensor, pes)  # through the fabric, before the kernel can use it
        targets = []
        for pe in pes:
            pe_args = []
            for i, a in enumerate(args):
                if isinstance(a, ByAddress):
                    t = a.tensor
                    pe_args.append(TensorArg(None, (), t.dtype, None, t.va, t.shape, lease=t.lease))
                    continue
                if not isinstance(a, Tensor):
                    pe_args.append(a)
                    continue
                found = a.shard_on(*pe)
                if found is None:
                    raise RuntimeApiError(f"launch {name!r}: tensor argument {i} has no shard on PE "
                                          f"{nm.pe_prefix(*pe)}; place it with a DPPolicy that covers "
                                          f"the PEs of the first tensor argument")
                shard, addr = found
                pe_args.append(self._arg(a, shard, addr))
            targets.append((pe, tuple(pe_args)))
        body = KernelBody(fn, name, self)
        handle = LaunchHandle(name, self.engine.submit(KernelLaunchMsg(name, body, tuple(targets))), self)
        self._launches.append(handle)
        return handle

    def _arg(self, t: Tensor, shard: Shard, addr: PhysAddr) -> TensorArg:
        """What a PE receives for a tensor: its shard, plus virtual addresses when the tensor has them."""
        if t.va is None:
            return TensorArg(addr, shard_shape(t.shape, shard), t.dtype, lease=t.lease)
        cols = t.shape[-1] if t.shape else 1
        (r0, _), (c0, c1) = shard.rows, shard.cols
        va = t.va + r0 * cols * np.dtype(t.dtype).itemsize if c1 - c0 == cols else None
        return TensorArg(addr, shard_shape(t.shape, shard), t.dtype, va, t.va, t.shape, lease=t.lease)

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        """Run the simulation until the launch completes; raise the kernel's error if one failed."""
        self._own(handle, "wait")
        self._drain([handle.request])
        return handle.request.result

    def wait_all(self) -> None:
        """Wait for every launch submitted so far."""
        self._check_open("wait_all")
        self._drain([h.request for h in self._launches])

    def _own(self, handle: LaunchHandle, use: str) -> None:
        """:class:`RuntimeApiError` unless ``handle`` is a launch of this open session."""
        self._check_open(use)
        if not isinstance(handle, LaunchHandle):
            raise RuntimeApiError(f"{use}: expected a LaunchHandle from launch(), got {type(handle).__name__}")
        if handle.owner is not self:
            owner = handle.owner.name if handle.owner is not None else "no session"
            raise RuntimeApiError(f"{use}: launch {handle.name!r} belongs to {owner}, not to {self.name}; wait for "
                                  f"it in the session that launched it")
