"""The validated topology specification (``topology.yaml``).

The schema is declared once, as frozen dataclasses whose fields carry their
default, their allowed range and a one-line description in ``metadata``.
:mod:`kernbench.topology.spec_loader` walks a parsed YAML mapping against
these classes, so every
field has a default, every numeric field states its unit in its name
(``_ns``, ``_gbs``, ``_mm``, ``_bytes``, ``_kib``/``_mib``/``_gib``,
``_ghz``, ``_cycles``, ``_tflops``) and every bad value is reported with the
file, the dotted field path, the value and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernbench.topology.block_params import shipped_field
from kernbench.topology.sip_topologies import DEFAULT_SIP_TOPOLOGY, SIP_TOPOLOGY_NAMES

SIP_TOPOLOGIES = SIP_TOPOLOGY_NAMES  # the registered SIP topology families, live (kernbench.topology.sip_topologies)
CORNERS = ("NW", "NE", "SW", "SE")
VIEW_NAMES = ("system", "sip", "cube", "pe")

# Bounds shared by many fields. They are wide (far beyond any hardware we model) and exist so that a typo
# cannot make a run hang, exhaust memory or report absurd numbers: a bandwidth of 1e-300 GB/s is a mistake,
# never a study. Every field states its range in the schema (``field_docs``) and in its error.
BW = {"lo": 1e-3, "hi": 1e6}         # GB/s: 1 MB/s .. 1 PB/s
LATENCY = {"lo": 0.0, "hi": 1e9}     # ns: up to one second
OVERHEAD = {"lo": 0.0, "hi": 1e6}    # ns: up to one millisecond
SIZE_MM = {"lo": 1e-3, "hi": 100.0}  # mm on a die or package
GAP_MM = {"lo": 0.0, "hi": 1000.0}   # mm between dies or packages
MAX_ROUTER_COLUMNS = 64              # router columns a cube row may hold (w_mm / max_spacing_mm)


def _f(default: Any, doc: str, *, lo: float | None = None, hi: float | None = None,
       choices: tuple[Any, ...] | None = None, positive: bool = False) -> Any:
    """Declare a spec field with its default, range and description."""
    meta = {"doc": doc, "lo": lo, "hi": hi, "choices": choices, "positive": positive}
    if isinstance(default, (list, dict)):
        raise TypeError("mutable defaults must be tuples")
    return field(default=default, metadata=meta)


def _param(path: str) -> Any:
    """Declare the spec field a shipped PE block parameter is written in: its default, range and description are
    the block's declaration (:mod:`kernbench.topology.block_params`)."""
    p = shipped_field(path)
    return _f(p.default, p.doc, lo=p.low, hi=p.high)


def _sub(cls: type) -> Any:
    """Declare a nested section whose fields all default."""
    return field(default_factory=cls, metadata={"doc": cls.__doc__ or ""})


# --------------------------------------------------------------------------- system


@dataclass(frozen=True)
class SipsSpec:
    """The SIPs of the tray and the logical topology collectives use between them."""

    count: int = _f(2, "number of SIPs on the tray", lo=1, hi=16)
    topology: str = _f(DEFAULT_SIP_TOPOLOGY, "logical SIP topology", choices=SIP_TOPOLOGIES)
    grid: tuple[int, int] = _f((1, 2), "SIP grid [rows, cols] for 2D topologies; rows*cols == count", lo=1, hi=16)


@dataclass(frozen=True)
class PcieSpec:
    """PCIe links: host to switch and switch to each SIP's endpoint."""

    bw_gbs: float = _f(768.0, "bandwidth per endpoint link, GB/s", **BW)
    latency_ns: float = _f(50.0, "propagation latency per PCIe link, ns", **LATENCY)
    endpoint_overhead_ns: float = _f(10.0, "protocol processing at each PCIe endpoint, ns", **OVERHEAD)
    switch_overhead_ns: float = _f(20.0, "forwarding overhead of the tray switch, ns", **OVERHEAD)
    host_overhead_ns: float = _f(0.0, "host-side issue overhead, ns", **OVERHEAD)


@dataclass(frozen=True)
class SystemSpec:
    """Tray level: SIPs, host and the PCIe switch joining them."""

    sips: SipsSpec = _sub(SipsSpec)
    pcie: PcieSpec = _sub(PcieSpec)
    sip_gap_mm: float = _f(10.0, "gap between SIP packages on the tray, mm", **GAP_MM)


# --------------------------------------------------------------------------- sip


