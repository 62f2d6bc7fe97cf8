"""PE_TCM: the PE's tightly coupled memory, with independent read and write channels.

Same-direction accesses serialise on their channel; a read and a write
overlap. The TCM is also a fabric terminal: DMA read data and other PEs'
writes drain through its write channel as their flits arrive, and remote
reads are served from its read channel. What lives where in it is the
:class:`~kernbench.topology.tcm_layout.TcmLayout` (staging, heap, scratch).
Times are ns, bandwidths GB/s (bytes/ns).
"""

from __future__ import annotations

from kernbench.sim.component import Component
from kernbench.sim.fabric import Packet
from kernbench.sim.protocol import Engine
from kernbench.topology import block_params


class PeTcm(Component):
    """The PE's tightly coupled memory: independent read and write channels.

    Same-direction accesses serialise; a read and a write overlap. As a
    fabric terminal it absorbs DMA read data and remote writes (write
    channel) and serves remote reads (read channel).
    """

    PARAMS = block_params.PE_TCM  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("read_bw", "read_free", "write_bw", "write_free")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.read_bw, self.write_bw = node.attrs["read_bw_gbs"], node.attrs["write_bw_gbs"]
        self.read_free = self.write_free = 0.0

    def read(self, t_ready: float, nbytes: int) -> tuple[float, float]:
        """Reserve the read channel for ``nbytes``; returns (start, end) ns."""
        start = max(t_ready, self.read_free)
        self.read_free = end = start + nbytes / self.read_bw
        return start, end

    def write(self, t_ready: float, nbytes: int) -> tuple[float, float]:
        """Reserve the write channel for ``nbytes``; returns (start, end) ns."""
        start = max(t_ready, self.write_free)
        self.write_free = end = start + nbytes / self.write_bw
        return start, end

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Data landing in the TCM (a DMA read's reply, or another PE's DMA write) drains through the write
        channel as the flits arrive; a read command is served from the read channel and replied to."""
        tr = pkt.transfer
        if tr.kind == "read_cmd":
            self._serve_read(tr, t_head)
            return
        if tr.kind not in ("read_data", "write"):
            super().on_packet(pkt, t_head)
        start = max(t_head, self.write_free)
        end = max(pkt.t_tail, start + pkt.nbytes / self.write_bw)
        self.write_free = end
        self.engine.landed(pkt, end)

    def _serve_read(self, cmd, t_head: float) -> None:
        eng = self.engine
        nbytes = cmd.read_nbytes
        start = max(t_head, self.read_free)
        self.read_free = start + nbytes / self.read_bw
        flit_ns = eng.flit_bytes / self.read_bw
        # a packet's first flit is ready once its bytes have been read; later flits follow one flit time apart
        ready = [(start + min(off + eng.flit_bytes, nbytes) / self.read_bw, flit_ns)
                 for off in range(0, nbytes, eng.packet_bytes)]
        eng.read_reply(cmd, ready)
