"""Where an address lives: physical addresses to the node ids that serve them, and named endpoints.

The engine asks :class:`AddressResolver` which node a request goes to, then
asks :class:`~kernbench.topology.routing.PathRouter` how to get there.
"""

from __future__ import annotations

from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr, decode
from kernbench.topology.errors import AddressError, RoutingError
from kernbench.topology.graph import TopologyGraph


class AddressResolver:
    """Maps physical addresses to node ids and finds named endpoints of a graph."""

    __slots__ = ("_cubes", "_graph", "_pes", "_sips", "_slice", "_sram_bytes", "_tcm_bytes")

    def __init__(self, graph: TopologyGraph) -> None:
        spec = graph.spec
        self._graph = graph
        self._slice = spec.hbm_slice_bytes
        self._sips = spec.system.sips.count
        self._cubes = spec.cubes_per_sip
        self._pes = spec.pes_per_cube
        self._tcm_bytes = int(spec.pe.tcm.capacity_mib * (1 << 20))
        self._sram_bytes = int(spec.cube.sram.capacity_mib * (1 << 20))

    @property
    def hbm_slice_bytes(self) -> int:
        """Bytes of HBM owned by one PE."""
        return self._slice

    def hbm_addr(self, sip: int, cube: int, pe: int, offset: int = 0) -> PhysAddr:
        """The address ``offset`` bytes into PE ``pe``'s HBM slice."""
        self._check_location(sip, cube, pe)
        if not 0 <= offset < self._slice:
            raise AddressError(f"offset {offset} is outside PE {pe}'s HBM slice of {self._slice} bytes")
        return PhysAddr(sip, cube, "hbm", pe * self._slice + offset)

    def owner_pe(self, addr: PhysAddr) -> int:
        """The PE whose slice (HBM) or TCM holds an address."""
        return addr.offset // self._slice if addr.kind == "hbm" else addr.pe

    def _check_location(self, sip: int, cube: int, pe: int = 0) -> None:
        if not 0 <= sip < self._sips:
            raise AddressError(f"SIP {sip} does not exist; the topology has {self._sips} SIPs")
        if not 0 <= cube < self._cubes:
            raise AddressError(f"cube {cube} does not exist; each SIP has {self._cubes} cubes")
        if not 0 <= pe < self._pes:
            raise AddressError(f"PE {pe} does not exist; each cube has {self._pes} PEs")

    def resolve(self, addr: PhysAddr | int, nbytes: int = 1) -> str:
        """The node id that serves ``nbytes`` at ``addr``; :class:`AddressError` if not modeled."""
        a = decode(addr) if isinstance(addr, int) else addr
        pe = self.owner_pe(a)
        self._check_location(a.sip, a.cube, pe if a.kind in ("hbm", "tcm") else 0)
        end = a.offset + max(nbytes, 1) - 1
        if a.kind == "hbm":
            if end // self._slice != pe or end >= self._slice * self._pes:
                raise AddressError(f"HBM range {a.offset}..{end} of {nm.cube_prefix(a.sip, a.cube)} crosses the end of "
                                   f"PE {pe}'s slice; split the transfer per slice")
            return nm.hbm_ctrl(a.sip, a.cube, pe)
        if a.kind == "tcm":
            if end >= self._tcm_bytes:
                raise AddressError(f"TCM range ends at {end}, beyond the {self._tcm_bytes}-byte TCM")
            return nm.pe_block(a.sip, a.cube, a.pe, "pe_tcm")
        if a.kind == "sram":
            if end >= self._sram_bytes:
                raise AddressError(f"SRAM range ends at {end}, beyond the {self._sram_bytes}-byte SRAM")
            return nm.sram(a.sip, a.cube)
        return nm.m_cpu(a.sip, a.cube)

    def find_m_cpu(self, sip: int, cube: int) -> str:
        """Id of a cube's M_CPU."""
        self._check_location(sip, cube)
        return nm.m_cpu(sip, cube)

    def find_pcie_ep(self, sip: int, io: int = 0) -> str:
        """Id of a SIP's PCIe endpoint."""
        return self._existing(nm.pcie_ep(sip, io))

    def find_io_cpu(self, sip: int, io: int = 0) -> str:
        """Id of a SIP's IO control CPU."""
        return self._existing(nm.io_cpu(sip, io))

    def find_pe_block(self, sip: int, cube: int, pe: int, block: str) -> str:
        """Id of one block of a PE."""
        self._check_location(sip, cube, pe)
        return self._existing(nm.pe_block(sip, cube, pe, block))

    def find_all_pcie_eps(self) -> list[str]:
        """Every PCIe endpoint, sorted."""
        return sorted(self._graph.nodes_of_type("pcie_ep"))

    def _existing(self, node_id: str) -> str:
        if node_id not in self._graph.nodes:
            raise RoutingError(f"node {node_id} not found in topology {self._graph.spec.name!r}")
        return node_id
