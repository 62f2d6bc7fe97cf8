"""PE_IPCQ: the PE's inter-PE message queue — receive rings, credits and direction addressing.

Kernels name peers by direction (``intra_*`` between PEs of one cube, ``N S
E W`` between cubes of a SIP, ``global_*`` between SIPs). A neighbour table
installed once per process group (:meth:`PeIpcq.install`) maps each of a
PE's directions to a peer PE and to the base address of this PE's *receive
ring* for messages coming from that peer. A ring has ``pe.ipcq.depth``
slots of ``pe.ipcq.slot_kib`` KiB in the TCM, the cube SRAM or the PE's HBM
slice (the *buffer kind*, chosen at install).

The IPCQ is control only; PE_DMA moves the bytes:

* **send** — the sender's IPCQ takes a free slot of the peer's ring for the
  direction (with none left the send waits: backpressure) and snapshots the
  source into its transmit staging buffer: a TCM-to-TCM copy on the TCM's
  read and write channels, after which the kernel may reuse the source and
  the send completes. It then hands a write of the staged bytes into the
  peer's slot to its PE_DMA on the ``comm`` virtual channel; the message is
  *delivered* when its last byte has landed in the slot's memory (so the
  inbound side pays the links and the mesh hops to the slot's backing
  memory, and the memory itself).
* **recv** — waits for the next message of the direction in send order
  (messages carry a sequence number, so one that overtakes another on a
  second DMA channel still waits its turn), then consumes it: the
  receiver's PE_DMA copies the slot into the destination TCM tensor
  (``comm`` channel, op ``memory/ipcq_copy``), the slot is freed, and a
  credit naming that slot travels back to the sender as a control message.
  The diagnostic ``consume=False`` form skips the copy's time.

A message is therefore never faster than a raw DMA of the same bytes over
the same path: it is that DMA plus the IPCQ's overheads and the copy out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kernbench.components.pe.commands import DmaReadCmd, DmaWriteCmd, IpcqRecvCmd, IpcqSendCmd
from kernbench.sim.component import Component
from kernbench.sim.protocol import Engine
from kernbench.topology import block_params
from kernbench.topology import naming as nm
from kernbench.topology.errors import KernbenchError

DIRECTIONS = ("intra_N", "intra_S", "intra_E", "intra_W", "N", "S", "E", "W",
              "global_N", "global_S", "global_E", "global_W")
_FLIP = {"N": "S", "S": "N", "E": "W", "W": "E"}
#: The direction a message sent towards ``d`` arrives from, at the peer.
OPPOSITE = {d: d[:-1] + _FLIP[d[-1]] for d in DIRECTIONS}
BUFFER_KINDS = ("tcm", "sram", "hbm")


class IpcqError(KernbenchError):
    """A PE-to-PE message went wrong: unknown direction, wrong size, no neighbour installed."""


@dataclass(frozen=True, slots=True)
class IpcqLink:
    """One installed direction of a PE: the peer PE ``(sip, cube, pe)`` and this PE's receive ring for it."""

    peer: tuple[int, int, int]
    rx_base: int


@dataclass(frozen=True, slots=True)
class IpcqCredit:
    """Slot ``slot`` of the peer's ring, freed and returned to the sender of ``direction`` (the sender's side)."""

    direction: str
    slot: int


@dataclass(slots=True)
class _Message:
    seq: int
    slot: int
    nbytes: int
    sender: str


def peer_name(peer: tuple[int, int, int]) -> str:
    """``sipS.cubeC.peP`` of a PE coordinate."""
    return nm.pe_prefix(*peer)


