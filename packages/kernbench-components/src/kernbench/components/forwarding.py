"""Relay components: apply the node's overhead, then hand the packet to the next wire.

Routers, IO NoC, UCIe PHYs and the tray switch are all forwarding nodes; each
instance carries its own ``overhead_ns`` from the topology, so roles differ
in timing while sharing one implementation. The engine applies the overhead
arithmetically when a packet's head passes (see :mod:`kernbench.sim.fabric`).
"""

from __future__ import annotations

from kernbench.sim.component import Component


class Forwarding(Component):
    """A relay node: overhead, then forward. Never a terminal."""

    __slots__ = ()


class PcieEndpoint(Forwarding):
    """A SIP's PCIe endpoint: the host/device protocol boundary, bidirectional.

    Host-to-device traffic (writes, read commands, launches) and
    device-to-host or SIP-to-SIP traffic (read data, cross-SIP DMA) both pass
    through it, paying its protocol overhead; there is no TLP-level queueing.
    """

    __slots__ = ()
