"""``tl``: the kernel-side language, one :class:`TLContext` per running kernel on a PE.

A kernel is plain Python ``def kernel(tl, *args)``. Every ``tl`` call that
does work builds a PE command and hands it to the kernel's issuer
(:mod:`kernbench.tl.issue`): on a simulated PE the kernel's greenlet switches
back to the simulator until the command completes; in command-list mode
(:func:`record`) the command is only collected. Pure helpers
(``program_id``, ``cdiv``, shapes) cost nothing. Tensors in a kernel are
:class:`~kernbench.tl.tensors.TensorHandle` objects: ``space`` is ``"hbm"``
(a reference made by ``tl.ref``, no data moved) or ``"tcm"`` (data in the
PE's TCM, e.g. the result of ``tl.load`` or of a computation). Intermediate
results live in the kernel's scratch arena at the top of the TCM
(:mod:`kernbench.tl.scratch`); asynchronous work is ordered by the hazard
tracker (:mod:`kernbench.tl.hazards`).

The ``tl`` API is spread by job: data movement, identity, scopes, GEMM,
composites and waits here; math-engine ops in :mod:`kernbench.tl.elementwise`;
PE-to-PE messages in :mod:`kernbench.tl.messages`; row gathers and scatters in
:mod:`kernbench.tl.rows`; composite lowering in :mod:`kernbench.tl.build`.

In data mode every command also carries its numpy effect, applied when the
command completes; f16 arithmetic is done in f32 and rounded.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence

import numpy as np

from kernbench.components.dtypes import nbytes
from kernbench.components.pe.commands import CyclesCmd, DmaReadCmd, DmaWriteCmd
from kernbench.components.pe.operand import Operand
from kernbench.tl.build import CompositeBuilder
from kernbench.tl.elementwise import ElementwiseOps
from kernbench.tl.hazards import Hazards
from kernbench.tl.issue import Issuer, KernelHost, RecordingIssuer, SimIssuer
from kernbench.tl.messages import MessageOps
from kernbench.tl.pointers import call_kernel
from kernbench.tl.rows import RowOps
from kernbench.tl.scratch import ScratchArena
from kernbench.tl.tensors import TensorArg, TensorHandle, TensorLease, TLError
from kernbench.topology.tcm_layout import TcmLayout


def record(fn, *args, spec, kernel: str = "kernel", pe: tuple[int, int, int] = (0, 0, 0),
           program_id: tuple[int, int] = (0, 0), num_programs: tuple[int, int] = (1, 1)) -> list:
    """Run ``fn(tl, *args)`` (or a pointer-form ``fn(*args, tl=tl)``, :mod:`kernbench.tl.pointers`) in
    command-list mode and return the PE commands it would issue, in order."""
    ctx = TLContext.recorder(spec, kernel, pe, program_id, num_programs)
    call_kernel(fn, ctx, args)
    ctx.end_kernel()
    return ctx.commands


class TLContext(ElementwiseOps, MessageOps, RowOps):
    """The ``tl`` object a kernel receives: its PE, program ids, scratch and every ``tl.*`` operation."""

    __slots__ = ("_builder", "_clock_ghz", "_descriptor_cap", "_hazards", "_issuer", "_loose_scopes", "_program",
                 "_scratch", "_session", "_slot_bytes", "_tile", "kernel", "pe")

    def __init__(self, issuer: Issuer, spec, kernel: str, pe: tuple[int, int, int], program_id: tuple[int, int],
                 num_programs: tuple[int, int]) -> None:
        sip, cube, pe_id = pe
        self.pe = pe
        self.kernel = kernel
        self._program = (tuple(program_id), tuple(num_programs))
        where = f"kernel {kernel!r} on PE {pe}"
        self._issuer = issuer
        self._hazards = Hazards(issuer, where)
        lo, hi = TcmLayout.of(spec).scratch
        self._scratch = ScratchArena(TcmLayout.addr(sip, cube, pe_id, lo), hi - lo, where)
        self._tile = (spec.pe.gemm.tile_m, spec.pe.gemm.tile_n, spec.pe.gemm.tile_k)
        self._clock_ghz = spec.pe.clock_ghz
        self._descriptor_cap = spec.pe.cost_model.max_composite_logical_bytes
        self._slot_bytes = spec.pe.ipcq.slot_bytes
        self._builder = CompositeBuilder(self)
        self._session: object | None = None  # whose tensor arguments this kernel may use (see bind_session)
        self._loose_scopes: dict[ScratchScope, str] = {}  # scopes made but not entered yet -> where they were made

    @classmethod
    def for_pe(cls, host: KernelHost) -> TLContext:
        """The context of a kernel starting on a simulated PE (the PE_CPU's kernel-language hook)."""
        where = f"kernel {host.kernel!r} on PE {host.pe}"
        return cls(SimIssuer(host, where), host.spec, host.kernel, host.pe, host.program_id, host.num_programs)

    @classmethod
    def recorder(cls, spec, kernel: str = "kernel", pe: tuple[int, int, int] = (0, 0, 0),
                 program_id: tuple[int, int] = (0, 0), num_programs: tuple[int, int] = (1, 1)) -> TLContext:
        """A context in command-list mode: ``tl`` calls record commands and return at once, without time."""
        return cls(RecordingIssuer(), spec, kernel, pe, program_id, num_programs)

    @property
    def commands(self) -> list:
        """The commands recorded so far (command-list mode only)."""
        if not isinstance(self._issuer, RecordingIssuer):
            raise TLError("commands are only recorded in command-list mode (TLContext.recorder / tl.record)")
        return list(self._issuer.commands)

    @property
    def now_ns(self) -> float:
        """The simulated time now, ns (0 in command-list mode). Reading it costs nothing."""
        return self._issuer.now_ns

    @property
    def waiting(self) -> str | None:
        """What the kernel is blocked on right now, if anything (for deadlock reports)."""
        return self._issuer.waiting

    @property
    def pending_events(self) -> list:
        """Events of issued, not yet waited-for asynchronous commands."""
        return self._hazards.pending

    def bind_session(self, session: object) -> None:
        """Accept tensor arguments of ``session``'s tensors only (the runtime calls this as the kernel starts):
        an argument kept from a kernel of another session then fails instead of addressing that session's
        memory."""
        self._session = session

    def end_kernel(self) -> None:
        """Checks once the kernel body has returned: every ``tl.scratch_scope()`` it made was entered
        (:class:`TLError` naming where one was made but never used in a ``with`` statement)."""
        if self._loose_scopes:
            where = next(iter(self._loose_scopes.values()))
            n = len(self._loose_scopes)
            raise TLError(f"tl.scratch_scope() at {where} was never entered{f' (and {n - 1} more)' if n > 1 else ''}"
                          f", so it released nothing; write `with tl.scratch_scope():` around the work whose scratch "
                          f"it should release")

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

    # ------------------------------------------------------------------ scratch and operand checks
    @property
    def scratch_used(self) -> int:
        """Bytes of scratch handed out so far."""
        return self._scratch.cursor

    def _handle(self, addr: int, shape: Sequence[int], dtype: str, space: str, pitch: int = 0,
                virtual: bool = False) -> TensorHandle:
        return TensorHandle(self, Operand(addr, tuple(int(s) for s in shape), dtype, space, pitch), virtual)

    @staticmethod
    def _shape(op: str, shape) -> tuple[int, ...]:
        """A shape a kernel gave (an int or a sequence of ints), checked: every size a positive integer."""
        dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
        try:
            dims = tuple(dims)
        except TypeError:
            raise TLError(f"tl.{op}: shape {shape!r} is not a shape; give an int or a tuple of ints") from None
        if not dims or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in dims):
            raise TLError(f"tl.{op}: shape {shape!r} is invalid; every size must be a positive integer, e.g. (8, 64)")
        return tuple(int(d) for d in dims)

    def _new(self, shape: Sequence[int], dtype: str) -> TensorHandle:
        shape = tuple(int(s) for s in shape)
        h = TensorHandle(self, Operand(self._scratch.alloc(nbytes(shape, dtype)), shape, dtype, "tcm"))
        h.scope = self._scratch.scope
        return h

    def scratch_scope(self) -> ScratchScope:
        """``with tl.scratch_scope():`` — scratch allocated inside is released when the block exits.

        Scopes nest. On exit the cursor rewinds to where the scope began, after
        waiting for any lazy load still filling a buffer being released; a
        tensor allocated inside the scope cannot be used after it (TLError).
        Tensors that must live across iterations (a running state, prefetch
        buffers) are allocated before entering the scope. A scope is used by
        one ``with`` statement: entering it twice, or never, is a TLError.
        """
        scope = ScratchScope(self)
        caller = sys._getframe(1)
        self._loose_scopes[scope] = f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}"
        return scope

    def _own(self, *handles) -> None:
        for h in handles:
            if not isinstance(h, TensorHandle):
                continue
            if h.ctx is not self:
                raise TLError(f"kernel {self.kernel!r} on PE {self.pe} used a tensor handle created by another "
                              f"kernel ({h.ctx.kernel!r} on PE {h.ctx.pe}); handles are only valid in their kernel")
            if h.lease is not None and h.lease.gone is not None:
                raise TLError(f"kernel {self.kernel!r} on PE {self.pe} used {h}, a reference into tensor argument "
                              f"{h.lease.label}, which {h.lease.gone} while the kernel ran, so its memory may now "
                              f"hold another tensor; free a tensor only after the kernels using it have finished "
                              f"(torch.wait)")
            if self._scratch.is_dead(h.scope):
                raise TLError(f"kernel {self.kernel!r} on PE {self.pe} used {h}, allocated in a scratch scope that "
                              f"has exited; its bytes may be reused — allocate it before the scope")

    def _tcm(self, op: str, *handles) -> None:
        """Check TCM operands of ``op`` and wait for any load or composite still filling them."""
        for h in handles:
            if isinstance(h, TensorArg):
                raise TLError(f"tl.{op}: {h.shape} {h.dtype} is a tensor argument in HBM; tl.load it first")
        self._own(*handles)
        for h in handles:
            if isinstance(h, TensorHandle) and h.space != "tcm":
                raise TLError(f"tl.{op}: operand {h} is in HBM; tl.load it into the TCM first")
        self._hazards.await_ready(*handles)
        self._hazards.sync_reads(handles)

    # ------------------------------------------------------------------ data movement
    def ref(self, arg: TensorArg | TensorHandle) -> TensorHandle:
        """A handle naming an HBM tensor argument without moving data."""
        return self._ref("ref", arg)

    def _ref(self, op: str, arg: TensorArg | TensorHandle) -> TensorHandle:
        """:meth:`ref` for ``tl.<op>``: a tensor argument's lease is checked first (see :meth:`_check_arg`)."""
        if isinstance(arg, TensorHandle):
            self._own(arg)
            return arg
        if not isinstance(arg, TensorArg):
            raise TLError(f"tl.{op} expects a tensor argument, got {type(arg).__name__}")
        if arg.lease is not None:
            self._check_arg(op, arg.lease)
        if arg.addr is None:
            raise TLError(f"tl.{op}: this tensor argument ({arg.dtype}{list(arg.tensor_shape or ())}) was passed "
                          f"by_address and has no shard on this PE; address it with tl.global_ref(arg)[...]")
        if arg.va is not None:
            h = self._handle(arg.va, arg.shape, arg.dtype, "hbm", virtual=True)
        else:
            h = self._handle(arg.addr.encode(), arg.shape, arg.dtype, "hbm")
        h.lease = arg.lease
        return h

    def global_ref(self, arg: TensorArg) -> TensorHandle:
        """A virtual handle over the whole tensor (2-D view), wherever its shards live; slice it into blocks."""
        if not isinstance(arg, TensorArg) or arg.tensor_va is None:
            raise TLError("tl.global_ref needs a tensor argument deployed with virtual addresses")
        if arg.lease is not None:
            self._check_arg("global_ref", arg.lease)
        shape = arg.tensor_shape
        view = (1, shape[0]) if len(shape) == 1 else (math.prod(shape[:-1]), shape[-1])
        h = self._handle(arg.tensor_va, view, arg.dtype, "hbm", virtual=True)
        h.lease = arg.lease
        return h

    def _check_arg(self, op: str, lease: TensorLease) -> None:
        """:class:`TLError` when a tensor argument belongs to another session than this kernel's, or its tensor is
        gone (freed, or its session closed): its addresses may now hold another tensor. One check per ``tl`` call
        that takes a tensor argument, before any command is built."""
        owner = lease.owner
        if self._session is not None and owner is not self._session:
            raise TLError(f"tl.{op}: tensor argument {lease.label} belongs to {getattr(owner, 'name', owner)}, but "
                          f"this kernel runs in {getattr(self._session, 'name', self._session)}; pass this "
                          f"session's tensors as launch arguments (an argument kept from a kernel of another session "
                          f"addresses that session's memory)")
        if lease.gone is not None:
            raise TLError(f"tl.{op}: tensor argument {lease.label} of {getattr(owner, 'name', owner)} {lease.gone}, "
                          f"so its memory may now hold another tensor; pass a live tensor as a launch argument "
                          f"instead of one kept from an earlier kernel")

    def _phys(self, h: TensorHandle) -> tuple[int, float]:
        """Physical address of a handle and the translation time its DMA pays (ns)."""
        if not h.virtual:
            return h.addr, 0.0
        return self._issuer.translate(h.addr, h.span)

    def _dma_target(self, op: str, h: TensorHandle) -> tuple[int, float]:
        """Physical address (and translation time) of a DMA's far side, checked before anything is issued."""
        if h.space != "hbm":
            raise TLError(f"tl.{op}: {h} is already in the TCM; DMA moves data between the TCM and HBM/SRAM")
        addr, translate_ns = self._phys(h)
        self._issuer.check_target(addr, h.span)  # AddressError here, not inside the engine
        return addr, translate_ns

    def load(self, src: TensorArg | TensorHandle, out: TensorHandle | None = None) -> TensorHandle:
        """Start a DMA of a tensor into TCM scratch (or into ``out``) and return its TCM handle at once.

        The load is lazy: the first operation that reads the handle waits for
        the data, so independent work issued in between overlaps the DMA.
        Passing a persistent ``out`` buffer lets a loop prefetch the next tile
        without growing its scratch.
        """
        h = self._ref("load", src)
        if h.space != "hbm":
            raise TLError(f"tl.load: {h} is already in the TCM")
        if out is None:
            out = self._new(h.shape, h.dtype)
        else:  # reuse a buffer (double buffering): it must be free of earlier loads
            self._own(out)
            if out.space != "tcm" or out.shape != h.shape or out.dtype != h.dtype:
                raise TLError(f"tl.load: out is {out} but the source is {h.shape} {h.dtype} (a TCM buffer of the "
                              f"same shape and dtype is needed)")
            self._hazards.await_ready(out)
            self._hazards.sync(out.addr, out.addr + out.nbytes, write=True)
        row = h.shape[-1] * np.dtype(h.dtype).itemsize if h.pitch else 0
        src, translate_ns = self._dma_target("load", h)
        self._hazards.sync(src, src + h.span, write=False)  # a composite may still be writing the source
        cmd = DmaReadCmd(src, out.addr, h.nbytes, self._issuer.event(), row_bytes=row, src_pitch=h.pitch,
                         dst_pitch=row, translate_ns=translate_ns)
        self._issuer.start(cmd)
        self._hazards.track_fill(out, cmd.done, out.addr - self._scratch.base)
        return out

    def store(self, dst: TensorArg | TensorHandle, src: TensorHandle) -> None:
        """DMA a TCM tensor to ``dst`` (an HBM tensor of the same shape and dtype); waits until written."""
        d = self._ref("store", dst)
        self._tcm("store", src)
        if d.shape != src.shape or d.dtype != src.dtype:
            raise TLError(f"tl.store: destination is {d.shape} {d.dtype} but the value is {src.shape} {src.dtype}")
        row = d.shape[-1] * np.dtype(d.dtype).itemsize if d.pitch else 0
        dst, translate_ns = self._dma_target("store", d)
        self._hazards.sync(dst, dst + d.span, write=True)
        self._issuer.issue(DmaWriteCmd(src.addr, dst, src.nbytes, self._issuer.event(), row_bytes=row, src_pitch=row,
                                       dst_pitch=d.pitch, translate_ns=translate_ns))

    # ------------------------------------------------------------------ GEMM
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

    # ------------------------------------------------------------------ time
    def cycles(self, n: int) -> None:
        """Charge ``n`` PE clock cycles of PE_CPU work."""
        if not isinstance(n, int) or n < 0:
            raise TLError(f"tl.cycles expects a non-negative integer, got {n!r}")
        self._issuer.issue(CyclesCmd(n, self._issuer.event()))

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
        done = self._issuer.event()
        cmd, result = self._builder.build(operands, op, a, b, x, out, out_ptr, prologue, epilogue, out_dtype, done)
        self._issuer.start(cmd)
        reads, writes = cmd.ranges()
        self._hazards.track_composite(done, reads, writes)
        return result

    # ------------------------------------------------------------------ waiting
    def wait(self, x=None):
        """Wait until ``x`` (a tensor handle: a lazily loaded tensor or a composite's output) holds its value
        and return it; with no argument, wait for every pending load and composite."""
        if x is None:
            self._hazards.drain()
            return None
        if not isinstance(x, TensorHandle):
            raise TLError(f"tl.wait expects a tensor handle (or nothing), got {type(x).__name__}")
        self._own(x)
        self._hazards.await_ready(x)
        if self._hazards.composites:
            addr = self._phys(x)[0] if x.space == "hbm" else x.addr  # composites record physical ranges
            self._hazards.sync(addr, addr + x.span, write=False)
        return x


