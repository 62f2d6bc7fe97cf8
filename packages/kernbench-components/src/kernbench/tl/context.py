"""``tl``: the kernel-side language, one :class:`TLContext` per running kernel on a PE.

A kernel is plain Python ``def kernel(tl, *args)`` run in a greenlet. Every
``tl`` call that does work builds a PE command, hands it to the PE_CPU and
switches back to the simulator until the command completes; pure helpers
(``program_id``, ``cdiv``, shapes) cost nothing. Tensors in a kernel are
:class:`TensorHandle` objects: ``space`` is ``"hbm"`` (a reference made by
``tl.ref``, no data moved) or ``"tcm"`` (data in the PE's TCM, e.g. the
result of ``tl.load`` or of a computation). Intermediate results live in the
kernel's scratch region at the top of the TCM, handed out 16-byte aligned.

In data mode every command also carries its numpy effect, applied when the
command completes; f16 arithmetic is done in f32 and rounded.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kernbench.components.pe.commands import (
    CommandError,
    ComputeCmd,
    CyclesCmd,
    DmaReadCmd,
    DmaWriteCmd,
    IpcqRecvCmd,
    IpcqSendCmd,
)
from kernbench.components.pe.composite_cmd import SCOPES, CompositeCmd, Operand, OpSpec, overlaps, split
from kernbench.components.pe.ipcq import DIRECTIONS
from kernbench.components.pe.math_kinds import EPILOGUE, HEADS, STANDALONE, UNARY, standalone_shape
from kernbench.tl.recipes import RECIPES
from kernbench.topology.address import PhysAddr, decode
from kernbench.topology.errors import KernbenchError

if TYPE_CHECKING:
    from kernbench.components.launch import PeLaunch
    from kernbench.components.pe.cpu import PeCpu

SCRATCH_ALIGN = 16
DTYPES = ("float16", "float32", "int32", "bool")


class TLError(KernbenchError):
    """A kernel used the ``tl`` API wrongly (shapes, dtypes, foreign handles, HBM operands)."""


class DescriptorTooLarge(TLError, ValueError):
    """A composite's descriptor is larger than the topology's ``pe.cost_model.max_composite_logical_bytes``."""


class ScratchOverflowError(TLError):
    """A kernel needed more TCM scratch than the topology's ``pe.tcm.scratch_mib``."""


@dataclass(frozen=True, slots=True)
class TensorArg:
    """A tensor argument as a PE receives it: its local shard's address, shape and dtype.

    With virtual addressing the argument also carries ``va`` (the shard's
    virtual address, when the shard is contiguous in the tensor's layout)
    and the whole tensor's virtual base and shape, so a kernel can address
    any part of it with :meth:`TLContext.global_ref` (the PE's MMU
    translates each access).
    """

    addr: PhysAddr
    shape: tuple[int, ...]
    dtype: str
    va: int | None = None
    tensor_va: int | None = None
    tensor_shape: tuple[int, ...] | None = None

    @property
    def nbytes(self) -> int:
        """Size of the shard in bytes."""
        return _nbytes(self.shape, self.dtype)


class _Recorded:
    """The completion event of a recorded command: already complete (command-list mode has no time)."""

    processed = triggered = True
    value = None


_RECORDED = _Recorded()


def record(fn, *args, spec, kernel: str = "kernel", pe: tuple[int, int, int] = (0, 0, 0),
           program_id: tuple[int, int] = (0, 0), num_programs: tuple[int, int] = (1, 1)) -> list:
    """Run ``fn(tl, *args)`` in command-list mode and return the PE commands it would issue, in order."""
    ctx = TLContext.recorder(spec, kernel, pe, program_id, num_programs)
    fn(ctx, *args)
    return ctx.commands


