"""The base of components that start requests and receive read data (the host CPU, a PE's DMA).

As a source a requester applies its ``overhead_ns`` once before the first
packet leaves (descriptor setup; the engine does this). As the requester of a
read it completes when the last flit of the returned data has arrived.
"""

from __future__ import annotations

from kernbench.sim.component import Component
from kernbench.sim.fabric import Packet


class Requester(Component):
    """Base of components that issue DMA/memory requests and absorb read data."""

    __slots__ = ()

    def on_packet(self, pkt: Packet, t_head: float) -> None:
        """Read data lands when its last flit arrives."""
        if pkt.transfer.kind != "read_data":
            super().on_packet(pkt, t_head)
        self.engine.landed(pkt, pkt.t_tail)