class ScratchScope:
    """What ``tl.scratch_scope()`` returns: one ``with`` block whose scratch allocations are released at its end.

    Single use: entering it a second time (or inside itself) is a TLError, as
    is closing scopes out of order; a scope never entered is reported when
    the kernel ends (:meth:`TLContext.end_kernel`).
    """

    __slots__ = ("_ctx", "_entered", "_open")

    def __init__(self, ctx: TLContext) -> None:
        self._ctx = ctx
        self._entered = False
        self._open: tuple[int, int] | None = None  # (scope id, cursor at entry) while the block runs

    def __enter__(self) -> None:
        ctx = self._ctx
        if self._entered:
            raise TLError("tl.scratch_scope(): this scope was already entered; a scope serves one `with` block, so "
                          "write `with tl.scratch_scope():` at each place (a loop body gets a fresh one each time)")
        self._entered = True
        ctx._loose_scopes.pop(self, None)
        self._open = ctx._scratch.open()

    def __exit__(self, *exc) -> None:
        if self._open is None:
            raise TLError("tl.scratch_scope(): this scope is not open; use it as `with tl.scratch_scope():`")
        ctx, (sid, start) = self._ctx, self._open
        arena = ctx._scratch
        if arena.scope != sid:
            raise TLError("tl.scratch_scope(): scopes must close innermost first; nest the `with` blocks")
        self._open = None
        try:
            ctx._hazards.release(start, arena.base + start, arena.base + arena.capacity)
        finally:
            arena.close(sid, start)
