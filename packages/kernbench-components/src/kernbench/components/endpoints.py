"""Components that start requests and receive read data: host CPU, PE DMA, M_CPU.

As a source each applies its ``overhead_ns`` once before the first packet
leaves (descriptor setup). As the requester of a read it completes when the
last flit of the returned data has arrived.
"""

from __future__ import annotations

from kernbench.components.launch import HostLaunch, IoCpuLaunch
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


class HostCpu(HostLaunch, Requester):
    """The host CPU on the tray: issues H2D writes, D2H reads and kernel launches over PCIe."""

    __slots__ = ()


class PeDma(Requester):
    """A PE's DMA engine in its data-path role: reads and writes any physical address.

    Same-cube targets travel the cube mesh only; other cubes cross UCIe;
    other SIPs go out through the IO chiplet, PCIe and the tray switch.
    """

    __slots__ = ()


class IoCpu(IoCpuLaunch, Component):
    """The IO chiplet's control CPU: fans launches out to M_CPUs, aggregates their reports."""

    __slots__ = ("pending",)

    def __init__(self, engine, node) -> None:
        super().__init__(engine, node)
        self.pending: dict[int, list] = {}
