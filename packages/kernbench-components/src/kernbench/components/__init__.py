"""kernbench.components — the modeled hardware blocks and their default registry.

The names below are re-exported lazily (on first access), so importing one
block module (``kernbench.components.pe.commands``, as the kernel language
does) does not load the whole package and its composition root.
"""

from __future__ import annotations

import importlib
from importlib import metadata as _metadata

_EXPORTS = {
    "BUILTIN": "kernbench.components.registry",
    "default_registry": "kernbench.components.registry",
    "register_block": "kernbench.components.registry",
    "Forwarding": "kernbench.components.forwarding",
    "PcieEndpoint": "kernbench.components.forwarding",
    "HbmCtrl": "kernbench.components.memory",
    "LinkBoundMemory": "kernbench.components.memory",
    "MCpu": "kernbench.components.m_cpu",
    "Sram": "kernbench.components.memory",
    "HostCpu": "kernbench.components.host",
    "IoCpu": "kernbench.components.io_cpu",
    "PeDma": "kernbench.components.pe.dma",
    "Requester": "kernbench.components.requester",
    "KernelError": "kernbench.components.launch",
    "KernelLaunchMsg": "kernbench.components.launch",
    "MmuMapMsg": "kernbench.components.pe.mmu",
    "LaunchResult": "kernbench.components.launch",
}

__all__ = sorted(_EXPORTS)

__version__ = _metadata.version("kernbench-components")


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernbench.components' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
