"""PE-to-PE messages of the kernel language: ``tl.send``, ``tl.recv``, ``tl.recv_async`` (PE_IPCQ).

Peers are named by direction (see :data:`~kernbench.components.pe.ipcq.DIRECTIONS`);
a message must fit one IPCQ slot (``pe.ipcq.slot_kib``). Sends snapshot their
source and return once the PE_IPCQ has taken them; the kernel's end waits
for their delivery. :class:`MessageOps` is mixed into
:class:`~kernbench.tl.context.TLContext`.
"""

from __future__ import annotations

from kernbench.components.pe.commands import IpcqRecvCmd, IpcqSendCmd
from kernbench.components.pe.ipcq import DIRECTIONS
from kernbench.tl.tensors import TensorHandle, TLError
from kernbench.topology.address import decode


class MessageOps:
    """``tl.send``, ``tl.recv``, ``tl.recv_async`` and the diagnostic ``tl.recv_no_consume``."""

    __slots__ = ()

    def _direction(self, op: str, direction: str) -> None:
        if direction not in DIRECTIONS:
            raise TLError(f"tl.{op}: unknown direction {direction!r}; use one of {', '.join(DIRECTIONS)}")
        installed = self._issuer.directions()
        if installed is not None and direction not in installed:
            have = ", ".join(installed) or "none"
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
            self._hazards.sync(addr, addr + size, write=False)
        self._slot_check("send", size)
        delivered = self._issuer.event()
        self._issuer.waiting = f"tl.send({direction!r}) waiting for a free slot at the peer"
        self._issuer.issue(IpcqSendCmd(direction, addr, size, self._issuer.event(), delivered))
        self._hazards.track(delivered)

    def _recv_target(self, op: str, shape, dtype: str, out: TensorHandle | None) -> TensorHandle:
        if out is not None:
            if not isinstance(out, TensorHandle) or out.space != "tcm":
                raise TLError(f"tl.{op}: out must be a TCM tensor (receive into TCM, then tl.store), got {out!r}")
            self._own(out)
            self._hazards.await_ready(out)
            self._hazards.sync(out.addr, out.addr + out.nbytes, write=True)
            return out
        if shape is None:
            raise TLError(f"tl.{op}: give the message's shape (and dtype), or out=")
        shape = self._shape(op, shape)
        self._dtype(dtype)
        return self._new(shape, dtype)

    def _recv_cmd(self, op: str, direction: str, shape, dtype: str, out: TensorHandle | None,
                  consume: bool = True) -> tuple[TensorHandle, IpcqRecvCmd]:
        """Check a receive and build its command: the target tensor (new scratch or ``out``) and the message."""
        self._direction(op, direction)
        h = self._recv_target(op, shape, dtype, out)
        self._slot_check(op, h.nbytes)
        return h, IpcqRecvCmd(direction, h.addr, h.nbytes, self._issuer.event(), consume)

    def recv(self, direction: str, shape=None, dtype: str = "float16", *, out: TensorHandle | None = None
             ) -> TensorHandle:
        """Wait for the next message from ``direction`` and copy it into a new TCM tensor of ``shape``/``dtype``
        (or into ``out``); returns the tensor. The message must have exactly the tensor's size."""
        h, cmd = self._recv_cmd("recv", direction, shape, dtype, out)
        self._issuer.waiting = f"tl.recv({direction!r})"
        self._issuer.issue(cmd)
        return h

    def recv_async(self, direction: str, shape=None, dtype: str = "float16", *, out: TensorHandle | None = None
                   ) -> TensorHandle:
        """Like :meth:`recv` but returns at once: the tensor is a future that its first reader (or
        ``tl.wait``) waits for."""
        h, cmd = self._recv_cmd("recv_async", direction, shape, dtype, out)
        self._issuer.start(cmd)
        self._hazards.track_fill(h, cmd.done, h.addr - self._scratch.base)
        return h

    def recv_no_consume(self, direction: str, shape=None, dtype: str = "float16") -> TensorHandle:
        """DIAGNOSTIC ONLY: :meth:`recv` without the time of copying the message out of its slot (the data
        still arrives). For comparing the arrival alone against a plain DMA; kernels must use :meth:`recv`."""
        h, cmd = self._recv_cmd("recv_no_consume", direction, shape, dtype, None, consume=False)
        self._issuer.waiting = f"tl.recv_no_consume({direction!r})"
        self._issuer.issue(cmd)
        return h
