"""The host runtime: a PyTorch-like object that deploys tensors and launches kernels on one SIP.

``RuntimeContext`` owns the engine for a compiled topology, per-PE
allocators and the tensors it created. Tensors are placed by a
:class:`DPPolicy` into shards, each a physical-address range tagged with its
``(sip, cube, pe)``; creating one allocates every shard and writes it over
the host memory path (H2D), and reading one back issues D2H reads. Every
call that touches the device runs the simulation until its requests
complete, so host code reads top to bottom like a synchronous script; the
simulated clock (:attr:`now_ns`) advances accordingly.

With virtual addressing (the default) every tensor also gets a range of
virtual addresses, installed in the MMUs of the PEs that hold it with
``MmuMapMsg`` requests through the fabric (their latency is part of
deployment); kernels may then address a tensor by virtual address,
including other PEs' shards (``tl.global_ref``).

A launch targets the PEs holding the first tensor argument's shards; every
tensor argument must have a shard on each of those PEs, which the kernel
receives as a :class:`~kernbench.tl.TensorArg` (its local shard). Other
arguments (numbers, strings) pass through unchanged.

A tensor and a launch handle belong to the context that created them: passing
one to another context, or using a context after :meth:`RuntimeContext.close`
(the end of a ``with session(...)`` block), raises :class:`RuntimeApiError`
naming both, before anything changes. The same holds inside kernels: every
:class:`~kernbench.tl.TensorArg` carries its tensor's
:class:`~kernbench.tl.TensorLease`, so a kernel using an argument whose tensor
was freed, or one kept from a kernel of another session, fails before it
issues anything. Host calls (``torch.*``) made from inside a running kernel
are refused.

A session whose run stopped (a simulation budget ran out, or an interrupt
such as Ctrl-C unwound the simulator mid-step) stays stopped: it refuses
further work with a message saying why, and closing it frees its memory
without simulating, so the limit is not raised again at the end of the
``with`` block. A kernel that raises ``SystemExit`` fails its launch like any
other error; ``KeyboardInterrupt`` still interrupts the program.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from greenlet import getcurrent

from kernbench.components import default_registry
from kernbench.components.dtypes import DTYPES
from kernbench.components.launch import KernelLaunchMsg, LaunchResult
from kernbench.components.pe.mmu import MmuMapMsg
from kernbench.runtime.allocator import FreeList, PEMemAllocator, VirtualAllocator
from kernbench.runtime.extensions import EXTENSIONS, ExtensionRegistry
from kernbench.runtime.placement import DPPolicy, Shard, resolve_shards
from kernbench.sim import ComponentRegistry, GraphEngine, MemoryReadMsg, MemoryWriteMsg, Request
from kernbench.sim.limits import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_RECORDS,
    DEFAULT_MAX_SIM_NS,
    DEFAULT_SESSION_TIMEOUT_S,
    Limits,
    watchdog,
)
from kernbench.sim.links import LinkRecord, link_records
from kernbench.tl import TensorArg, TensorLease, TLContext
from kernbench.topology import TopologyGraph, resolve
from kernbench.topology import naming as nm
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
    owner: RuntimeContext | None = field(default=None, repr=False)
    lease: TensorLease | None = field(default=None, repr=False)  # what its kernel arguments are checked against

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


@dataclass(eq=False)
class LaunchHandle:
    """A submitted launch of one session; :meth:`RuntimeContext.wait` completes it."""

    name: str
    request: Request
    owner: RuntimeContext | None = field(default=None, repr=False)

    @property
    def result(self) -> LaunchResult | None:
        """Per-PE reports once the launch has completed."""
        return self.request.result


def _assemble(t: Tensor, parts: list) -> np.ndarray:
    """The logical tensor from its shards' bytes (one ``uint8`` array per shard, in shard order)."""
    rows = math.prod(t.shape[:-1]) if len(t.shape) > 1 else 1
    cols = t.shape[-1] if t.shape else 1
    out = np.zeros((rows, cols), dtype=t.dtype)
    for (shard, _), raw in zip(t.shards, parts, strict=True):
        r, c = shard.rows, shard.cols
        out[r[0]:r[1], c[0]:c[1]] = raw.view(t.dtype).reshape(r[1] - r[0], c[1] - c[0])
    return out.reshape(t.shape)


def _check_shape(shape: object) -> tuple[int, ...]:
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