@dataclass(frozen=True)
class CubeMeshSpec:
    """The 2D mesh of cubes inside one SIP."""

    w: int = _f(4, "cubes per mesh row", lo=1, hi=16)
    h: int = _f(4, "cubes per mesh column", lo=1, hi=16)
    gap_mm: float = _f(2.0, "die-to-die gap between neighbouring cubes, mm", **GAP_MM)


@dataclass(frozen=True)
class IoSpec:
    """The IO chiplet: PCIe endpoint, IO NoC, IO control CPU."""

    attach_cube: int = _f(0, "index of the cube the IO chiplet's UCIe link attaches to (in the west column)",
                         lo=0, hi=255)
    noc_bw_gbs: float = _f(512.0, "IO NoC internal link bandwidth, GB/s", **BW)
    noc_overhead_ns: float = _f(2.0, "IO NoC forwarding overhead, ns", **OVERHEAD)
    io_cpu_overhead_ns: float = _f(20.0, "IO control CPU per-message overhead, ns", **OVERHEAD)
    w_mm: float = _f(6.0, "IO chiplet width in the SIP diagram, mm", **SIZE_MM)


@dataclass(frozen=True)
class UcieSpec:
    """UCIe die-to-die links between neighbouring cubes and to the IO chiplet."""

    bw_gbs: float = _f(512.0, "bandwidth per UCIe link, GB/s", **BW)
    latency_ns: float = _f(8.0, "PHY-to-PHY crossing latency, ns", **LATENCY)
    phy_overhead_ns: float = _f(0.0, "forwarding overhead of each UCIe PHY node, ns", **OVERHEAD)
    routing_weight_mm: float = _f(1.0, "Dijkstra weight of one die crossing, mm-equivalent", lo=1e-3, hi=1e4)


@dataclass(frozen=True)
class SipSpec:
    """One SIP: its cube mesh, IO chiplet and UCIe links."""

    cube_mesh: CubeMeshSpec = _sub(CubeMeshSpec)
    io: IoSpec = _sub(IoSpec)
    ucie: UcieSpec = _sub(UcieSpec)


# --------------------------------------------------------------------------- cube


@dataclass(frozen=True)
class GeometrySpec:
    """Physical size of one cube die (mesh-layout input)."""

    w_mm: float = _f(12.0, "cube width, mm", lo=1.0, hi=100.0)
    h_mm: float = _f(12.0, "cube height, mm", lo=1.0, hi=100.0)
    pe_inset_mm: float = _f(1.5, "distance of corner PEs from the cube edges, mm; every PE lies on the die: "
                             "pe_inset_mm + (pe_per_corner - 1) * pe_pitch_mm < w_mm and pe_inset_mm < h_mm", **SIZE_MM)
    pe_pitch_mm: float = _f(3.0, "spacing between the PEs of one corner, mm", **SIZE_MM)
    max_spacing_mm: float = _f(3.0, "largest router column gap before a relay column is inserted, mm; "
                                f"w_mm / max_spacing_mm <= {MAX_ROUTER_COLUMNS}", lo=0.1, hi=100.0)
    hbm_gap_mm: float = _f(1.5, "distance from the cube centre line to the HBM router rows, mm; below h_mm / 2",
                            **SIZE_MM)


@dataclass(frozen=True)
class PeLayoutSpec:
    """Where PEs sit on the cube die (mesh-layout input)."""

    corners: tuple[str, ...] = _f(CORNERS, "corners that hold PEs, from NW NE SW SE", choices=CORNERS)
    pe_per_corner: int = _f(2, "PEs per corner", lo=1, hi=4)


@dataclass(frozen=True)
class NocSpec:
    """The cube's router mesh."""

    link_bw_gbs: float = _f(256.0, "router-to-router and attachment link bandwidth, GB/s", **BW)
    router_overhead_ns: float = _f(2.0, "per-router forwarding overhead, ns", **OVERHEAD)
    wire_ns_per_mm: float = _f(0.1, "on-die wire propagation delay, ns per mm", lo=0.0, hi=1000.0)
    ucie_connections: int = _f(2, "UCIe PHYs per cube side (mesh-layout input)", lo=1, hi=8)


@dataclass(frozen=True)
class HbmSpec:
    """The cube's HBM: capacity, bandwidth and per-PE pseudo-channel partition."""

    capacity_gib: float = _f(48.0, "HBM capacity per cube, GiB; at most 512 (the address layout)", lo=0.001)
    bw_gbs: float = _f(1024.0, "aggregate HBM bandwidth per cube, GB/s", **BW)
    pseudo_channels: int = _f(64, "pseudo-channels per cube, split evenly over the PEs (a multiple of the PEs "
                                   "per cube)", lo=1, hi=1024)
    burst_bytes: int = _f(256, "bytes per pseudo-channel burst (channel interleave granule)", lo=16, hi=65536)
    ctrl_overhead_ns: float = _f(10.0, "controller pickup overhead per request, ns", **OVERHEAD)
    mapping_mode: str = _f("per_pe", "HBM partitioning (mesh-layout input)", choices=("per_pe",))