class TensorHandle:
    """A tensor inside a kernel: where it lives (encoded PA), its shape and dtype."""

    __slots__ = ("addr", "ctx", "dtype", "pitch", "ready", "scope", "shape", "space", "virtual")

    def __init__(self, ctx: TLContext, addr: int, shape: tuple[int, ...], dtype: str, space: str,
                 pitch: int = 0, virtual: bool = False) -> None:
        self.ctx = ctx
        self.addr = addr
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.space = space
        self.pitch = pitch  # bytes between rows of a 2-D block of a larger HBM tensor; 0 = contiguous
        self.virtual = virtual  # addr is a virtual address, translated by the PE's MMU on access
        self.ready = None  # the completion event of a lazy load still filling this tensor
        self.scope = 0  # the scratch scope the tensor was allocated in (0 = the kernel's outermost)

    def __getitem__(self, key) -> TensorHandle:
        """A 2-D block ``h[r0:r1, c0:c1]`` of an HBM tensor (a strided DMA source or destination)."""
        if self.space != "hbm" or len(self.shape) != 2:
            raise TLError("only 2-D HBM tensors can be sliced into blocks; slice before tl.load")
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, slice) for k in key)):
            raise TLError(f"block slicing takes two slices h[r0:r1, c0:c1], got {key!r}")
        (r0, r1, rs), (c0, c1, cs) = (k.indices(s) for k, s in zip(key, self.shape, strict=True))
        if rs != 1 or cs != 1 or r1 <= r0 or c1 <= c0:
            raise TLError(f"block {key!r} of a tensor of shape {self.shape} is empty or strided")
        item = np.dtype(self.dtype).itemsize
        pitch = self.pitch or self.shape[1] * item
        return TensorHandle(self.ctx, self.addr + r0 * pitch + c0 * item, (r1 - r0, c1 - c0), self.dtype, "hbm",
                            pitch if (c1 - c0) != self.shape[1] or self.pitch else 0, self.virtual)

    @property
    def span(self) -> int:
        """Bytes from the first to the last byte this handle covers (a block spans its row pitch)."""
        if not self.pitch:
            return self.nbytes
        return (self.shape[0] - 1) * self.pitch + self.shape[1] * np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return _nbytes(self.shape, self.dtype)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

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


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _operand(h: TensorHandle) -> Operand:
    """The command-side reference to a kernel tensor."""
    return Operand(h.addr, h.shape, h.dtype, h.space, h.pitch)


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


