"""kernbench.components — the modeled hardware blocks and their default registry."""

from kernbench.components.endpoints import HostCpu, IoCpu, PeDma, Requester
from kernbench.components.forwarding import Forwarding, PcieEndpoint
from kernbench.components.launch import KernelError, LaunchResult
from kernbench.components.memory import HbmCtrl, LinkBoundMemory, MCpu, Sram
from kernbench.components.registry import BUILTIN, default_registry

__all__ = [
    "BUILTIN", "Forwarding", "HbmCtrl", "HostCpu", "IoCpu", "KernelError", "LaunchResult", "LinkBoundMemory",
    "MCpu", "PcieEndpoint", "PeDma", "Requester", "Sram", "default_registry",
]
