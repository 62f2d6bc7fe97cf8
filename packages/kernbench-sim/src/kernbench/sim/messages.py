"""Message kinds: how the engine starts and completes each message type, and the fabric's own transfers.

The engine knows no message type by name. A :class:`MessageKind` binds a
message class to a *start* handler (route it, send its first packets or
control messages; raise before anything is scheduled when it cannot go) and
a *complete* handler (data-mode effects and the op-log row, run when the
request completes). Kinds are registered in a
:class:`~kernbench.sim.component.ComponentRegistry` the way component
implementations are; higher packages add theirs (kernel launches, MMU
mappings).

This module also defines the data transfers every fabric has — they are the
probe's vocabulary and need nothing above the fabric:

* :class:`MemoryWriteMsg` / :class:`MemoryReadMsg`: host writes (H2D) and
  reads (D2H) over the direct memory path;
* :class:`PeDmaWriteMsg` / :class:`PeDmaReadMsg`: a PE's DMA engine pushing to
  or pulling from any address;
* :class:`McpuDmaWriteMsg`: a cube's M_CPU writing anywhere.

All messages are frozen: the engine stamps a correlation id on a separate
:class:`~kernbench.sim.engine.Request`. Sizes are bytes; addresses are
:class:`~kernbench.topology.PhysAddr`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr

#: ``handler(engine, request)``: a message kind's start or complete step.
Handler = Callable[[object, object], None]


@dataclass(frozen=True, slots=True)
class MessageKind:
    """How a :class:`~kernbench.sim.engine.GraphEngine` starts and completes one message type.

    ``start(engine, request)`` injects the message now; it must raise (a
    ``KernbenchError``) before scheduling anything when the message cannot be
    delivered. ``complete(engine, request)`` runs when the request completes:
    data-mode effects, then the request's op-log row (default:
    :func:`record_transfer`).
    """

    msg_type: type
    start: Handler
    complete: Handler | None = None


def record_transfer(engine, req) -> None:
    """The op-log row of a completed data transfer: its source, op name, correlation id and size."""
    engine.oplog.record(req.t_submit, req.t_end, req.source, "memory", req.op_name,
                        {"corr_id": req.corr_id, "nbytes": req.msg.nbytes})


@dataclass(frozen=True, slots=True)
class MemoryWriteMsg:
    """Host-to-device write (H2D) of ``nbytes`` to ``dst`` over the direct memory path.

    ``data`` (data mode only) is the payload committed to memory when the write completes.
    """

    dst: PhysAddr
    nbytes: int
    data: bytes | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class MemoryReadMsg:
    """Device-to-host read (D2H): a command travels to ``src``, the data returns to the host."""

    src: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class PeDmaWriteMsg:
    """PE-initiated DMA write: PE (sip, cube, pe) pushes ``nbytes`` to ``dst``."""

    sip: int
    cube: int
    pe: int
    dst: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class PeDmaReadMsg:
    """PE-initiated DMA read: PE (sip, cube, pe) pulls ``nbytes`` from ``src``."""

    sip: int
    cube: int
    pe: int
    src: PhysAddr
    nbytes: int


@dataclass(frozen=True, slots=True)
class McpuDmaWriteMsg:
    """M_CPU-initiated DMA write from cube (sip, cube)'s M_CPU to ``dst``; skips PE pipelines."""

    sip: int
    cube: int
    dst: PhysAddr
    nbytes: int


def _start_memory_write(engine, req) -> None:
    dst = engine.resolve(req.msg.dst, req.msg.nbytes)
    engine.start_transfer(req, nm.HOST, engine.router.memory_path(nm.HOST, dst), "h2d_write", req.msg.dst, True)


def _complete_memory_write(engine, req) -> None:
    msg = req.msg
    if engine.memory is not None and msg.data is not None:
        engine.memory.write(msg.dst.encode(), msg.data)
    record_transfer(engine, req)


def _start_memory_read(engine, req) -> None:
    src = engine.resolve(req.msg.src, req.msg.nbytes)
    engine.start_transfer(req, nm.HOST, engine.router.memory_path(nm.HOST, src), "d2h_read", req.msg.src, False)


def _complete_memory_read(engine, req) -> None:
    if engine.memory is not None:
        req.result = engine.memory.read(req.msg.src.encode(), req.msg.nbytes)
    record_transfer(engine, req)


def _pe_dma(engine, msg) -> str:
    return engine.resolver.find_pe_block(msg.sip, msg.cube, msg.pe, "pe_dma")


def _start_pe_dma_write(engine, req) -> None:
    src, dst = _pe_dma(engine, req.msg), engine.resolve(req.msg.dst, req.msg.nbytes)
    engine.start_transfer(req, src, engine.router.pe_dma_path(src, dst), "dma_write", req.msg.dst, True)


def _start_pe_dma_read(engine, req) -> None:
    src, dst = _pe_dma(engine, req.msg), engine.resolve(req.msg.src, req.msg.nbytes)
    engine.start_transfer(req, src, engine.router.pe_dma_path(src, dst), "dma_read", req.msg.src, False)


def _start_mcpu_dma_write(engine, req) -> None:
    src = engine.resolver.find_m_cpu(req.msg.sip, req.msg.cube)
    dst = engine.resolve(req.msg.dst, req.msg.nbytes)
    engine.start_transfer(req, src, engine.router.mcpu_dma_path(src, dst), "mcpu_dma_write", req.msg.dst, True)


#: The fabric's own data transfers; every engine understands them.
TRANSFER_KINDS: tuple[MessageKind, ...] = (
    MessageKind(MemoryWriteMsg, _start_memory_write, _complete_memory_write),
    MessageKind(MemoryReadMsg, _start_memory_read, _complete_memory_read),
    MessageKind(PeDmaWriteMsg, _start_pe_dma_write),
    MessageKind(PeDmaReadMsg, _start_pe_dma_read),
    MessageKind(McpuDmaWriteMsg, _start_mcpu_dma_write),
)