class TLContext:
    """The ``tl`` object a kernel receives: its PE, program ids, scratch and every ``tl.*`` operation."""

    def __init__(self, cpu: PeCpu, launch: PeLaunch, request) -> None:
        self._cpu = cpu
        self._request = request
        self._recorded: list | None = None
        self.glet = None  # set by the PE_CPU before the kernel starts
        self.waiting: str | None = None  # what the kernel is blocked on (for deadlock reports)
        self._setup(cpu.engine.spec, launch.launch.msg.kernel, launch.pe, launch.program_id, launch.num_programs)

    @classmethod
    def recorder(cls, spec, kernel: str = "kernel", pe: tuple[int, int, int] = (0, 0, 0),
                 program_id: tuple[int, int] = (0, 0), num_programs: tuple[int, int] = (1, 1)) -> TLContext:
        """A context in command-list mode: ``tl`` calls record commands and return at once, without time."""
        ctx = cls.__new__(cls)
        ctx._cpu = ctx._request = ctx.glet = ctx.waiting = None
        ctx._recorded = []
        ctx._setup(spec, kernel, pe, program_id, num_programs)
        return ctx

    @property
    def commands(self) -> list:
        """The commands recorded so far (command-list mode only)."""
        if self._recorded is None:
            raise TLError("commands are only recorded in command-list mode (TLContext.recorder / tl.record)")
        return list(self._recorded)

    def _setup(self, spec, kernel: str, pe: tuple[int, int, int], program_id, num_programs) -> None:
        sip, cube, pe_id = pe
        self.pe = pe
        self.kernel = kernel
        self._program = (tuple(program_id), tuple(num_programs))
        tcm_bytes = int(spec.pe.tcm.capacity_mib * (1 << 20))
        self._scratch_bytes = int(spec.pe.tcm.scratch_mib * (1 << 20))
        self._scratch_base = PhysAddr(sip, cube, "tcm", tcm_bytes - self._scratch_bytes, pe_id).encode()
        self._cursor = 0
        self._tile = (spec.pe.gemm.tile_m, spec.pe.gemm.tile_n, spec.pe.gemm.tile_k)
        self._clock_ghz = spec.pe.clock_ghz
        self._descriptor_cap = spec.pe.cost_model.max_composite_logical_bytes
        self._slot_bytes = spec.pe.ipcq.slot_bytes
        self._pending: list = []
        self._scopes: list[tuple[int, int]] = [(0, 0)]  # (scope id, cursor at entry)
        self._next_scope = 1
        self._dead_scopes: set[int] = set()
        self._loads: list[tuple[int, object]] = []  # (target scratch offset, event) of loads not yet awaited
        self._composites: list[tuple[object, tuple, tuple]] = []  # (done, read ranges, write ranges) in flight
        self._recipe_slots: dict[tuple, dict[str, TensorHandle]] = {}  # kernel-level recipe scratch, reused

    # ------------------------------------------------------------------ identity and helpers
    def program_id(self, axis: int) -> int:
        """This program's index: axis 0 = PE among the launch's PEs in this cube, axis 1 = cube in the SIP."""
        return self._program[0][self._axis(axis)]

    def num_programs(self, axis: int) -> int:
        """Number of programs along an axis (see :meth:`program_id`)."""
        return self._program[1][self._axis(axis)]

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        """Ceiling division of integers."""
        return -(-a // b)

    def _axis(self, axis: int) -> int:
        if axis not in (0, 1):
            raise TLError(f"program axis must be 0 (PE in cube) or 1 (cube in SIP), got {axis!r}")
        return axis

    # ------------------------------------------------------------------ scratch
    @property
    def scratch_used(self) -> int:
        """Bytes of scratch handed out so far."""
        return self._cursor

    def _alloc(self, nbytes: int) -> int:
        start = -(-self._cursor // SCRATCH_ALIGN) * SCRATCH_ALIGN
        if start + nbytes > self._scratch_bytes:
            raise ScratchOverflowError(
                f"kernel {self.kernel!r} on PE {self.pe}: needs {nbytes} more bytes of TCM scratch but only "
                f"{self._scratch_bytes - start} of {self._scratch_bytes} are left; use smaller tiles or raise "
                f"pe.tcm.scratch_mib in the topology")
        self._cursor = start + nbytes
        return self._scratch_base + start

    def _new(self, shape: Sequence[int], dtype: str) -> TensorHandle:
        shape = tuple(int(s) for s in shape)
        h = TensorHandle(self, self._alloc(_nbytes(shape, dtype)), shape, dtype, "tcm")
        h.scope = self._scopes[-1][0]
        return h

    @contextlib.contextmanager
    def scratch_scope(self):
        """``with tl.scratch_scope():`` — scratch allocated inside is released when the block exits.

        Scopes nest. On exit the cursor rewinds to where the scope began, after
        waiting for any lazy load still filling a buffer being released; a
        tensor allocated inside the scope cannot be used after it (TLError).
        Tensors that must live across iterations (a running state, prefetch
        buffers) are allocated before entering the scope.
        """
        sid = self._next_scope
        self._next_scope += 1
        start = self._cursor
        self._scopes.append((sid, start))
        try:
            yield
        finally:
            for off, ev in list(self._loads):
                if off >= start:
                    self._block(ev)
            self._loads = [(off, ev) for off, ev in self._loads if off < start]
            lo, hi = self._scratch_base + start, self._scratch_base + self._scratch_bytes
            for ev, reads, writes in list(self._composites):
                if overlaps(lo, hi, reads) or overlaps(lo, hi, writes):
                    self._block(ev)
            self._scopes.pop()
            self._dead_scopes.add(sid)
            self._cursor = start

    # ------------------------------------------------------------------ blocking issue
    def _issue(self, cmd) -> None:
        if self._recorded is not None:
            self._recorded.append(cmd)
            return
        self._cpu.issue(cmd, self._request)
        if self.waiting is None:
            self.waiting = type(cmd).__name__
        value = self.glet.parent.switch(cmd.done)
        self.waiting = None
        if isinstance(value, Exception):
            raise TLError(f"kernel {self.kernel!r} on PE {self.pe}: {value}")

    def _event(self):
        if self._recorded is not None:
            return _RECORDED
        return self._cpu.engine.env.event()

    def _own(self, *handles) -> None:
        for h in handles:
            if not isinstance(h, TensorHandle):
                continue
            if h.ctx is not self:
                raise TLError(f"kernel {self.kernel!r} on PE {self.pe} used a tensor handle created by another "
                              f"kernel ({h.ctx.kernel!r} on PE {h.ctx.pe}); handles are only valid in their kernel")
            if h.scope in self._dead_scopes:
                raise TLError(f"kernel {self.kernel!r} on PE {self.pe} used {h}, allocated in a scratch scope that "
                              f"has exited; its bytes may be reused — allocate it before the scope")

    def _tcm(self, op: str, *handles) -> None:
        """Check TCM operands of ``op`` and wait for any lazy load still filling them."""
        for h in handles:
            if isinstance(h, TensorArg):
                raise TLError(f"tl.{op}: {h.shape} {h.dtype} is a tensor argument in HBM; tl.load it first")
        self._own(*handles)
        for h in handles:
            if isinstance(h, TensorHandle) and h.space != "tcm":
                raise TLError(f"tl.{op}: operand {h} is in HBM; tl.load it into the TCM first")
        self._await(*handles)
        if self._composites:
            for h in handles:
                if isinstance(h, TensorHandle):
                    self._sync(h.addr, h.addr + h.span, write=False)

    def _sync(self, start: int, end: int, write: bool) -> None:
        """Wait for in-flight composites that write [start, end) (or, for a write, also read it)."""
        for entry in list(self._composites):
            ev, reads, writes = entry
            if ev.processed:
                self._composites.remove(entry)
            elif overlaps(start, end, writes) or (write and overlaps(start, end, reads)):
                self._block(ev)
                self._composites.remove(entry)

    def _await(self, *handles) -> None:
        for h in handles:
            if isinstance(h, TensorHandle) and h.ready is not None:
                ev, h.ready = h.ready, None
                self._block(ev)
                self._loads = [(off, e) for off, e in self._loads if e is not ev]

    # ------------------------------------------------------------------ data movement
    def ref(self, arg: TensorArg | TensorHandle) -> TensorHandle:
        """A handle naming an HBM tensor argument without moving data."""
        if isinstance(arg, TensorHandle):
            self._own(arg)
            return arg
        if not isinstance(arg, TensorArg):
            raise TLError(f"tl.ref expects a tensor argument, got {type(arg).__name__}")
        if arg.va is not None:
            return TensorHandle(self, arg.va, arg.shape, arg.dtype, "hbm", virtual=True)
        return TensorHandle(self, arg.addr.encode(), arg.shape, arg.dtype, "hbm")

    def global_ref(self, arg: TensorArg) -> TensorHandle:
        """A virtual handle over the whole tensor (2-D view), wherever its shards live; slice it into blocks."""
        if not isinstance(arg, TensorArg) or arg.tensor_va is None:
            raise TLError("tl.global_ref needs a tensor argument deployed with virtual addresses")
        shape = arg.tensor_shape
        view = (1, shape[0]) if len(shape) == 1 else (math.prod(shape[:-1]), shape[-1])
        return TensorHandle(self, arg.tensor_va, view, arg.dtype, "hbm", virtual=True)

    def _phys(self, h: TensorHandle) -> tuple[int, float]:
        """Physical address of a handle and the translation time its DMA pays (ns)."""
        if not h.virtual or self._recorded is not None:
            return h.addr, 0.0
        mmu = self._cpu.engine.components[f"{self._cpu.prefix}.pe_mmu"]
        return mmu.translate(h.addr, h.span), mmu.translate_ns

    def _dma_target(self, op: str, h: TensorHandle) -> tuple[int, float]:
        """Physical address (and translation time) of a DMA's far side, checked before anything is issued."""
        if h.space != "hbm":
            raise TLError(f"tl.{op}: {h} is already in the TCM; DMA moves data between the TCM and HBM/SRAM")
        addr, translate_ns = self._phys(h)
        if self._cpu is not None:
            self._cpu.engine.resolver.resolve(decode(addr), h.span)  # AddressError here, not inside the engine
        return addr, translate_ns

    def load(self, src: TensorArg | TensorHandle, out: TensorHandle | None = None) -> TensorHandle:
        """Start a DMA of a tensor into TCM scratch (or into ``out``) and return its TCM handle at once.

        The load is lazy: the first operation that reads the handle waits for
        the data, so independent work issued in between overlaps the DMA.
        Passing a persistent ``out`` buffer lets a loop prefetch the next tile
        without growing its scratch.
        """
        h = self.ref(src)
        if h.space != "hbm":
            raise TLError(f"tl.load: {h} is already in the TCM")
        if out is None:
            out = self._new(h.shape, h.dtype)
        else:  # reuse a buffer (double buffering): it must be free of earlier loads
            self._own(out)
            if out.space != "tcm" or out.shape != h.shape or out.dtype != h.dtype:
                raise TLError(f"tl.load: out is {out} but the source is {h.shape} {h.dtype} (a TCM buffer of the "
                              f"same shape and dtype is needed)")
            self._await(out)
            if self._composites:
                self._sync(out.addr, out.addr + out.nbytes, write=True)
        row = h.shape[-1] * np.dtype(h.dtype).itemsize if h.pitch else 0
        src, translate_ns = self._dma_target("load", h)
        if self._composites:  # a composite may still be writing the source
            self._sync(src, src + h.span, write=False)
        cmd = DmaReadCmd(src, out.addr, h.nbytes, self._event(), row_bytes=row, src_pitch=h.pitch,
                         dst_pitch=row, translate_ns=translate_ns)
        if self._recorded is not None:
            self._recorded.append(cmd)
            return out
        self._cpu.issue(cmd, self._request)
        out.ready = cmd.done
        self._pending.append(cmd.done)
        self._loads.append((out.addr - self._scratch_base, cmd.done))
        return out

    def store(self, dst: TensorArg | TensorHandle, src: TensorHandle) -> None:
        """DMA a TCM tensor to ``dst`` (an HBM tensor of the same shape and dtype); waits until written."""
        d = self.ref(dst)
        self._tcm("store", src)
        if d.shape != src.shape or d.dtype != src.dtype:
            raise TLError(f"tl.store: destination is {d.shape} {d.dtype} but the value is {src.shape} {src.dtype}")
        row = d.shape[-1] * np.dtype(d.dtype).itemsize if d.pitch else 0
        dst, translate_ns = self._dma_target("store", d)
        if self._composites:
            self._sync(dst, dst + d.span, write=True)
        self._issue(DmaWriteCmd(src.addr, dst, src.nbytes, self._event(), row_bytes=row, src_pitch=row,
                                dst_pitch=d.pitch, translate_ns=translate_ns))

    # ------------------------------------------------------------------ PE-to-PE messages (PE_IPCQ)
    def _direction(self, op: str, direction: str) -> None:
        if direction not in DIRECTIONS:
            raise TLError(f"tl.{op}: unknown direction {direction!r}; use one of {', '.join(DIRECTIONS)}")
        if self._cpu is None:
            return
        ipcq = self._cpu.engine.components[f"{self._cpu.prefix}.pe_ipcq"]
        if direction not in ipcq.links:
            have = ", ".join(ipcq.links) or "none"
            raise TLError(f"tl.{op}: PE {self.pe} has no neighbour installed in direction {direction!r} "
                          f"(installed: {have}); install a neighbour table that links it (init_process_group or "
                          f"kernbench.ccl.neighbours)")

    def _slot_check(self, op: str, nbytes: int) -> None:
        slot = self._slot_bytes
        if not 0 < nbytes <= slot:
            raise TLError(f"tl.{op}: a message of {nbytes} bytes does not fit an IPCQ slot of {slot} bytes; send "
                          f"smaller pieces or raise pe.ipcq.slot_kib in the topology")

    def send(self, direction: str, src: TensorHandle | None = None, *, src_addr: int | None = None,
             nbytes: int | None = None) -> None:
        """Send a TCM tensor (or ``nbytes`` at the encoded TCM address ``src_addr``) to the neighbour in
        ``direction``. Returns once the PE_IPCQ has taken it; the bytes are snapshotted at that moment, so the
        source may be reused at once. The kernel does not end before its messages have been delivered."""
        self._direction("send", direction)
        if src is not None:
            if src_addr is not None or nbytes is not None:
                raise TLError("tl.send: give a tensor or src_addr= and nbytes=, not both")
            self._tcm("send", src)
            addr, size = src.addr, src.nbytes
        else:
            if not isinstance(src_addr, int) or not isinstance(nbytes, int):
                raise TLError("tl.send: give a TCM tensor, or src_addr= (an encoded TCM address) and nbytes=")
            where = decode(src_addr)
            if where.kind != "tcm" or (where.sip, where.cube, where.pe) != tuple(self.pe):
                raise TLError(f"tl.send: src_addr {where} is not in this PE's TCM {self.pe}; messages leave from "
                              f"the sender's TCM (tl.load the data first)")
            addr, size = src_addr, nbytes
            if self._composites:
                self._sync(addr, addr + size, write=False)
        self._slot_check("send", size)
        delivered = self._event()
        self.waiting = f"tl.send({direction!r}) waiting for a free slot at the peer"
        self._issue(IpcqSendCmd(direction, addr, size, self._event(), delivered))
        if self._recorded is None:
            self._pending.append(delivered)

    def _recv_target(self, op: str, shape, dtype: str, out: TensorHandle | None) -> TensorHandle:
        if out is not None:
            if not isinstance(out, TensorHandle) or out.space != "tcm":
                raise TLError(f"tl.{op}: out must be a TCM tensor (receive into TCM, then tl.store), got {out!r}")
            self._own(out)
            self._await(out)
            if self._composites:
                self._sync(out.addr, out.addr + out.nbytes, write=True)
            return out
        if shape is None:
            raise TLError(f"tl.{op}: give the message's shape (and dtype), or out=")
        self._dtype(dtype)
        return self._new((shape,) if isinstance(shape, int) else shape, dtype)

    def _recv_cmd(self, op: str, direction: str, shape, dtype: str, out: TensorHandle | None,
                  consume: bool = True) -> tuple[TensorHandle, IpcqRecvCmd]:
        """Check a receive and build its command: the target tensor (new scratch or ``out``) and the message."""
        self._direction(op, direction)
        h = self._recv_target(op, shape, dtype, out)
        self._slot_check(op, h.nbytes)
        return h, IpcqRecvCmd(direction, h.addr, h.nbytes, self._event(), consume)

    def recv(self, direction: str, shape=None, dtype: str = "float16", *, out: TensorHandle | None = None
             ) -> TensorHandle:
        """Wait for the next message from ``direction`` and copy it into a new TCM tensor of ``shape``/``dtype``
        (or into ``out``); returns the tensor. The message must have exactly the tensor's size."""
        h, cmd = self._recv_cmd("recv", direction, shape, dtype, out)
        self.waiting = f"tl.recv({direction!r})"
        self._issue(cmd)
        return h

    def recv_async(self, direction: str, shape=None, dtype: str = "float16", *, out: TensorHandle | None = None
                   ) -> TensorHandle:
        """Like :meth:`recv` but returns at once: the tensor is a future that its first reader (or
        ``tl.wait``) waits for."""
        h, cmd = self._recv_cmd("recv_async", direction, shape, dtype, out)
        if self._recorded is not None:
            self._recorded.append(cmd)
            return h
        self._cpu.issue(cmd, self._request)
        h.ready = cmd.done
        self._pending.append(cmd.done)
        self._loads.append((h.addr - self._scratch_base, cmd.done))
        return h

    def recv_no_consume(self, direction: str, shape=None, dtype: str = "float16") -> TensorHandle:
        """DIAGNOSTIC ONLY: :meth:`recv` without the time of copying the message out of its slot (the data
        still arrives). For comparing the arrival alone against a plain DMA; kernels must use :meth:`recv`."""
        h, cmd = self._recv_cmd("recv_no_consume", direction, shape, dtype, None, consume=False)
        self.waiting = f"tl.recv_no_consume({direction!r})"
        self._issue(cmd)
        return h

    # ------------------------------------------------------------------ compute
    def _run(self, engine: str, op: str, inputs: Sequence[TensorHandle], out: TensorHandle, work: int,
             fn: Callable[..., np.ndarray], params: dict | None = None) -> TensorHandle:
        reads = [(h.addr, h.shape, h.dtype) for h in inputs]
        dst, shape, dtype = out.addr, out.shape, out.dtype

        def compute(mem) -> None:
            args = [_f32(mem.read_array(a, s, d)) for a, s, d in reads]
            mem.write(dst, np.asarray(fn(*args), dtype=np.float32 if dtype == "float16" else dtype)
                      .astype(dtype).reshape(shape))

        self._issue(ComputeCmd(engine, op, sum(h.nbytes for h in inputs), out.nbytes, work, self._event(),
                               compute, params or {}, len(inputs)))
        return out

    def dot(self, a: TensorHandle, b: TensorHandle, out_dtype: str = "float32") -> TensorHandle:
        """Matrix product of two TCM tensors [M, K] @ [K, N] on the GEMM engine."""
        self._tcm("dot", a, b)
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
            raise TLError(f"tl.dot: shapes {a.shape} and {b.shape} do not form [M, K] @ [K, N]")
        m, k = a.shape
        n = b.shape[1]
        tm, tn, tk = self._tile
        tiles = self.cdiv(m, tm) * self.cdiv(n, tn) * self.cdiv(k, tk)
        out = self._new((m, n), out_dtype)
        return self._run("gemm", f"gemm_{a.dtype}", (a, b), out, tiles, np.matmul,
                         {"m": m, "n": n, "k": k, "tiles": tiles})

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
        self._await(dst)  # a load or receive still filling dst would land after the copy
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise TLError(f"tl.copy_to: dst is {dst.shape} {dst.dtype} but src is {src.shape} {src.dtype}")
        if self._composites:
            self._sync(dst.addr, dst.addr + dst.nbytes, write=True)
        return self._run("math", "copy", (src,), dst, src.size, lambda v: v)

    def broadcast(self, x: TensorHandle, shape: Sequence[int]) -> TensorHandle:
        """A new TCM tensor holding ``x`` broadcast to ``shape`` (numpy rules); bytes follow the new shape."""
        self._tcm("broadcast", x)
        shape = tuple(int(s) for s in shape)
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
        self._dtype(dtype)
        out = self._new(shape, dtype)
        return self._run("math", "fill", (), out, out.size, lambda: np.full(out.shape, value), {"value": value})

    def zeros(self, shape: Sequence[int], dtype: str = "float32") -> TensorHandle:
        """A new TCM tensor of zeros."""
        return self.full(shape, 0.0, dtype)

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

    # ------------------------------------------------------------------ time
    def cycles(self, n: int) -> None:
        """Charge ``n`` PE clock cycles of PE_CPU work."""
        if not isinstance(n, int) or n < 0:
            raise TLError(f"tl.cycles expects a non-negative integer, got {n!r}")
        self._issue(CyclesCmd(n, self._event()))

    # ------------------------------------------------------------------ composite
    def composite(self, *operands, op: str | None = None, a=None, b=None, x=None, out=None, out_ptr=None,
                  prologue: Sequence[dict] = (), epilogue: Sequence[dict] = (), out_dtype: str = "float32"
                  ) -> TensorHandle:
        """Issue one pipelined composite command and return its output handle at once.

        GEMM head: ``tl.composite(a, b[, out])``, ``tl.composite("gemm", a, b)``
        or ``tl.composite(op="gemm", a=..., b=...)`` computes ``epilogue(a @ b)``.
        An operand in HBM (``tl.ref``, a tensor argument or a block of one) is
        streamed block by block inside the pipeline; one in TCM (``tl.load``
        result, scratch) is used in place.

        Math head: ``tl.composite("exp", x[, out])`` (or ``op=..., x=...``) with
        one of ``copy exp sigmoid relu abs sqrt`` computes ``epilogue(op(x))``
        over 2-D blocks of ``x``.

        ``prologue`` items ``{"op": <recipe>, <operand>: handle, ...}`` expand
        (``kernbench.tl.recipes``) into math ops that run once before the head;
        a recipe's primary output becomes the GEMM's ``a`` when ``a`` is left
        out. Without a head, the composite is just the prologue ops.

        ``out`` is a TCM tensor (updated in place), an HBM tensor (each output
        block is DMA-written) or None for new TCM scratch; ``out_ptr`` (an
        encoded HBM address) is shorthand for an HBM output of the result's
        shape and ``out_dtype``. ``epilogue`` items are dicts ``{"op": ...,
        "scope": "k_tile" | "output_tile" | "kernel", ...fields}``.

        The returned handle is usable at once: any ``tl`` op reading it (or
        ``tl.wait(handle)``) waits for the composite; a later composite
        touching the same tensors is ordered after it by the PE scheduler.
        """
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
            o = _operand(result)
            if head == "gemm":
                ops.append(OpSpec("gemm", "kernel", {"a": _operand(ha), "b": _operand(hb)},
                                  {"m": m, "n": n, "k": ha.shape[1]}, o))
            else:
                ops.append(OpSpec(head, "output_tile", {"x": _operand(ha)}, {"m": m, "n": n}, o))
            ops.extend(self._epilogue(item, result) for item in epilogue)
            if all(h is not result for h in rw):
                rw.append(result)
        done = self._event()
        cmd = CompositeCmd(tuple(ops), tuple(_operand(h) for h in rw), done)
        try:
            split(cmd, self._tile)
        except CommandError as exc:
            raise TLError(f"tl.composite: {exc}") from None
        if cmd.logical_bytes > self._descriptor_cap:
            raise DescriptorTooLarge(
                f"tl.composite: the descriptor would be {cmd.logical_bytes} bytes, over the "
                f"{self._descriptor_cap}-byte cap (pe.cost_model.max_composite_logical_bytes); split the ops "
                f"over two composites")
        if self._recorded is not None:
            self._recorded.append(cmd)
            return result
        self._cpu.issue(cmd, self._request)
        self._pending.append(done)
        reads, writes = cmd.ranges()
        self._composites.append((done, reads, writes))
        return result

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
        h = self.ref(h) if isinstance(h, TensorArg) else h
        if not isinstance(h, TensorHandle):
            raise TLError(f"tl.composite: operand {name!r} must be a tensor, got {type(h).__name__}")
        self._own(h)
        self._await(h)
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
            self._dtype(out_dtype)
            ho = TensorHandle(self, out_ptr, shape, out_dtype, "hbm")
            self._dma_target("composite", ho)
            return ho
        if out is None:
            self._dtype(out_dtype)
            return self._new(shape, out_dtype)
        ho = self.ref(out) if isinstance(out, TensorArg) else out
        if not isinstance(ho, TensorHandle):
            raise TLError(f"tl.composite: out must be a tensor, got {type(ho).__name__}")
        self._own(ho)
        self._await(ho)
        ho = self._physical(ho)
        if ho.shape != shape:
            raise TLError(f"tl.composite: output is {ho.shape} but the result is {shape}")
        if ho.space == "hbm":
            self._dma_target("composite", ho)
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
            self._own(h)
            self._await(h)
            slots[name] = h
        internal = recipe.internal_slots
        scope_depth = len(self._scopes) > 1
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
                    dst = self._new(shape, dtype)
                slots[step.dst] = dst
            if dst.shape != shape:
                raise TLError(f"tl.composite: recipe {recipe.name!r} writes a {shape} result of {step.kind!r} into "
                              f"{step.dst!r}, which is {dst.shape}; check the operand shapes")
            ops.append(OpSpec(step.kind, "kernel", {slot: _operand(slots[s]) for slot, s in srcs.items()}, extra,
                              _operand(dst)))
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
        return TensorHandle(self, o.addr, o.shape, o.dtype, o.space)

    def _physical(self, h: TensorHandle) -> TensorHandle:
        """The same tensor addressed physically (a composite's operand must be one contiguous range)."""
        if not h.virtual:
            return h
        addr, _ = self._phys(h)
        return TensorHandle(self, addr, h.shape, h.dtype, h.space, h.pitch)

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
            self._own(h)
            self._await(h)
            n = result.shape[1]
            want = (n,) if op == "bias" else result.shape
            if h.shape != want:
                raise TLError(f"tl.composite: epilogue op {op!r}: {operand_name} must have shape {want}, "
                              f"got {h.shape}")
            operands[operand_name] = _operand(h)
        extra = {e: float(item[e]) for e in extras}
        return OpSpec(op, scope, operands, extra, _operand(result))

    def wait(self, x=None):
        """Wait until ``x`` (a tensor handle: a lazily loaded tensor or a composite's output) holds its value
        and return it; with no argument, wait for every pending load and composite."""
        if x is None:
            for ev in list(self._pending):
                self._block(ev)
            return None
        if not isinstance(x, TensorHandle):
            raise TLError(f"tl.wait expects a tensor handle (or nothing), got {type(x).__name__}")
        self._own(x)
        self._await(x)
        if self._composites:
            addr = self._phys(x)[0] if x.space == "hbm" else x.addr  # composites record physical ranges
            self._sync(addr, addr + x.span, write=False)
        return x

    def _block(self, ev) -> None:
        if not ev.processed:
            self.waiting = "an asynchronous load, receive or composite"
            self.glet.parent.switch(ev)
            self.waiting = None
        if ev in self._pending:
            self._pending.remove(ev)
        if isinstance(ev.value, Exception):
            raise TLError(f"kernel {self.kernel!r} on PE {self.pe}: {ev.value}")

    @property
    def pending_events(self) -> list:
        """Events of issued, not yet waited-for asynchronous commands."""
        return self._pending