@dataclass(frozen=True)
class SramSpec:
    """The cube's shared SRAM scratchpad."""

    capacity_mib: float = _f(32.0, "SRAM capacity per cube, MiB; at most 16384 (the address layout)",
                              lo=0.001)
    link_bw_gbs: float = _f(128.0, "router-to-SRAM link bandwidth, GB/s", **BW)
    overhead_ns: float = _f(5.0, "SRAM access overhead per request, ns", **OVERHEAD)


@dataclass(frozen=True)
class MCpuSpec:
    """The cube's management CPU."""

    overhead_ns: float = _f(10.0, "per-message overhead, ns", **OVERHEAD)


@dataclass(frozen=True)
class PlacementSpec:
    """Placement of cube-level units on the die (mesh-layout input)."""

    m_cpu_pos_mm: tuple[float, float] = _f((1.5, 5.5), "M_CPU position [x, y], mm, inside the cube", lo=0.0, hi=100.0)
    sram_pos_mm: tuple[float, float] = _f((1.5, 8.5), "SRAM position [x, y], mm, inside the cube", lo=0.0, hi=100.0)


@dataclass(frozen=True)
class CubeSpec:
    """One cube: geometry, NoC, HBM, SRAM, M_CPU and placement."""

    geometry: GeometrySpec = _sub(GeometrySpec)
    pe_layout: PeLayoutSpec = _sub(PeLayoutSpec)
    noc: NocSpec = _sub(NocSpec)
    hbm: HbmSpec = _sub(HbmSpec)
    sram: SramSpec = _sub(SramSpec)
    m_cpu: MCpuSpec = _sub(MCpuSpec)
    placement: PlacementSpec = _sub(PlacementSpec)


# --------------------------------------------------------------------------- pe


@dataclass(frozen=True)
class GemmSpec:
    """The PE's matrix engine."""

    peak_tflops: float = _param("pe.gemm.peak_tflops")
    tile_m: int = _param("pe.gemm.tile_m")
    tile_n: int = _param("pe.gemm.tile_n")
    tile_k: int = _param("pe.gemm.tile_k")


@dataclass(frozen=True)
class TcmSpec:
    """The PE's tightly coupled memory."""

    capacity_mib: float = _param("pe.tcm.capacity_mib")
    read_bw_gbs: float = _param("pe.tcm.read_bw_gbs")
    write_bw_gbs: float = _param("pe.tcm.write_bw_gbs")
    scratch_mib: float = _param("pe.tcm.scratch_mib")


@dataclass(frozen=True)
class DmaSpec:
    """The PE's DMA engine."""

    read_channels: int = _param("pe.dma.read_channels")
    write_channels: int = _param("pe.dma.write_channels")
    overhead_ns: float = _param("pe.dma.overhead_ns")


@dataclass(frozen=True)
class CostModelSpec:
    """Command-issue cost model: FIXED + logical_bytes x R cycles per command."""

    fixed_cycles: float = _param("pe.cost_model.fixed_cycles")
    r_cycles_per_byte: float = _param("pe.cost_model.r_cycles_per_byte")
    max_composite_logical_bytes: int = _f(1024, "largest composite descriptor, bytes", lo=1, hi=1 << 20)


@dataclass(frozen=True)
class IpcqSpec:
    """PE_IPCQ: the per-direction receive rings that PE-to-PE messages land in."""

    depth: int = _param("pe.ipcq.depth")
    slot_kib: float = _param("pe.ipcq.slot_kib")
    overhead_ns: float = _param("pe.ipcq.overhead_ns")

    @property
    def slot_bytes(self) -> int:
        """Bytes per slot."""
        return int(self.slot_kib * 1024)


