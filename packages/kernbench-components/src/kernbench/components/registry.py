"""The built-in component implementations, by name."""

from __future__ import annotations

from kernbench.components.endpoints import HostCpu, PeDma
from kernbench.components.forwarding import Forwarding, PcieEndpoint
from kernbench.components.memory import HbmCtrl, MCpu, Sram
from kernbench.sim.component import ComponentRegistry

BUILTIN = (
    ("forwarding", Forwarding),
    ("pcie_ep", PcieEndpoint),
    ("host", HostCpu),
    ("pe_dma", PeDma),
    ("hbm_ctrl", HbmCtrl),
    ("sram", Sram),
    ("m_cpu", MCpu),
)


def default_registry() -> ComponentRegistry:
    """A fresh registry holding every built-in implementation."""
    return ComponentRegistry(BUILTIN)
