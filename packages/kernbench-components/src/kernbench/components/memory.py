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

A read is served per burst in both fidelities: :meth:`HbmCtrl._read` tracks
each packet's first and last ready time per burst, which gives exactly what
the model's per-flit statement gives (:meth:`HbmCtrl._read_per_flit`, one
ready time per flit, kept as the statement the tests hold the per-burst
version to, bit for bit). In flow fidelity (``engine.fidelity == "flow"``,
ADR 0039) a contiguous write's full bursts are also served per channel in
closed form (:func:`interleaved_write`, equal up to float rounding); packet
fidelity serves writes burst by burst (in C when the engine runs on
kernbench-accel's calendar: the same steps, ADR 0046).
"""

from __future__ import annotations

from kernbench.sim.accel import compiled_module
from kernbench.sim.component import Component
from kernbench.sim.fabric import Packet, Transfer
from kernbench.sim.protocol import Engine

#: A read's flit counts as early only if it would leave more than this before its data is ready (ns): less is
#: float rounding, so a linear ready list keeps its linear pacing bit for bit.
LATE_NS = 1e-6


class HbmCtrl(Component):
    """HBM controller of one PE's slice with per-pseudo-channel parallelism."""

    __slots__ = ("burst", "channels", "flit_ns", "flow", "free", "ns_per_byte", "serve_read", "serve_write")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        a = node.attrs
        self.channels = int(a["channels"])
        self.burst = int(a["burst_bytes"])
        self.ns_per_byte = 1.0 / float(a["channel_bw_gbs"])
        self.free = [0.0] * self.channels
        # the time a flit takes on the link a read's reply leaves by (the fastest, if there are several): no
        # reply can send its flits closer together than that
        edges = engine.graph.out_edges(node.id)
        self.flit_ns = min((engine.flit_bytes / e.bw_gbs for e in edges), default=0.0)
        self.flow = getattr(engine, "fidelity", "packet") == "flow"  # serve in closed form (module docstring)
        # _write's per-burst loop in C when the engine runs on kernbench-accel's calendar (the same steps, ADR 0046)
        compiled = compiled_module(engine)
        self.serve_write = compiled.serve_write if compiled is not None else None
        self.serve_read = compiled.serve_read if compiled is not None else None

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Drain a written packet, or serve a read command."""
        kind = pkt.transfer.kind
        if kind == "write":
            if self.flow and not pkt.transfer.row_bytes:
                self._write_flow(pkt, t_head)
            else:
                self._write(pkt, t_head)
        elif kind == "read_cmd":
            self._read(pkt.transfer, t_head)
        else:
            super().on_packet(pkt, t_head)

    def _write_flow(self, pkt: Packet, t_head: float) -> None:
        """:meth:`_write` of a contiguous piece in flow fidelity: :func:`interleaved_write` serves it."""
        tr = pkt.transfer
        ov = self.overhead_ns
        done = interleaved_write(self.free, tr.addr + pkt.offset, pkt.nbytes, pkt.nflits, t_head + ov, pkt.delta,
                                 pkt.t_tail + ov, self.engine.flit_bytes, self.burst, self.ns_per_byte)
        self.engine.landed(pkt, done)
        if tr.landed == len(tr.packets):
            self.engine.oplog.record(tr.t_first, tr.t_done, self.id, "memory", "hbm_write",
                                     {"addr": tr.addr, "nbytes": tr.nbytes, "corr_id": tr.request.corr_id})

    def _read(self, cmd: Transfer, t_head: float) -> None:
        """Serve a read command: the same channel service and the same ``ready`` list as
        :meth:`_read_per_flit`, bit for bit, with work per burst instead of per flit.

        :meth:`_read_per_flit` keeps one ready time per flit and then takes, per packet, its first flit's and the
        latest of its flits' (a max is exact in any order), checks that no flit leaves before it is ready and
        else re-paces the packet by a min over its flits (seeded with the old spacing). Here each burst's finish
        goes straight into the two per-packet figures, and a packet keeps ``(finish, first flit)`` (the index in
        the packet) of its bursts that end after its first flit is ready: a flit's ready time is the max of its
        bursts' finishes and float ``+ * / -`` are monotone, so the check and the min bind at a burst's first
        flit (the earliest to leave), and a burst ready by the packet's first flit binds neither (its quotient
        is at least the old spacing). The work is per burst, not per flit. On the compiled calendar the same
        steps run in C (kernbench-accel's ``serve_read``), unless the command is outside what it takes.
        """
        a0 = t_head + self.overhead_ns
        flit = self.engine.flit_bytes
        free, burst, k, npb = self.free, self.burst, self.channels, self.ns_per_byte
        nbytes = cmd.read_nbytes
        per_packet = self.engine.packet_bytes // flit
        serve = self.serve_read
        if serve is not None:
            try:
                ready, last = serve(free, cmd.addr, nbytes, cmd.row_bytes or 0, cmd.pitch or 0, burst, npb, a0, flit,
                                    per_packet, self.flit_ns, LATE_NS)
            except OverflowError:  # outside what the compiled service takes: refused before anything changed
                pass
            else:
                self.engine.read_reply(cmd, ready)
                self.engine.oplog.record(t_head, last, self.id, "memory", "hbm_read",
                                         {"addr": cmd.addr, "nbytes": nbytes, "corr_id": cmd.request.corr_id})
                return
        nflits = -(-nbytes // flit)
        npk = -(-nflits // per_packet)
        first = [a0] * npk  # ready time of each packet's first flit
        worst = [a0] * npk  # latest ready time of each packet's flits
        held = [[] for _ in range(npk)]  # each packet's bursts ready after its first flit: (finish, first flit)
        phi = self.flit_ns
        row_bytes, pitch = cmd.row_bytes, cmd.pitch
        if not row_bytes:  # one contiguous segment
            row_bytes, pitch = nbytes, 0
        base = cmd.addr
        for off in range(0, nbytes, row_bytes):  # the rows of a 2-D read (as _segments cuts them), in order
            x = base + (off // row_bytes) * pitch
            end = x + min(row_bytes, nbytes - off)
            o = off - x  # payload offset = address + o
            while x < end:
                b = x // burst
                y = (b + 1) * burst
                if y > end:
                    y = end
                ch = b % k
                start = free[ch] if free[ch] > a0 else a0
                free[ch] = finish = start + (y - x) * npb
                f0 = (x + o) // flit
                f1 = (y - 1 + o) // flit
                p = f0 // per_packet
                if p == f1 // per_packet:  # the common case: the burst lies in one packet
                    if finish > worst[p]:
                        worst[p] = finish
                    if f0 == p * per_packet:
                        if finish > first[p]:
                            first[p] = finish
                    elif finish > first[p]:  # (one ready by the first flit binds neither the check nor the min)
                        held[p].append((finish, f0 - p * per_packet))
                else:  # the packets from p + 1 on start in this burst: it holds their first flits
                    for q in range(p, f1 // per_packet + 1):
                        if finish > worst[q]:
                            worst[q] = finish
                        if f0 <= q * per_packet:
                            if finish > first[q]:
                                first[q] = finish
                        elif finish > first[q]:
                            held[q].append((finish, f0 - q * per_packet))
                x = y
        ready = []
        last = a0
        for p in range(npk):
            r0, r1 = first[p], worst[p]
            n1 = min(per_packet, nflits - p * per_packet) - 1
            if r1 > last:
                last = r1
            d = (r1 - r0) / n1 if n1 > 0 else 0.0
            if r1 > r0:  # as in _read; NOTE: loops, not generators (a hot path)
                bursts = held[p]
                t = r0 + LATE_NS
                for fin, g in bursts:
                    if fin > t + g * d and g < n1:  # a flit would leave before its data: re-pace
                        for fin_, g_ in bursts:
                            if g_ < n1:
                                v = (r1 - fin_) / (n1 - g_)
                                if v < d:
                                    d = v
                        if d >= phi:
                            r0 = r1 - n1 * d
                        else:  # every flit as soon as its data and the link allow
                            d = phi
                            for fin_, g_ in bursts:
                                v = fin_ - g_ * phi
                                if v > r0:
                                    r0 = v
                        break
            ready.append((r0, d))
        self.engine.read_reply(cmd, ready)
        self.engine.oplog.record(t_head, last, self.id, "memory", "hbm_read",
                                 {"addr": cmd.addr, "nbytes": nbytes, "corr_id": cmd.request.corr_id})

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
        serve = self.serve_write
        for addr, off, n in pieces:
            if serve is not None:
                try:
                    done = serve(free, addr, off, n, pkt.offset, burst, npb, a0, delta, t_last, flit, last_flit, done)
                    continue
                except OverflowError:  # an address past 62 bits: refused before anything changed, served below
                    pass
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

    def _read_per_flit(self, cmd: Transfer, t_head: float) -> None:
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
            n1 = p1 - p0
            d = (r1 - r0) / n1 if n1 else 0.0
            # The linear pacing (first flit, then evenly to the latest) is kept, bit for bit, unless a flit would
            # leave over LATE_NS before its data; then the tail stays at r1 with the largest spacing that has every
            # flit leave after its data (seeded with the linear d, which _read relies on), or, when that
            # spacing is below the reply link's flit time, every flit leaves as soon as its data and the link allow.
            t = r0 + LATE_NS
            if r1 > r0 and any(flit_ready[p0 + j] > t + j * d for j in range(1, n1)):
                d = min(d, min((r1 - flit_ready[p0 + j]) / (n1 - j) for j in range(n1)))
                if d >= self.flit_ns:
                    r0 = r1 - n1 * d
                else:  # the tail cannot stay at r1: each flit leaves when its data and the link allow
                    d = phi = self.flit_ns
                    r0 = max(flit_ready[p0 + j] - j * phi for j in range(n1 + 1))
            ready.append((r0, d))
        self.engine.read_reply(cmd, ready)
        self.engine.oplog.record(t_head, last, self.id, "memory", "hbm_read",
                                 {"addr": cmd.addr, "nbytes": nbytes, "corr_id": cmd.request.corr_id})


def interleaved_write(free: list[float], addr: int, nbytes: int, nflits: int, a0: float, delta: float,
                      t_last: float, flit: int, burst: int, ns_per_byte: float) -> float:
    """Serve a contiguous write of ``nbytes`` at ``addr`` on interleaved channels; returns when it is done (ns).

    The model is :meth:`HbmCtrl._write`'s: burst ``b`` (``burst`` bytes of the address space) goes to channel
    ``b % len(free)``; it arrives with the flit holding its last byte (flit ``f`` of ``nflits`` at
    ``a0 + f * delta`` ns, the last flit at ``t_last``) and is served after whatever that channel holds, at
    ``ns_per_byte``; ``free[ch]`` (ns, updated in place) is when channel ``ch`` is next idle. Done is the
    latest finish, at least ``a0``.

    The full bursts in the middle are served per channel in closed form. On one channel they arrive
    ``q = channels * burst / flit`` flits apart, at ``a_1 .. a_m``, and each takes ``s`` ns, so the recurrence
    ``free = max(free, a_j) + s`` ends at ``max(free + m*s, a_1 + m*s, a_m + s)``: ``a_j + (m - j + 1) * s`` is
    linear in ``j``, so its largest value is at an end. The partial first burst and the bursts holding the
    last flit are served one by one, as the loop serves them. Equal to the per-burst loop up to float rounding
    (the loop adds ``s`` ``m`` times, this multiplies); the loop itself serves any burst size, and small writes.
    """
    if nbytes <= 0:
        return a0
    k = len(free)
    end = addr + nbytes
    last_flit = nflits - 1
    done = a0
    b_first, b_last = addr // burst, (end - 1) // burst
    b_lo = b_first if addr == b_first * burst else b_first + 1  # the first full burst
    # full bursts end by `end`, and a middle one ends before the last flit: (b + 1) * burst <= addr + last_flit * flit
    b_hi = min(end // burst, (addr + last_flit * flit) // burst)  # one past the last middle burst
    if burst % flit or b_hi - b_lo < 2 * k:  # nothing to gain: serve every burst one by one
        b_lo = b_hi = b_last + 1
    for b in range(b_first, b_lo):  # the partial first burst (or every burst)
        done = _serve_burst(free, b, addr, end, last_flit, a0, delta, t_last, flit, burst, ns_per_byte, done)
    if b_hi > b_lo:
        s = burst * ns_per_byte
        q = k * (burst // flit)
        for b in range(b_lo, min(b_lo + k, b_hi)):
            ch = b % k
            m = (b_hi - 1 - b) // k + 1  # bursts of this channel in the middle
            f = ((b + 1) * burst - 1 - addr) // flit  # the flit holding its first middle burst's last byte
            a_1 = a0 + f * delta
            a_m = a0 + (f + (m - 1) * q) * delta
            fin = free[ch] + m * s
            if a_1 + m * s > fin:
                fin = a_1 + m * s
            if a_m + s > fin:
                fin = a_m + s
            free[ch] = fin
            if fin > done:
                done = fin
    for b in range(max(b_hi, b_lo), b_last + 1):  # the bursts holding the last flit
        done = _serve_burst(free, b, addr, end, last_flit, a0, delta, t_last, flit, burst, ns_per_byte, done)
    return done


def _serve_burst(free: list[float], b: int, addr: int, end: int, last_flit: int, a0: float, delta: float,
                 t_last: float, flit: int, burst: int, ns_per_byte: float, done: float) -> float:
    """One burst of :func:`interleaved_write`, exactly as :meth:`HbmCtrl._write` serves it; returns the new done."""
    x = b * burst if b * burst > addr else addr
    y = (b + 1) * burst if (b + 1) * burst < end else end
    f = (y - 1 - addr) // flit
    arrive = t_last if f >= last_flit else a0 + f * delta
    ch = b % len(free)
    start = free[ch] if free[ch] > arrive else arrive
    free[ch] = finish = start + (y - x) * ns_per_byte
    return finish if finish > done else done


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