@dataclass(frozen=True)
class PeSpec:
    """One processing element.

    The fields its blocks read are declared by the blocks (:mod:`kernbench.topology.block_params`); parameters a
    plugin implementation declares besides them are set under ``blocks``.
    """

    clock_ghz: float = _param("pe.clock_ghz")
    cpu_overhead_ns: float = _param("pe.cpu_overhead_ns")
    scheduler_overhead_ns: float = _param("pe.scheduler_overhead_ns")
    internal_bw_gbs: float = _f(512.0, "bandwidth of links between PE blocks, GB/s", **BW)
    math_lanes: int = _param("pe.math_lanes")
    mmu_page_bytes: int = _param("pe.mmu_page_bytes")
    mmu_translate_ns: float = _param("pe.mmu_translate_ns")
    gemm: GemmSpec = _sub(GemmSpec)
    tcm: TcmSpec = _sub(TcmSpec)
    dma: DmaSpec = _sub(DmaSpec)
    cost_model: CostModelSpec = _sub(CostModelSpec)
    ipcq: IpcqSpec = _sub(IpcqSpec)
    w_mm: float = _f(2.0, "PE block size in the cube diagram, mm", **SIZE_MM)
    blocks: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = _f(
        (), "parameters a block implementation declares besides the fields above, by PE block: "
            "{pe_gemm: {name: value}}; checked against the declarations of the implementation bound in components")


# --------------------------------------------------------------------------- fabric


@dataclass(frozen=True)
class FabricSpec:
    """How payloads cross wires."""

    flit_bytes: int = _f(256, "flit size; a wire serialises one flit in flit_bytes / bw", lo=16, hi=65536)
    packet_bytes: int = _f(4096, "largest packet; concurrent streams interleave per packet; a multiple of "
                                "flit_bytes and at least control_bytes", lo=16, hi=1 << 20)
    control_bytes: int = _f(64, "size of a control message (command, launch, ack); at most packet_bytes", lo=1,
                             hi=65536)


DEFAULT_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("host_cpu", "host"),
    ("switch", "forwarding"),
    ("pcie_ep", "pcie_ep"),
    ("io_noc", "forwarding"),
    ("io_ucie", "forwarding"),
    ("ucie_phy", "forwarding"),
    ("router", "forwarding"),
    ("hbm_ctrl", "hbm_ctrl"),
    ("sram", "sram"),
    ("m_cpu", "m_cpu"),
    ("pe_dma", "pe_dma"),
    ("io_cpu", "io_cpu"),
    ("pe_cpu", "pe_cpu"),
    ("pe_scheduler", "pe_scheduler"),
    ("pe_tcm", "pe_tcm"),
    ("pe_fetch_store", "pe_fetch_store"),
    ("pe_gemm", "pe_gemm"),
    ("pe_math", "pe_math"),
    ("pe_mmu", "pe_mmu"),
    ("pe_ipcq", "pe_ipcq"),
)


@dataclass(frozen=True)
class TopologySpec:
    """A whole tray: the root of ``topology.yaml``."""

    name: str = _f("ahbm", "topology name shown in summaries")
    system: SystemSpec = _sub(SystemSpec)
    sip: SipSpec = _sub(SipSpec)
    cube: CubeSpec = _sub(CubeSpec)
    pe: PeSpec = _sub(PeSpec)
    fabric: FabricSpec = _sub(FabricSpec)
    components: tuple[tuple[str, str], ...] = _f(
        DEFAULT_COMPONENTS, "node type -> component implementation name")
    disabled_links: tuple[tuple[str, str], ...] = _f(
        (), "links [src, dst] removed from the compiled graph (what-if / fault studies)")
    emit_views: tuple[str, ...] = _f(VIEW_NAMES, "diagram views to write", choices=VIEW_NAMES)
    source: str = _f("<defaults>", "file the spec was read from (set by the loader)")

    @property
    def component_bindings(self) -> dict[str, str]:
        """Node type to implementation name, as a fresh dict."""
        return dict(self.components)

    @property
    def pes_per_cube(self) -> int:
        """PEs in one cube."""
        return len(self.cube.pe_layout.corners) * self.cube.pe_layout.pe_per_corner

    @property
    def cubes_per_sip(self) -> int:
        """Cubes in one SIP."""
        return self.sip.cube_mesh.w * self.sip.cube_mesh.h

    @property
    def hbm_slice_bytes(self) -> int:
        """Bytes of HBM owned by each PE (one slice)."""
        return int(self.cube.hbm.capacity_gib * (1 << 30)) // self.pes_per_cube

    @property
    def channels_per_pe(self) -> int:
        """HBM pseudo-channels in each PE's slice."""
        return self.cube.hbm.pseudo_channels // self.pes_per_cube

    @property
    def hbm_channel_bw_gbs(self) -> float:
        """Bandwidth of one pseudo-channel: the aggregate split evenly (see the HBM ADR)."""
        return self.cube.hbm.bw_gbs / self.cube.hbm.pseudo_channels


__all__ = [
    "CORNERS",
    "DEFAULT_COMPONENTS",
    "SIP_TOPOLOGIES",
    "VIEW_NAMES",
    "TopologySpec",
]
