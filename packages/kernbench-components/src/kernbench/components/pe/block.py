"""The base of PE blocks that talk to their siblings (the PE_CPU, the scheduler): one cached lookup per sibling."""

from __future__ import annotations

from kernbench.sim.component import Component
from kernbench.sim.protocol import Engine
from kernbench.topology import naming as nm


class PeBlock(Component):
    """A PE block with :meth:`block`, its siblings by name, each looked up in the engine once."""

    __slots__ = ("_blocks",)

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self._blocks: dict[str, Component] = {}

    def block(self, name: str) -> Component:
        """A sibling block of this PE (``pe_dma``, ``pe_tcm``, ``pe_mmu``, ...)."""
        comp = self._blocks.get(name)
        if comp is None:
            comp = self._blocks[name] = self.engine.components[nm.sibling(self.id, name)]
        return comp
