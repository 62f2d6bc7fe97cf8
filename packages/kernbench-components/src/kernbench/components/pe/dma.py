"""PE_DMA in its kernel role: read and write channels (``pe.dma.read_channels`` / ``write_channels``, 1 each
by default), each channel running one command at a time, on two virtual channels.

The ``compute`` and ``comm`` virtual channels have separate queues and
channels, so collective traffic never queues behind a kernel's bulk reads
(they still share the fabric's wires).

A read sends a command over the fabric to the source memory and receives the
data back along the reversed path into this PE's TCM. A write streams from
the TCM through the DMA onto the fabric. Commands on one channel run in
arrival order; reads and writes overlap. In data mode the bytes move when
the command completes.
"""

from __future__ import annotations

from collections import deque

from kernbench.components.pe.commands import VIRTUAL_CHANNELS, DmaReadCmd, DmaWriteCmd
from kernbench.components.requester import Requester
from kernbench.sim.fabric import Transfer
from kernbench.sim.protocol import Engine
from kernbench.topology import block_params
from kernbench.topology import naming as nm
from kernbench.topology.address import decode


class PeDma(Requester):
    """The PE's DMA engine: kernel commands on read/write channels and virtual channels, and the data-path
    role of the probe's direct DMA messages (same-cube targets travel the cube mesh only; other cubes cross
    UCIe; other SIPs go out through the IO chiplet, PCIe and the tray switch)."""

    PARAMS = block_params.PE_DMA  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("busy", "busy_ns", "capacity", "count", "queues", "tcm_id")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        per_direction = {"read": node.attrs["read_channels"], "write": node.attrs["write_channels"]}
        keys = [(d, vc) for d in per_direction for vc in VIRTUAL_CHANNELS]
        self.queues: dict[tuple[str, str], deque] = {k: deque() for k in keys}
        self.capacity = {k: per_direction[k[0]] for k in keys}
        self.busy = dict.fromkeys(keys, 0)  # commands in flight per (direction, virtual channel)
        self.tcm_id = nm.sibling(self.id, "pe_tcm")
        self.busy_ns = 0.0
        self.count = 0

    def on_control(self, cmd: object, t: float, transfer) -> None:
        """Queue a DMA command on its channel."""
        if not isinstance(cmd, (DmaReadCmd, DmaWriteCmd)):
            super().on_control(cmd, t, transfer)
        self.enqueue(cmd, transfer.request)

    def enqueue(self, cmd: DmaReadCmd | DmaWriteCmd, request) -> None:
        """Queue a command on its channel now (used by the scheduler's composite pipeline)."""
        channel = ("read" if isinstance(cmd, DmaReadCmd) else "write", cmd.vc)
        self.queues[channel].append((cmd, request))
        if self.busy[channel] < self.capacity[channel]:
            self._next(channel)

    def _next(self, channel: tuple[str, str]) -> None:
        queue = self.queues[channel]
        if not queue:
            return
        self.busy[channel] += 1
        cmd, request = queue.popleft()
        eng = self.engine
        # The DMA's own overhead is paid where its routes pass through it as a relay (after the TCM on a
        # write, on the way back to the TCM on a read), so it is not added again here.
        t0 = eng.now + cmd.translate_ns
        if channel[0] == "read":
            src = decode(cmd.src)
            target = eng.resolver.resolve(src, cmd.span(cmd.src_pitch))
            path = eng.router.pe_dma_path(self.id, target)
            route = eng.route(path)
            tr = eng.send(request, route, eng.control_bytes, kind="read_cmd", addr=src.offset, t_start=t0,
                          on_done=_ignore, read_nbytes=cmd.nbytes)
            tr.reply_nodes = (*reversed(path), self.tcm_id)
            tr.row_bytes, tr.pitch = cmd.row_bytes, cmd.src_pitch
            tr.on_reply = lambda data_tr, t_done: eng.at(t_done, self._done, (channel, cmd, t0))
        else:
            dst = decode(cmd.dst)
            target = eng.resolver.resolve(dst, cmd.span(cmd.dst_pitch))
            path = (self.tcm_id, *eng.router.pe_dma_path(self.id, target))
            tr = eng.send(request, eng.route(path), cmd.nbytes, kind="write", addr=dst.offset, t_start=t0,
                          on_done=lambda tr, t_done: eng.at(t_done, self._done, (channel, cmd, t0)))
            tr.row_bytes, tr.pitch = cmd.row_bytes, cmd.dst_pitch

    def _done(self, item: tuple) -> None:
        channel, cmd, t0 = item
        eng = self.engine
        now = eng.now
        self.busy_ns += now - t0
        self.count += 1
        name = "dma_read" if channel[0] == "read" else "dma_write"
        eng.oplog.record(t0, now, self.id, "memory", name,
                         {"src": cmd.src, "dst": cmd.dst, "nbytes": cmd.nbytes, "vc": channel[1]})
        if eng.memory is not None and cmd.copy_data:
            cmd.copy(eng.memory)
        cmd.done.succeed(None)
        self.busy[channel] -= 1
        self._next(channel)


def _ignore(tr: Transfer, t: float) -> None:
    """A read command's own landing needs no action: the reply carries the result."""

