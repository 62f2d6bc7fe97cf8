"""The built-in component implementations by name, and their message kinds: the composition root."""

from __future__ import annotations

from kernbench.components.forwarding import Forwarding, PcieEndpoint
from kernbench.components.host import HostCpu
from kernbench.components.io_cpu import IoCpu
from kernbench.components.launch import LAUNCH_KIND
from kernbench.components.m_cpu import MCpu
from kernbench.components.memory import HbmCtrl, Sram
from kernbench.components.pe.cpu import PeCpu
from kernbench.components.pe.dma import PeDma
from kernbench.components.pe.engines import PeFetchStore, PeGemm, PeMath
from kernbench.components.pe.ipcq import PeIpcq
from kernbench.components.pe.mmu import MMU_MAP_KIND, PeMmu
from kernbench.components.pe.scheduler import PeScheduler
from kernbench.components.pe.tcm import PeTcm
from kernbench.sim.component import ComponentRegistry
from kernbench.tl.context import TLContext

BUILTIN = (
    ("forwarding", Forwarding),
    ("pcie_ep", PcieEndpoint),
    ("host", HostCpu),
    ("io_cpu", IoCpu),
    ("hbm_ctrl", HbmCtrl),
    ("sram", Sram),
    ("m_cpu", MCpu),
    ("pe_cpu", PeCpu.with_language(TLContext.for_pe)),
    ("pe_scheduler", PeScheduler),
    ("pe_dma", PeDma),
    ("pe_tcm", PeTcm),
    ("pe_fetch_store", PeFetchStore),
    ("pe_gemm", PeGemm),
    ("pe_math", PeMath),
    ("pe_mmu", PeMmu),
    ("pe_ipcq", PeIpcq),
)


#: Message kinds the built-in components add to the fabric's own transfers.
MESSAGES = (LAUNCH_KIND, MMU_MAP_KIND)


def default_registry() -> ComponentRegistry:
    """A fresh registry holding every built-in implementation and message kind."""
    return ComponentRegistry(BUILTIN, MESSAGES)