class PeIpcq(Component):
    """The PE's collective endpoint: per-direction receive rings, send credits and the neighbour table."""

    PARAMS = block_params.PE_IPCQ  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("arrived", "buffer_kind", "depth", "free_slots", "links", "rx", "rx_next", "slot_bytes", "tx_seq",
                 "tx_waiting", "waiters")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.depth = node.attrs["depth"]
        self.slot_bytes = node.attrs["slot_bytes"]
        self.install({}, "tcm")

    # ------------------------------------------------------------------ table
    def install(self, links: dict[str, IpcqLink], buffer_kind: str) -> None:
        """Replace the neighbour table (directions -> links) and reset every ring and credit."""
        self.links = dict(links)
        self.buffer_kind = buffer_kind
        self.free_slots: dict[str, deque[int]] = {d: deque(range(self.depth)) for d in self.links}  # peer's ring
        self.tx_seq = dict.fromkeys(self.links, 0)
        self.rx: dict[str, deque[_Message]] = {d: deque() for d in self.links}  # deliverable, in send order
        self.rx_next = dict.fromkeys(self.links, 0)  # sequence number the receive queue expects next
        self.arrived: dict[str, dict[int, _Message]] = {d: {} for d in self.links}  # landed ahead of their turn
        self.waiters: dict[str, deque] = {d: deque() for d in self.links}
        self.tx_waiting: dict[str, deque] = {d: deque() for d in self.links}

    def slot_addr(self, direction: str, slot: int) -> int:
        """Encoded address of a slot of this PE's receive ring for ``direction``."""
        return self.links[direction].rx_base + slot * self.slot_bytes

    def _peer_ipcq(self, direction: str) -> PeIpcq:
        return self.engine.components[nm.pe_block(*self.links[direction].peer, "pe_ipcq")]

    # ------------------------------------------------------------------ commands
    def on_control(self, payload: object, t: float, transfer) -> None:
        """A send or receive from the scheduler, or a credit coming back from a peer."""
        t0 = t + self.overhead_ns
        if isinstance(payload, IpcqSendCmd):
            self.engine.at(t0, self._send, (payload, transfer.request))
        elif isinstance(payload, IpcqRecvCmd):
            self.engine.at(t0, self._recv, (payload, transfer.request))
        elif isinstance(payload, IpcqCredit):
            self.engine.at(t0, self._credit, payload)
        else:
            super().on_control(payload, t, transfer)

    def _send(self, item: tuple) -> None:
        cmd, request = item
        d = cmd.direction
        if d not in self.links:
            cmd.done.succeed(IpcqError(f"{self.id}: no neighbour installed in direction {d!r}"))
            return
        peer = self._peer_ipcq(d)
        back = OPPOSITE[d]
        if back not in peer.links or peer_name(peer.links[back].peer) != nm.pe_of(self.id):
            cmd.done.succeed(IpcqError(f"{self.id}: the neighbour table is not symmetric: {peer.id} has no "
                                       f"{back!r} link back to this PE; install symmetric tables"))
            return
        if not self.free_slots[d]:
            self.tx_waiting[d].append(item)
            return
        slot = self.free_slots[d].popleft()
        seq = self.tx_seq[d]
        self.tx_seq[d] += 1
        dst = peer.slot_addr(back, slot)
        eng = self.engine
        mem = eng.memory
        snapshot = mem.read(cmd.src, cmd.nbytes) if mem is not None else None
        # the snapshot: the source is copied into the transmit staging buffer through the TCM's two channels
        tcm = eng.components[nm.sibling(self.id, "pe_tcm")]
        t0 = eng.now
        t_staged = max(tcm.read(t0, cmd.nbytes)[1], tcm.write(t0, cmd.nbytes)[1])
        landed = eng.completion()

        def delivered(_ev) -> None:
            if mem is not None:
                mem.write(dst, snapshot)
            eng.oplog.record(t0, eng.now, self.id, "comm", "ipcq_send",
                             {"dir": d, "peer": peer.id, "nbytes": cmd.nbytes, "buffer": self.buffer_kind})
            peer.arrive(back, _Message(seq, slot, cmd.nbytes, self.id))
            cmd.delivered.succeed(None)

        landed.then(delivered)
        dma = nm.sibling(self.id, "pe_dma")
        write = DmaWriteCmd(cmd.src, dst, cmd.nbytes, landed, copy_data=False, vc="comm")
        eng.send_control(request, (self.id, dma), write, t_start=t_staged, apply_source_overhead=False)
        eng.at(t_staged, lambda _: cmd.done.succeed(None))

    def arrive(self, direction: str, msg: _Message) -> None:
        """A message's last byte landed in one of this PE's slots for ``direction``; it becomes receivable once
        every earlier message of the direction has."""
        ahead = self.arrived[direction]
        ahead[msg.seq] = msg
        while self.rx_next[direction] in ahead:
            ready = ahead.pop(self.rx_next[direction])
            self.rx_next[direction] += 1
            waiting = self.waiters[direction]
            if waiting:
                self._consume(waiting.popleft(), ready)
            else:
                self.rx[direction].append(ready)

    def _recv(self, item: tuple) -> None:
        cmd, _ = item
        d = cmd.direction
        if d not in self.links:
            cmd.done.succeed(IpcqError(f"{self.id}: no neighbour installed in direction {d!r}"))
            return
        queue = self.rx[d]
        if queue:
            self._consume(item, queue.popleft())
        else:
            self.waiters[d].append(item)

    def _consume(self, item: tuple, msg: _Message) -> None:
        cmd, request = item
        d = cmd.direction
        if msg.nbytes != cmd.nbytes:  # the message stays first in line; the receive fails
            self.rx[d].appendleft(msg)
            cmd.done.succeed(IpcqError(f"{self.id}: recv on {d!r} expected {cmd.nbytes} bytes but the message "
                                       f"from {msg.sender} has {msg.nbytes}; receive it with its own size"))
            return
        eng = self.engine
        src = self.slot_addr(d, msg.slot)
        if not cmd.consume:  # diagnostic: the data appears at once, no copy time
            if eng.memory is not None:
                eng.memory.copy(cmd.dst, src, cmd.nbytes)
            self._free(d, msg, request)
            cmd.done.succeed(None)
            return
        t0 = eng.now
        copied = eng.completion()

        def done(_ev) -> None:
            eng.oplog.record(t0, eng.now, self.id, "memory", "ipcq_copy",
                             {"dir": d, "nbytes": cmd.nbytes, "buffer": self.buffer_kind})
            self._free(d, msg, request)
            cmd.done.succeed(None)

        copied.then(done)
        dma = nm.sibling(self.id, "pe_dma")
        eng.send_control(request, (self.id, dma), DmaReadCmd(src, cmd.dst, cmd.nbytes, copied, vc="comm"),
                         apply_source_overhead=False)

    def _free(self, direction: str, msg: _Message, request) -> None:
        """Free a consumed slot and send its credit back to the sender."""
        eng = self.engine
        path = eng.router.control_path(self.id, nm.sibling(msg.sender, "pe_ipcq"))
        eng.send_control(request, path, IpcqCredit(OPPOSITE[direction], msg.slot))

    def _credit(self, credit: IpcqCredit) -> None:
        self.free_slots[credit.direction].append(credit.slot)
        waiting = self.tx_waiting[credit.direction]
        if waiting:
            self._send(waiting.popleft())

    def blocked(self) -> str | None:
        """Receives waiting for a message and sends waiting for a credit, for deadlock reports."""
        parts = []
        for d, q in self.waiters.items():
            if q:
                parts.append(f"recv on {d!r} from {peer_name(self.links[d].peer)} has no message")
        for d, q in self.tx_waiting.items():
            if q:
                parts.append(f"send on {d!r} to {peer_name(self.links[d].peer)} waits for a free slot")
        return f"{self.id}: {'; '.join(parts)}" if parts else None
