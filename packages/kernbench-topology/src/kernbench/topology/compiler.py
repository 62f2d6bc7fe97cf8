"""Compile a :class:`TopologySpec` into a :class:`TopologyGraph`.

Stages run in a fixed order, because each one wires to nodes the previous
ones created:

1. system nodes (host CPU, tray switch);
2. per SIP: the IO chiplet, then every cube (routers, PEs, HBM controllers,
   SRAM, M_CPU, UCIe PHYs and their internal edges), then the inter-cube UCIe
   edges, then the IO-to-cube edges;
3. switch-to-SIP PCIe edges;
4. removal of ``disabled_links`` and the explicit-connectivity check;
5. the four view projections (system, sip, cube, pe).

Positions are global millimetres (x right, y down): SIPs are laid out on the
tray by their grid, cubes by their mesh coordinates inside a SIP, and every
unit inside a cube by the mesh layout. Link lengths are the Euclidean
distances between these positions; on-die propagation is length times
``cube.noc.wire_ns_per_mm`` plus any fixed latency of the link type.
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from types import MappingProxyType

from kernbench.topology import naming as nm
from kernbench.topology.block_params import block_values
from kernbench.topology.errors import TopologyError
from kernbench.topology.graph import Edge, Node, TopologyGraph
from kernbench.topology.mesh_gen import CubeMesh, ensure_mesh, mesh_path_for
from kernbench.topology.sip_topologies import get_sip_topology
from kernbench.topology.spec import TopologySpec
from kernbench.topology.spec_loader import load_spec
from kernbench.topology.views import build_views

# PE-internal wiring: (a, b) means links a -> b and b -> a.
PE_LINKS = (
    ("pe_cpu", "pe_scheduler"),
    ("pe_cpu", "pe_mmu"),
    ("pe_scheduler", "pe_dma"),
    ("pe_scheduler", "pe_fetch_store"),
    ("pe_scheduler", "pe_gemm"),
    ("pe_scheduler", "pe_math"),
    ("pe_scheduler", "pe_ipcq"),
    ("pe_dma", "pe_tcm"),
    ("pe_dma", "pe_mmu"),
    ("pe_dma", "pe_ipcq"),
    ("pe_fetch_store", "pe_tcm"),
    ("pe_fetch_store", "pe_gemm"),
    ("pe_fetch_store", "pe_math"),
)
# 3 x 3 placement of the blocks inside a PE footprint, row by row.
PE_GRID = (("pe_cpu", "pe_scheduler", "pe_ipcq"),
           ("pe_mmu", "pe_dma", "pe_tcm"),
           ("pe_fetch_store", "pe_gemm", "pe_math"))
# Attachment of PE blocks to their router: (block, kind to router, kind from router).
PE_ATTACH = (("pe_dma", "pe_to_router", "router_to_pe"),
             ("pe_cpu", "command", "command"),
             ("pe_mmu", "command", "command"))
OPPOSITE = {"n": "s", "s": "n", "e": "w", "w": "e"}



def pe_block_params(spec: TopologySpec) -> dict[str, dict[str, object]]:
    """The parameters each PE block's node carries (besides ``pe``), as the implementation bound to the block
    declares them (:mod:`kernbench.topology.block_params`): each from its topology field, ``pe.blocks`` or its
    default, checked against its bounds; a block declaring no ``overhead_ns`` gets 0.

    Components read their own node's attributes, never the spec, so a graph
    node says everything about the block it models (units in the names).
    """
    return {block: block_values(spec, block) for block in nm.PE_BLOCKS}


class _Builder:
    def __init__(self, spec: TopologySpec, mesh: CubeMesh) -> None:
        self.spec = spec
        self.mesh = mesh
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        geo, cm = spec.cube.geometry, spec.sip.cube_mesh
        self.cube_w, self.cube_h = geo.w_mm, geo.h_mm
        self.mesh_x0 = spec.sip.io.w_mm + cm.gap_mm
        self.sip_w = self.mesh_x0 + cm.w * geo.w_mm + (cm.w - 1) * cm.gap_mm
        self.sip_h = cm.h * geo.h_mm + (cm.h - 1) * cm.gap_mm

    # ---------------------------------------------------------------- helpers
    def node(self, node_id: str, node_type: str, x: float, y: float, **attrs: object) -> None:
        self.nodes[node_id] = Node(node_id, node_type, round(x, 6), round(y, 6), MappingProxyType(attrs))

    def link(self, a: str, b: str, kind: str, bw: float, *, fixed_ns: float | None = None,
             weight: float | None = None, kind_back: str | None = None, bw_back: float | None = None) -> None:
        """Add a -> b (kind) and b -> a (kind_back or kind).

        On-die links take their latency from their length (``wire_ns_per_mm``);
        off-die links (PCIe, UCIe crossings) take exactly ``fixed_ns``.
        """
        na, nb = self.nodes[a], self.nodes[b]
        dist = round(math.hypot(na.x_mm - nb.x_mm, na.y_mm - nb.y_mm), 6)
        lat = round(dist * self.spec.cube.noc.wire_ns_per_mm if fixed_ns is None else fixed_ns, 6)
        w = dist if weight is None else weight
        self.edges.append(Edge(a, b, kind, bw, lat, dist, w))
        self.edges.append(Edge(b, a, kind_back or kind, bw if bw_back is None else bw_back, lat, dist, w))

    def sip_origin(self, sip: int) -> tuple[float, float]:
        sips = self.spec.system.sips
        r, c = get_sip_topology(sips.topology).layout(sip, sips.count, sips.grid)
        gap = self.spec.system.sip_gap_mm
        return c * (self.sip_w + gap), r * (self.sip_h + gap)

    def cube_origin(self, sip: int, cube: int) -> tuple[float, float]:
        sx, sy = self.sip_origin(sip)
        cm, gap = self.spec.sip.cube_mesh, self.spec.sip.cube_mesh.gap_mm
        r, c = divmod(cube, cm.w)
        return sx + self.mesh_x0 + c * (self.cube_w + gap), sy + r * (self.cube_h + gap)

    # ---------------------------------------------------------------- stages
    def system(self) -> None:
        pcie = self.spec.system.pcie
        sips = self.spec.system.sips
        _, cols = get_sip_topology(sips.topology).grid(sips.count, sips.grid)
        tray_w = cols * self.sip_w + (cols - 1) * self.spec.system.sip_gap_mm
        self.node(nm.HOST, "host_cpu", tray_w / 2, -40.0, overhead_ns=pcie.host_overhead_ns)
        self.node(nm.SWITCH, "switch", tray_w / 2, -20.0, overhead_ns=pcie.switch_overhead_ns)
        self.link(nm.HOST, nm.SWITCH, "pcie", pcie.bw_gbs, fixed_ns=pcie.latency_ns)

    def io_chiplet(self, sip: int) -> None:
        spec, io = self.spec, self.spec.sip.io
        sx, _ = self.sip_origin(sip)
        _, cy = self.cube_origin(sip, io.attach_cube)
        x = sx + io.w_mm / 2
        mid = cy + self.cube_h / 2
        self.node(nm.pcie_ep(sip), "pcie_ep", x, mid - 3.0, overhead_ns=spec.system.pcie.endpoint_overhead_ns)
        self.node(nm.io_noc(sip), "io_noc", x, mid, overhead_ns=io.noc_overhead_ns)
        self.node(nm.io_cpu(sip), "io_cpu", x, mid + 3.0, overhead_ns=io.io_cpu_overhead_ns)
        self.link(nm.pcie_ep(sip), nm.io_noc(sip), "io_internal", io.noc_bw_gbs)
        self.link(nm.io_noc(sip), nm.io_cpu(sip), "command", io.noc_bw_gbs)
        for port in self.mesh.ucie:
            if port.side != "w":
                continue
            pid = nm.io_ucie(sip, port.index)
            self.node(pid, "io_ucie", sx + io.w_mm, cy + port.y_mm, overhead_ns=spec.sip.ucie.phy_overhead_ns)
            self.link(nm.io_noc(sip), pid, "io_internal", io.noc_bw_gbs)

    def cube(self, sip: int, cube: int) -> None:
        spec, mesh = self.spec, self.mesh
        ox, oy = self.cube_origin(sip, cube)
        noc = spec.cube.noc
        for r, c in mesh.present:
            x, y = mesh.router_xy(r, c)
            self.node(nm.router(sip, cube, r, c), "router", ox + x, oy + y,
                      overhead_ns=noc.router_overhead_ns, row=r, col=c)
        present = set(mesh.present)
        for r, c in mesh.present:  # east and south neighbours: each mesh link once
            for rr, cc in ((r, c + 1), (r + 1, c)):
                if (rr, cc) in present:
                    self.link(nm.router(sip, cube, r, c), nm.router(sip, cube, rr, cc), "router_mesh",
                              noc.link_bw_gbs)
        self.pes(sip, cube, ox, oy)
        hbm, sram, mcpu = spec.cube.hbm, spec.cube.sram, spec.cube.m_cpu
        for unit, node_type, rc, pos, kinds, bw, attrs in (
                (nm.m_cpu(sip, cube), "m_cpu", mesh.m_cpu_router, spec.cube.placement.m_cpu_pos_mm,
                 ("router_to_mcpu", "mcpu_to_router"), noc.link_bw_gbs, {"overhead_ns": mcpu.overhead_ns}),
                (nm.sram(sip, cube), "sram", mesh.sram_router, spec.cube.placement.sram_pos_mm,
                 ("router_to_sram", "sram_to_router"), sram.link_bw_gbs,
                 {"overhead_ns": sram.overhead_ns, "capacity_bytes": int(sram.capacity_mib * (1 << 20))})):
            self.node(unit, node_type, ox + pos[0], oy + pos[1], **attrs)
            self.link(nm.router(sip, cube, *rc), unit, kinds[0], bw, kind_back=kinds[1])
        cx, cy = ox + self.cube_w / 2, oy + self.cube_h / 2
        for p, (r, c) in enumerate(mesh.pe_routers):
            rx, ry = mesh.router_xy(r, c)
            hid = nm.hbm_ctrl(sip, cube, p)
            # The slice controller sits on the HBM stack's edge, between the router and the stack.
            hx, hy = ox + rx + 0.35 * (cx - ox - rx), oy + ry + 0.35 * (cy - oy - ry)
            self.node(hid, "hbm_ctrl", hx, hy, overhead_ns=hbm.ctrl_overhead_ns, pe=p,
                      channels=spec.channels_per_pe, channel_bw_gbs=spec.hbm_channel_bw_gbs,
                      burst_bytes=hbm.burst_bytes, slice_bytes=spec.hbm_slice_bytes)
            self.link(nm.router(sip, cube, r, c), hid, "router_to_hbm", noc.link_bw_gbs, kind_back="hbm_to_router")
        ucie = spec.sip.ucie
        for port in mesh.ucie:
            pid = nm.ucie_phy(sip, cube, port.side, port.index)
            self.node(pid, "ucie_phy", ox + port.x_mm, oy + port.y_mm, overhead_ns=ucie.phy_overhead_ns)
            self.link(nm.router(sip, cube, port.row, port.col), pid, "router_to_ucie_conn", noc.link_bw_gbs,
                      kind_back="ucie_conn_to_router")

    def pes(self, sip: int, cube: int, ox: float, oy: float) -> None:
        pe = self.spec.pe
        step = pe.w_mm / 3
        params = pe_block_params(self.spec)
        overheads = {block: values.pop("overhead_ns", 0.0) for block, values in params.items()}
        tcm_bw = {("pe_dma", "pe_tcm"): pe.tcm.write_bw_gbs, ("pe_fetch_store", "pe_tcm"): pe.tcm.write_bw_gbs}
        for p, (px, py) in enumerate(self.mesh.pe_positions):
            for gr, row in enumerate(PE_GRID):
                for gc, block in enumerate(row):
                    self.node(nm.pe_block(sip, cube, p, block), block,
                              ox + px + (gc - 1) * step, oy + py + (gr - 1) * step,
                              overhead_ns=overheads.get(block, 0.0), pe=p, **params.get(block, {}))
            for a, b in PE_LINKS:
                bw = tcm_bw.get((a, b), pe.internal_bw_gbs)
                back = pe.tcm.read_bw_gbs if b == "pe_tcm" else bw
                self.link(nm.pe_block(sip, cube, p, a), nm.pe_block(sip, cube, p, b), "pe_internal", bw,
                          bw_back=back)
            r, c = self.mesh.pe_routers[p]
            for block, k_out, k_in in PE_ATTACH:
                self.link(nm.pe_block(sip, cube, p, block), nm.router(sip, cube, r, c), k_out,
                          self.spec.cube.noc.link_bw_gbs, kind_back=k_in)

    def inter_cube(self, sip: int) -> None:
        cm, ucie = self.spec.sip.cube_mesh, self.spec.sip.ucie
        for cube in range(cm.w * cm.h):
            r, c = divmod(cube, cm.w)
            for side, nb in (("e", (r, c + 1)), ("s", (r + 1, c))):
                if nb[0] >= cm.h or nb[1] >= cm.w:
                    continue
                other = nb[0] * cm.w + nb[1]
                for port in self.mesh.ucie:
                    if port.side == side:
                        self.link(nm.ucie_phy(sip, cube, side, port.index),
                                  nm.ucie_phy(sip, other, OPPOSITE[side], port.index), "ucie_mesh",
                                  ucie.bw_gbs, fixed_ns=ucie.latency_ns, weight=ucie.routing_weight_mm)

    def io_to_cube(self, sip: int) -> None:
        ucie, cube = self.spec.sip.ucie, self.spec.sip.io.attach_cube
        for port in self.mesh.ucie:
            if port.side == "w":
                self.link(nm.io_ucie(sip, port.index), nm.ucie_phy(sip, cube, "w", port.index), "io_to_cube",
                          ucie.bw_gbs, fixed_ns=ucie.latency_ns, weight=ucie.routing_weight_mm,
                          kind_back="cube_to_io")

    def switch_to_io(self, sip: int) -> None:
        pcie = self.spec.system.pcie
        self.link(nm.SWITCH, nm.pcie_ep(sip), "pcie", pcie.bw_gbs, fixed_ns=pcie.latency_ns)

    # ---------------------------------------------------------------- checks
    def disable_links(self) -> None:
        drop = set(self.spec.disabled_links)
        present = {(e.src, e.dst) for e in self.edges}
        for a, b in self.spec.disabled_links:
            if (a, b) not in present:
                raise TopologyError(f"{self.spec.source}: disabled_links names {a} → {b}, which is not a link "
                                    f"of this topology; use ids as printed by `kernbench topology`")
        self.edges = [e for e in self.edges if (e.src, e.dst) not in drop]

    def check_connectivity(self) -> None:
        present = {(e.src, e.dst) for e in self.edges}
        required: list[tuple[str, str]] = []
        for n in self.nodes.values():
            loc = nm.locate(n.id)
            if n.type in ("pe_dma", "pe_cpu", "pe_mmu"):
                r, c = self.mesh.pe_routers[loc.pe]
                rid = nm.router(loc.sip, loc.cube, r, c)
                required += [(n.id, rid), (rid, n.id)]
            elif n.type == "pe_scheduler":
                pre = nm.pe_of(n.id)
                required += [(f"{pre}.{a}", f"{pre}.{b}") for a, b in PE_LINKS]
                required += [(f"{pre}.{b}", f"{pre}.{a}") for a, b in PE_LINKS]
            elif n.type == "pcie_ep":
                required += [(nm.SWITCH, n.id), (n.id, nm.SWITCH), (n.id, nm.io_noc(loc.sip)),
                             (nm.io_noc(loc.sip), n.id), (nm.io_noc(loc.sip), nm.io_cpu(loc.sip)),
                             (nm.io_cpu(loc.sip), nm.io_noc(loc.sip))]
        required += [(nm.HOST, nm.SWITCH), (nm.SWITCH, nm.HOST)]
        for a, b in required:
            if (a, b) not in present:
                raise TopologyError(f"{self.spec.source}: no link for {a} → {b}; this link is required "
                                    f"(remove it from disabled_links)")
        # Every data endpoint must stay reachable from the host and back over data links.
        fwd: dict[str, list[str]] = {}
        rev: dict[str, list[str]] = {}
        for e in self.edges:
            if e.kind != "command":
                fwd.setdefault(e.src, []).append(e.dst)
                rev.setdefault(e.dst, []).append(e.src)
        for adj, direction in ((fwd, "from"), (rev, "to")):
            seen = {nm.HOST}
            queue = deque([nm.HOST])
            while queue:
                for nb in adj.get(queue.popleft(), ()):
                    if nb not in seen:
                        seen.add(nb)
                        queue.append(nb)
            for n in self.nodes.values():
                if n.type in ("hbm_ctrl", "sram", "m_cpu", "pe_dma") and n.id not in seen:
                    raise TopologyError(f"{self.spec.source}: no link for a data path {direction} {nm.HOST} "
                                        f"{'to' if direction == 'from' else 'from'} {n.id}; "
                                        f"restore a link in disabled_links")

    def build(self) -> None:
        self.system()
        for sip in range(self.spec.system.sips.count):
            self.io_chiplet(sip)
            for cube in range(self.spec.cubes_per_sip):
                self.cube(sip, cube)
            self.inter_cube(sip)
            self.io_to_cube(sip)
        for sip in range(self.spec.system.sips.count):
            self.switch_to_io(sip)
        self.disable_links()
        self.check_connectivity()


def compile_spec(spec: TopologySpec, mesh_path: Path | None = None, *, cache: bool = False) -> TopologyGraph:
    """Compile a validated spec into a graph, using (or writing) the mesh cache at ``mesh_path``, or in the user
    cache directory with ``cache=True``."""
    if mesh_path is None and cache:
        mesh_path = mesh_path_for(spec)
    mesh, _ = ensure_mesh(spec, mesh_path)
    b = _Builder(spec, mesh)
    b.build()
    nodes, edges = b.nodes, b.edges
    return TopologyGraph(spec, mesh, mesh_path, nodes, edges, lambda: build_views(spec, mesh, nodes, edges))


def load_topology(path: str | Path) -> TopologyGraph:
    """Load, validate and compile a topology YAML file (its cube mesh cached in the user cache directory)."""
    return compile_spec(load_spec(path), cache=True)