def _shard_shape(shape: tuple[int, ...], shard: Shard) -> tuple[int, ...]:
    rows, cols = shard.rows[1] - shard.rows[0], shard.cols[1] - shard.cols[0]
    if len(shape) <= 1:
        return (cols,)
    if (rows, cols) == (math.prod(shape[:-1]), shape[-1]):
        return shape
    return rows, cols


#: Waits a host thread of control may hand to a scheduler: returns True when it waited for the requests itself.
WaitHook = Callable[[list[Request]], bool]

#: Greenlets running a kernel body launched by a runtime -> the kernel's name (host calls from them are refused).
_IN_KERNEL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _KernelBody:
    """What a PE runs for ``launch(name, fn, ...)``: ``fn`` itself, inside a few checks.

    Before the body it binds the kernel's ``tl`` to its session (so tensor
    arguments of other sessions are refused) and marks its greenlet as a
    kernel (so ``torch.*`` host calls from it are refused). A ``SystemExit``
    becomes a failure of the launch, which leaves the session usable; a
    generator or coroutine returned instead of a result fails it too. After
    the body, :meth:`~kernbench.tl.TLContext.end_kernel` checks what it left.
    """

    __slots__ = ("__wrapped__", "name", "session")

    def __init__(self, fn: Callable, name: str, session: RuntimeContext) -> None:
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
                out = self.__wrapped__(tl, *args)
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


