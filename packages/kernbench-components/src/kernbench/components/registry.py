"""The built-in component implementations by name, and their message kinds: the composition root.

Installed distributions add implementations through the entry-point group
``kernbench.components`` (``name = "package.module:Class"``); a topology then
binds a node type to that name in its ``components:`` section. A plugin that
fails to load, or that reuses a built-in name, is reported (a
:class:`PluginWarning` naming it and the reason) and skipped.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from importlib import metadata

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


#: The node types each built-in implementation may be bound to (checked by ``ComponentRegistry.check``).
SERVES = {
    "forwarding": ("switch", "io_noc", "io_ucie", "ucie_phy", "router"),
    "host": ("host_cpu",),
    **{name: (name,) for name, _ in BUILTIN if name not in ("forwarding", "host")},
}


#: Message kinds the built-in components add to the fabric's own transfers.
MESSAGES = (LAUNCH_KIND, MMU_MAP_KIND)


ENTRY_POINT_GROUP = "kernbench.components"


class PluginWarning(UserWarning):
    """An installed component plugin was skipped (it failed to load or reuses a built-in name)."""


@lru_cache(maxsize=1)
def plugin_components() -> tuple[tuple[tuple[str, object], ...], tuple[str, ...]]:
    """The installed component plugins ``(name, factory)`` and the problems of those skipped (loaded once)."""
    builtin = {name for name, _ in BUILTIN}
    found, problems = [], []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        if ep.name in builtin or any(ep.name == n for n, _ in found):
            problems.append(f"component plugin {ep.name!r} ({ep.value}) was skipped: the name is already taken")
            continue
        try:
            found.append((ep.name, ep.load()))
        except Exception as exc:  # a broken plugin must not break every simulation
            problems.append(f"component plugin {ep.name!r} ({ep.value}) was skipped: {type(exc).__name__}: {exc}")
    return tuple(found), tuple(problems)


def default_registry(plugins: bool = True) -> ComponentRegistry:
    """A fresh registry holding every built-in implementation and message kind, plus (with ``plugins``) every
    installed component plugin."""
    registry = ComponentRegistry(BUILTIN, MESSAGES, SERVES)
    if plugins:
        found, problems = plugin_components()
        for name, factory in found:
            registry.register(name, factory)
        for problem in problems:
            warnings.warn(problem, PluginWarning, stacklevel=2)
    return registry
