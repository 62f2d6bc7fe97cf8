"""The built-in component implementations, by name."""

from __future__ import annotations

from kernbench.components.endpoints import HostCpu, IoCpu
from kernbench.components.forwarding import Forwarding, PcieEndpoint
from kernbench.components.memory import HbmCtrl, MCpu, Sram
from kernbench.components.pe.cpu import PeCpu
from kernbench.components.pe.dma import KernelDma
from kernbench.components.pe.engines import PeFetchStore, PeGemm, PeMath, PeScheduler, PeTcm
from kernbench.components.pe.ipcq import PeIpcq
from kernbench.components.pe.mmu import PeMmu
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
    ("pe_dma", KernelDma),
    ("pe_tcm", PeTcm),
    ("pe_fetch_store", PeFetchStore),
    ("pe_gemm", PeGemm),
    ("pe_math", PeMath),
    ("pe_mmu", PeMmu),
    ("pe_ipcq", PeIpcq),
)


def default_registry() -> ComponentRegistry:
    """A fresh registry holding every built-in implementation."""
    return ComponentRegistry(BUILTIN)