class RuntimeContext:
    """Host API over one simulated device (SIP ``device``) of a compiled topology.

    A bare context has no wall-clock limit (it has no block to bound): run it under
    :func:`kernbench.sim.limits.watchdog`, or use :func:`session`, whose block has a default one.

    ``device`` is per host thread of control: worker greenlets started by a
    launcher can each bind their own SIP (:meth:`bind_device`); everything
    else uses the device given here.
    """

    _numbers = itertools.count(1)

    def __init__(self, graph: TopologyGraph, *, device: int = 0, data: bool = False,
                 registry: ComponentRegistry | None = None, trace: bool = False, virtual: bool = True,
                 extensions: ExtensionRegistry | None = None, limits: Limits | None = None) -> None:
        self.number = next(self._numbers)
        self.closed = False
        self.graph = graph
        self._check_device(device)
        self._default_device = device
        self._device_of: dict = {}  # greenlet -> SIP bound by bind_device
        self.engine = GraphEngine(graph, registry or default_registry(), trace=trace, data=data, limits=limits)
        self._alloc: dict[tuple[int, int, int], PEMemAllocator] = {}
        self._sram: dict[tuple[int, int], FreeList] = {}
        self.virtual = virtual
        self._va = VirtualAllocator(page_bytes=graph.spec.pe.mmu_page_bytes)
        self._tensors: list[Tensor] = []
        self._launches: list[LaunchHandle] = []
        self._extensions: dict[str, object] = {}
        self._extension_registry = extensions if extensions is not None else EXTENSIONS
        self.wait_hook: WaitHook | None = None
        self.metrics: dict[str, float] = {}  # named results a bench reports (see report_metric)

    def __repr__(self) -> str:
        return f"<RuntimeContext {self.name}{' (closed)' if self.closed else ''}>"

    @property
    def name(self) -> str:
        """``session 3 (device 0)``: how messages name this context (numbered in creation order)."""
        return f"session {self.number} (device {self._default_device})"

    def report_metric(self, name: str, value: float) -> None:
        """Record a named result of the run (e.g. a collective's latency, ns); ``kernbench run --json`` shows it."""
        self.metrics[name] = float(value)

    def __getattr__(self, name: str):
        """``torch.distributed`` and the other runtime extensions (see :mod:`kernbench.runtime.extensions`)."""
        if name.startswith("_"):
            raise AttributeError(name)
        ext = self.__dict__.get("_extensions")
        registry = self.__dict__.get("_extension_registry")
        if ext is None or registry is None:
            raise AttributeError(name)
        if name in ext:
            return ext[name]
        factory = registry.get(name)
        if factory is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}, and no installed package "
                                 f"provides a runtime extension of that name (entry-point group "
                                 f"kernbench.runtime_extensions; available: {', '.join(registry.names()) or 'none'})")
        ext[name] = value = factory(self)
        return value

    # ------------------------------------------------------------------ devices
    def _check_device(self, device: int) -> None:
        sips = self.graph.spec.system.sips.count
        if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < sips:
            raise RuntimeApiError(f"device {device!r} does not exist; the topology has SIPs 0..{sips - 1}")

    @property
    def device(self) -> int:
        """The SIP this thread of control deploys to and launches on."""
        return self._device_of.get(getcurrent(), self._default_device)

    def bind_device(self, device: int, glet=None) -> None:
        """Make ``device`` (a SIP index) the current device of ``glet`` (default: the calling greenlet)."""
        self._check_device(device)
        self._device_of[getcurrent() if glet is None else glet] = device

    def unbind_device(self, glet) -> None:
        """Forget a finished greenlet's device."""
        self._device_of.pop(glet, None)

    def reserve(self, kind: str, sip: int, cube: int, pe: int, nbytes: int) -> PhysAddr:
        """Reserve ``nbytes`` of device memory outside any tensor: a PE's ``"tcm"`` or ``"hbm"``, or the cube's
        ``"sram"`` (``pe`` ignored). Used for buffers such as IPCQ receive rings; give it back with
        :meth:`release`."""
        self._check_open("reserve")
        if kind == "hbm":
            return self._allocator(sip, cube, pe).alloc_hbm(nbytes)
        if kind == "tcm":
            return self._allocator(sip, cube, pe).alloc_tcm(nbytes)
        if kind == "sram":
            region = self._sram_region(sip, cube)
            return PhysAddr(sip, cube, "sram", region.alloc(nbytes, 256), 0)
        raise RuntimeApiError(f"unknown memory kind {kind!r}; use tcm, sram or hbm")

    def release(self, kind: str, addr: PhysAddr, nbytes: int) -> None:
        """Give back memory from :meth:`reserve`."""
        self._check_open("release")
        if kind == "hbm":  # an HBM address names its PE through the slice its offset falls in
            self._allocator(addr.sip, addr.cube, addr.offset // self.spec.hbm_slice_bytes).free_hbm(addr, nbytes)
        elif kind == "tcm":
            self._allocator(addr.sip, addr.cube, addr.pe).free_tcm(addr, nbytes)
        else:
            self._sram_region(addr.sip, addr.cube).free(addr.offset, nbytes)

    def _sram_region(self, sip: int, cube: int) -> FreeList:
        region = self._sram.get((sip, cube))
        if region is None:
            cap = int(self.spec.cube.sram.capacity_mib * (1 << 20))
            region = self._sram[(sip, cube)] = FreeList(cap, f"SRAM of {nm.cube_prefix(sip, cube)}")
        return region

    # ------------------------------------------------------------------ basics
    @property
    def spec(self):
        """The topology spec."""
        return self.graph.spec

    @property
    def data(self) -> bool:
        """Whether real numerics are computed."""
        return self.engine.data

    @property
    def now_ns(self) -> float:
        """The simulated clock, ns."""
        return self.engine.now

    @property
    def oplog(self):
        """The engine's op log."""
        return self.engine.oplog

    def link_stats(self, include_idle: bool = False) -> list[LinkRecord]:
        """Per-link traffic of everything simulated so far: bytes, packets, busy ns and utilisation over the run
        window ``[0, now_ns]``, one record per directed link that carried traffic (every link with
        ``include_idle``); see :mod:`kernbench.sim.links`."""
        return link_records(self.engine, include_idle)

    def _allocator(self, sip: int, cube: int, pe: int) -> PEMemAllocator:
        key = (sip, cube, pe)
        alloc = self._alloc.get(key)
        if alloc is None:
            alloc = self._alloc[key] = PEMemAllocator(sip, cube, pe, self.spec)
        return alloc

    def _drain(self, requests: list[Request]) -> None:
        hook = self.wait_hook
        if hook is None or not hook(requests):
            for req in requests:
                self.engine.wait(req)
        for req in requests:
            if req.error is not None:
                raise req.error

    # ------------------------------------------------------------------ tensors
    def empty(self, shape, dtype: str = "float16", policy: DPPolicy | None = None) -> Tensor:
        """Allocate a tensor's shards without writing them."""
        self._check_open("empty")
        shape = _check_shape(shape)
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

    def _map(self, t: Tensor) -> None:
        """Install the tensor's virtual range in the MMU of every PE holding part of it (through the fabric).

        Each PE maps every part of the tensor to one copy of it: its own shard
        where it holds that part, else a copy in its own cube (same PE index
        first), else the copy on the same PE index of the nearest-numbered
        cube. Replicated parts therefore always resolve to the closest copy,
        and a PE never maps one virtual byte twice.
        """
        item = np.dtype(t.dtype).itemsize
        cols = t.shape[-1] if t.shape else 1
        copies: dict[tuple, list[tuple[Shard, PhysAddr]]] = {}
        for part in t.shards:
            copies.setdefault((part[0].rows, part[0].cols), []).append(part)
        entries_of: dict[int, tuple] = {}

        def entries(part) -> tuple:
            shard, addr = part
            key = id(shard)
            if key not in entries_of:
                (r0, r1), (c0, c1) = shard.rows, shard.cols
                pa = addr.encode()
                if c1 - c0 == cols:
                    entries_of[key] = ((t.va + r0 * cols * item, pa, shard.nbytes),)
                else:
                    width = (c1 - c0) * item
                    entries_of[key] = tuple((t.va + (r * cols + c0) * item, pa + (r - r0) * width, width)
                                            for r in range(r0, r1))
            return entries_of[key]

        def closest(me: Shard, group):
            return min(group, key=lambda p: (p[0].pe != me.pe or p[0].cube != me.cube, p[0].cube != me.cube,
                                            p[0].pe != me.pe, abs(p[0].cube - me.cube), p[0].cube, p[0].pe))

        reqs = []
        for me, _ in t.shards:
            mine = [e for group in copies.values() for e in entries(closest(me, group))]
            reqs.append(self.engine.submit(MmuMapMsg(me.sip, me.cube, me.pe, tuple(mine))))
        self._drain(reqs)

    def _unmap(self, t: Tensor) -> None:
        """Remove the tensor's virtual range from the MMUs that mapped it."""
        reqs = [self.engine.submit(MmuMapMsg(s.sip, s.cube, s.pe, ((t.va, 0, t.nbytes),), unmap=True))
                for s, _ in t.shards]
        self._drain(reqs)

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
        return _assemble(t, [req.result for req in reqs])

    def peek(self, t: Tensor) -> np.ndarray:
        """The tensor's current values, read straight from the simulated memory without a transfer; needs data mode.

        This is how benches and tests verify results: it submits no request,
        takes no simulated time and leaves no op-log row, so a run that checks
        its output reports exactly the timing of one that does not (DESIGN
        invariant 4, ADR 0027). :meth:`to_numpy` is the modelled read-back.
        """
        self._live(t, "peek", stopped_ok=True)
        if not self.data:
            raise RuntimeApiError("peek needs real numerics: create the context with data=True")
        memory = self.engine.memory
        return _assemble(t, [memory.read(addr.encode(), shard.nbytes) for shard, addr in t.shards])

    def free(self, t: Tensor) -> None:
        """Release a tensor's shards; kernel arguments made from it die with it. In a session that has stopped
        (see :meth:`close`) nothing is simulated: its memory is only given back."""
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

    def _check_open(self, use: str, *, stopped_ok: bool = False) -> None:
        """:class:`RuntimeApiError` when this session cannot do ``use`` now: called from inside a running kernel,
        closed, or (unless ``stopped_ok``, for calls that simulate nothing) stopped."""
        kernel = _IN_KERNEL.get(getcurrent())
        if kernel is not None:
            raise RuntimeApiError(f"{use}: called inside kernel {kernel!r}, which runs on a simulated PE; host calls "
                                  f"(torch.*) cannot run in a kernel: do them before the launch and pass the tensors "
                                  f"as arguments")
        if self.closed:
            raise RuntimeApiError(f"{use}: {self.name} is closed (its `with session(...)` block has ended); "
                                  f"do the work inside the block, or open a new session")
        if not stopped_ok and self.engine.halted is not None:
            raise RuntimeApiError(f"{use}: {self.name} has stopped ({self.engine.halted}); its simulation cannot go "
                                  f"on, so open a new session for more work")

    def _own(self, handle: LaunchHandle, use: str) -> None:
        self._check_open(use)
        if not isinstance(handle, LaunchHandle):
            raise RuntimeApiError(f"{use}: expected a LaunchHandle from launch(), got {type(handle).__name__}")
        if handle.owner is not self:
            owner = handle.owner.name if handle.owner is not None else "no session"
            raise RuntimeApiError(f"{use}: launch {handle.name!r} belongs to {owner}, not to {self.name}; wait for "
                                  f"it in the session that launched it")

    def close(self, *, simulate: bool = True) -> None:
        """Free every live tensor and refuse any further work (what the end of a ``with session()`` block does).
        Closing twice is harmless. ``simulate=False`` (a block that ended in an error), or a session that has
        stopped (a budget ran out or an interrupt cut a step short, even if the error was caught), releases the
        tensors without simulating their MMU unmaps: the run is over, and it must not be resumed."""
        if self.closed:
            return
        for t in self._tensors:  # first, so the reason kernels are given is the close, not the frees below
            if t.lease is not None:
                t.lease.revoke("was freed when its session closed")
        try:
            if simulate and self.engine.halted is None:
                self.cleanup()
        finally:
            for t in list(self._tensors):
                self._retire(t, "was freed when its session closed")
            self.closed = True

    # ------------------------------------------------------------------ kernels
    def launch(self, name: str, fn: Callable, *args) -> LaunchHandle:
        """Launch ``fn(tl, *args)`` on every PE holding a shard of the first tensor argument."""
        self._check_open(f"launch {name!r}")
        if not callable(fn):
            raise RuntimeApiError(f"launch {name!r}: the kernel must be a function fn(tl, ...), got "
                                  f"{type(fn).__name__}")
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not tensors:
            raise RuntimeApiError(f"launch {name!r}: pass at least one tensor to decide the target PEs")
        for t in tensors:
            self._live(t, f"launch {name!r}")
        pes = sorted({(s.sip, s.cube, s.pe) for s, _ in tensors[0].shards})
        targets = []
        for pe in pes:
            pe_args = []
            for i, a in enumerate(args):
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
        body = _KernelBody(fn, name, self)
        handle = LaunchHandle(name, self.engine.submit(KernelLaunchMsg(name, body, tuple(targets))), self)
        self._launches.append(handle)
        return handle

    def _arg(self, t: Tensor, shard: Shard, addr: PhysAddr) -> TensorArg:
        """What a PE receives for a tensor: its shard, plus virtual addresses when the tensor has them."""
        if t.va is None:
            return TensorArg(addr, _shard_shape(t.shape, shard), t.dtype, lease=t.lease)
        cols = t.shape[-1] if t.shape else 1
        (r0, _), (c0, c1) = shard.rows, shard.cols
        va = t.va + r0 * cols * np.dtype(t.dtype).itemsize if c1 - c0 == cols else None
        return TensorArg(addr, _shard_shape(t.shape, shard), t.dtype, va, t.va, t.shape, lease=t.lease)

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        """Run the simulation until the launch completes; raise the kernel's error if one failed."""
        self._own(handle, "wait")
        self._drain([handle.request])
        return handle.request.result

    def wait_all(self) -> None:
        """Wait for every launch submitted so far."""
        self._check_open("wait_all")
        self._drain([h.request for h in self._launches])

    def cleanup(self) -> None:
        """Free every live tensor."""
        for t in list(self._tensors):
            self.free(t)


@contextlib.contextmanager
def session(topology: str | Path | TopologyGraph | None = None, device: int = 0, data: bool = False,
            trace: bool = False, *, max_events: int | None = DEFAULT_MAX_EVENTS,
            max_sim_ns: float | None = DEFAULT_MAX_SIM_NS, timeout_s: float | None = DEFAULT_SESSION_TIMEOUT_S,
            max_records: int | None = DEFAULT_MAX_RECORDS) -> Iterator[RuntimeContext]:
    """``with session(device=0, data=True) as torch: ...`` for scripts and notebooks.

    ``topology`` is a compiled graph, a YAML file, the name of a builtin
    topology, or None for the builtin default (it works from any folder).
    ``max_events``, ``max_sim_ns``, ``max_records`` (op-log records) and
    ``timeout_s`` (wall-clock seconds for the whole block) bound the run
    (:mod:`kernbench.sim.limits`; None: no limit); a run past one raises
    ``SimulationLimitError``. The wall clock defaults to
    :data:`~kernbench.sim.limits.DEFAULT_SESSION_TIMEOUT_S` (an hour), so a
    kernel spinning in pure Python cannot hang a script forever; pass
    ``timeout_s=None`` for a block meant to run longer (the host code in the
    block counts too). On the main thread it uses ``SIGALRM``. When the block
    ends the session is closed: its tensors are freed and it accepts no
    more work.
    """
    limits = Limits(max_events, max_sim_ns, timeout_s, max_records)
    graph = topology if isinstance(topology, TopologyGraph) else resolve(topology)
    ctx = RuntimeContext(graph, device=device, data=data, trace=trace, limits=limits)
    ok = False
    try:
        with watchdog(ctx.engine, timeout_s):
            yield ctx
        ok = True
    finally:
        ctx.close(simulate=ok)
