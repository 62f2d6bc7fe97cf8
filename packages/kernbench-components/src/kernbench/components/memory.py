"""Terminal memories: HBM controller (pseudo-channels) and SRAM (the M_CPU's memory is in ``m_cpu.py``).

Each shifts an arriving packet's flits by its ``overhead_ns`` (access
latency) and then serves them:

* :class:`HbmCtrl` owns the pseudo-channels of one PE's slice. Consecutive
  ``burst_bytes`` of an address range map to consecutive channels (channel =
  burst index mod channels), and every channel drains its bursts one after
  another at ``channel_bw_gbs``: a flit-paced drain loop per channel, kept as
  one "free at" time per channel. A hot channel therefore queues while its
  neighbours idle. A 2-D (strided) transfer's rows land at their real
  addresses, so a narrow block of a wide matrix can hit few channels.
* :class:`Sram` (and the M_CPU) are bounded by the link that feeds them:
  a write is done when its last flit has arrived, a read streams its data
  back at link speed.

Reads reply on the reversed request path.
"""

from __future__ import annotations

from kernbench.sim.component import Component
from kernbench.sim.fabric import Packet, Transfer
from kernbench.sim.protocol import Engine


class HbmCtrl(Component):
    """HBM controller of one PE's slice with per-pseudo-channel parallelism."""

    __slots__ = ("burst", "channels", "free", "ns_per_byte")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        a = node.attrs
        self.channels = int(a["channels"])
        self.burst = int(a["burst_bytes"])
        self.ns_per_byte = 1.0 / float(a["channel_bw_gbs"])
        self.free = [0.0] * self.channels

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Drain a written packet, or serve a read command."""
        kind = pkt.transfer.kind
        if kind == "write":
            self._write(pkt, t_head)
        elif kind == "read_cmd":
            self._read(pkt.transfer, t_head)
        else:
            super().on_packet(pkt, t_head)

    def _write(self, pkt: Packet, t_head: float) -> None:
        tr = pkt.transfer
        a0 = t_head + self.overhead_ns
        flit = self.engine.flit_bytes
        last_flit = pkt.nflits - 1
        t_last = pkt.t_tail + self.overhead_ns
        free, burst, k, npb, delta = self.free, self.burst, self.channels, self.ns_per_byte, pkt.delta
        done = a0
        # NOTE: contiguous transfers (the common case) skip the segment generator: this runs per packet.
        pieces = ((tr.addr + pkt.offset, pkt.offset, pkt.nbytes),) if not tr.row_bytes else \
            _segments(tr.addr, pkt.offset, pkt.nbytes, tr.row_bytes, tr.pitch)
        for addr, off, n in pieces:
            x, end = addr, addr + n
            while x < end:
                y = min((x // burst + 1) * burst, end)
                f = (off + (y - 1 - addr) - pkt.offset) // flit
                arrive = t_last if f >= last_flit else a0 + f * delta
                ch = (x // burst) % k
                start = free[ch] if free[ch] > arrive else arrive
                free[ch] = finish = start + (y - x) * npb
                if finish > done:
                    done = finish
                x = y
        self.engine.landed(pkt, done)
        if tr.landed == len(tr.packets):
            self.engine.oplog.record(tr.t_first, tr.t_done, self.id, "memory", "hbm_write",
                                     {"addr": tr.addr, "nbytes": tr.nbytes, "corr_id": tr.request.corr_id})

    def _read(self, cmd: Transfer, t_head: float) -> None:
        a0 = t_head + self.overhead_ns
        flit = self.engine.flit_bytes
        free, burst, k, npb = self.free, self.burst, self.channels, self.ns_per_byte
        nbytes = cmd.read_nbytes
        nflits = -(-nbytes // flit)
        flit_ready = [a0] * nflits
        for addr, off, n in _segments(cmd.addr, 0, nbytes, cmd.row_bytes, cmd.pitch):
            x, end = addr, addr + n
            while x < end:
                y = min((x // burst + 1) * burst, end)
                ch = (x // burst) % k
                start = free[ch] if free[ch] > a0 else a0
                free[ch] = finish = start + (y - x) * npb
                for f in range((off + x - addr) // flit, (off + y - 1 - addr) // flit + 1):
                    if finish > flit_ready[f]:
                        flit_ready[f] = finish
                x = y
        per_packet = self.engine.packet_bytes // flit
        ready = []
        last = a0
        for p0 in range(0, nflits, per_packet):
            p1 = min(p0 + per_packet, nflits) - 1
            r0 = flit_ready[p0]
            r1 = r0
            for f in range(p0 + 1, p1 + 1):
                if flit_ready[f] > r1:
                    r1 = flit_ready[f]
            if r1 > last:
                last = r1
            ready.append((r0, (r1 - r0) / (p1 - p0) if p1 > p0 else 0.0))
        self.engine.read_reply(cmd, ready)
        self.engine.oplog.record(t_head, last, self.id, "memory", "hbm_read",
                                 {"addr": cmd.addr, "nbytes": nbytes, "corr_id": cmd.request.corr_id})


def _segments(base: int, offset: int, nbytes: int, row_bytes: int, pitch: int):
    """Address-contiguous pieces ``(addr, payload_offset, n)`` of payload bytes ``[offset, offset + nbytes)``.

    A 2-D (strided) transfer lays its payload out in rows of ``row_bytes``
    that start ``pitch`` bytes apart; a contiguous one (``row_bytes == 0``)
    is a single piece.
    """
    if not row_bytes:
        yield base + offset, offset, nbytes
        return
    o, end = offset, offset + nbytes
    while o < end:
        row, col = divmod(o, row_bytes)
        n = min(row_bytes - col, end - o)
        yield base + row * pitch + col, o, n
        o += n


class LinkBoundMemory(Component):
    """A memory whose speed is the link feeding it: writes finish with their last flit."""

    __slots__ = ()

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Absorb a written packet or answer a read command after the access overhead."""
        tr = pkt.transfer
        if tr.kind == "write":
            self.engine.landed(pkt, pkt.t_tail + self.overhead_ns)
            if tr.landed == len(tr.packets):
                self.engine.oplog.record(tr.t_first, tr.t_done, self.id, "memory", f"{self.node.type}_write",
                                         {"addr": tr.addr, "nbytes": tr.nbytes, "corr_id": tr.request.corr_id})
        elif tr.kind == "read_cmd":
            t_ready = t_head + self.overhead_ns
            n_packets = -(-tr.read_nbytes // self.engine.packet_bytes)
            self.engine.read_reply(tr, [(t_ready, 0.0)] * n_packets)
            self.engine.oplog.record(t_head, t_ready, self.id, "memory", f"{self.node.type}_read",
                                     {"addr": tr.addr, "nbytes": tr.read_nbytes, "corr_id": tr.request.corr_id})
        else:
            super().on_packet(pkt, t_head)


class Sram(LinkBoundMemory):
    """The cube's shared SRAM: access overhead, then link-bandwidth drain."""

    __slots__ = ()
