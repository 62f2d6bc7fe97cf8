"""The built-in component implementations by name, and their message kinds: the composition root.

Installed distributions add implementations through the entry-point group
``kernbench.components`` (``name = "package.module:Class"``); a topology then
binds a node type to that name in its ``components:`` section. A plugin that
fails to load, that reuses a built-in name or whose ``PARAMS`` are not valid
block parameter declarations is reported (a :class:`PluginWarning` naming it
and the reason) and skipped.

A PE block implementation declares the parameters its node carries as a
class attribute ``PARAMS`` (a tuple of
:class:`~kernbench.topology.block_params.BlockParam`); a loaded plugin's
declarations are registered with the topology compiler, which fills and
checks them (``pe.blocks.<block>.<name>`` in the YAML). :func:`register_block`
does the same for an implementation added by code (tests, embedding).
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
from kernbench.sim.component import ComponentFactory, ComponentRegistry
from kernbench.tl.context import TLContext
from kernbench.topology import block_params

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


ENTRY_POINT_GROUP = block_params.ENTRY_POINT_GROUP  # "kernbench.components"


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
            factory = ep.load()
            declare_params(ep.name, factory)
            found.append((ep.name, factory))
        except Exception as exc:  # a broken plugin must not break every simulation
            problems.append(f"component plugin {ep.name!r} ({ep.value}) was skipped: {type(exc).__name__}: {exc}")
    return tuple(found), tuple(problems)


def declare_params(name: str, factory: ComponentFactory) -> None:
    """Register the block parameters ``factory`` declares (its ``PARAMS``, if any) under implementation ``name``
    with the topology compiler; :class:`~kernbench.topology.block_params.BlockParamError` for bad declarations."""
    params = getattr(factory, "PARAMS", None)
    if params is not None:
        block_params.register(name, params)


def register_block(registry: ComponentRegistry, name: str, factory: ComponentFactory,
                   node_types: tuple[str, ...] | None = None) -> ComponentRegistry:
    """Add block implementation ``factory`` to ``registry`` under ``name`` (for ``node_types``, else its own
    ``node_types`` attribute, else any) and its declared ``PARAMS`` to the topology compiler's declarations, so a
    topology binding ``name`` compiles with those parameters; returns ``registry``. Register before compiling."""
    declare_params(name, factory)
    registry.register(name, factory, node_types)
    return registry


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
