"""The four view projections of a compiled graph: system, sip, cube, pe.

Each view collapses the flat graph to one abstraction level by mapping every
node to a box of that level (or dropping it) and merging the edges between
boxes. Box positions and sizes come from the compiled node coordinates, so a
diagram drawn from a view shows the same geometry routing uses.
"""

from __future__ import annotations

from collections.abc import Callable

from kernbench.topology import naming as nm
from kernbench.topology.graph import Edge, Node, View, ViewEdge, ViewNode
from kernbench.topology.mesh_gen import CubeMesh
from kernbench.topology.spec import TopologySpec


def _project(name: str, title: str, boxes: dict[str, ViewNode], owner: Callable[[str], str | None],
             edges: list[Edge]) -> View:
    merged: dict[tuple[str, str], list[Edge]] = {}
    for e in edges:
        a, b = owner(e.src), owner(e.dst)
        if a is None or b is None or a == b:
            continue
        merged.setdefault((a, b), []).append(e)
    vedges = []
    for (a, b), group in merged.items():
        first = group[0]
        vedges.append(ViewEdge(a, b, first.kind, first.bw_gbs, first.distance_mm, len(group)))
    return View(name, title, tuple(boxes.values()), tuple(vedges))


def _bbox(nodes: list[Node], pad: float) -> tuple[float, float, float, float]:
    xs = [n.x_mm for n in nodes]
    ys = [n.y_mm for n in nodes]
    return min(xs) - pad, min(ys) - pad, max(xs) - min(xs) + 2 * pad, max(ys) - min(ys) + 2 * pad


def build_views(spec: TopologySpec, mesh: CubeMesh, nodes: dict[str, Node], edges: list[Edge]) -> dict[str, View]:
    """Build all four views (the sip/cube/pe views show SIP 0, cube 0, PE 0)."""
    views = {}
    geo = spec.cube.geometry

    # ---- system: host, switch, one box per SIP
    boxes: dict[str, ViewNode] = {}
    for nid in (nm.HOST, nm.SWITCH):
        n = nodes[nid]
        boxes[nid] = ViewNode(nid, n.type, n.type, n.x_mm, n.y_mm, 12.0, 5.0)
    for s in range(spec.system.sips.count):
        members = [n for n in nodes.values() if nm.locate(n.id).sip == s]
        x, y, w, h = _bbox(members, 2.0)
        boxes[nm.sip_prefix(s)] = ViewNode(nm.sip_prefix(s), f"SIP {s}", "sip", x + w / 2, y + h / 2, w, h)

    def sys_owner(nid: str) -> str | None:
        if nid in (nm.HOST, nm.SWITCH):
            return nid
        s = nm.locate(nid).sip
        return nm.sip_prefix(s) if s is not None else None

    views["system"] = _project("system", f"{spec.name}: tray ({spec.system.sips.count} SIPs, "
                               f"{spec.system.sips.topology})", boxes, sys_owner, edges)

    # ---- sip: IO chiplet + cubes of SIP 0
    boxes = {}
    io_nodes = [n for n in nodes.values() if n.id.startswith("sip0.io0.")]
    x, y, w, h = _bbox(io_nodes, 1.0)
    boxes["sip0.io0"] = ViewNode("sip0.io0", "IO chiplet", "io", x + w / 2, y + h / 2, w, h)
    for c in range(spec.cubes_per_sip):
        routers = [nodes[nm.router(0, c, r, cc)] for r, cc in mesh.present]
        cx = sum(n.x_mm for n in routers) / len(routers)
        cy = sum(n.y_mm for n in routers) / len(routers)
        boxes[nm.cube_prefix(0, c)] = ViewNode(nm.cube_prefix(0, c), f"cube {c}", "cube", cx, cy,
                                               geo.w_mm, geo.h_mm)

    def sip_owner(nid: str) -> str | None:
        loc = nm.locate(nid)
        if loc.sip != 0:
            return None
        if loc.cube is None:
            return "sip0.io0"
        return nm.cube_prefix(0, loc.cube)

    views["sip"] = _project("sip", f"SIP 0: {spec.sip.cube_mesh.w}x{spec.sip.cube_mesh.h} cube mesh + IO chiplet",
                            boxes, sip_owner, edges)

    # ---- cube: routers, PEs, HBM controllers, SRAM, M_CPU, UCIe PHYs of cube 0
    boxes = {}
    prefix = nm.cube_prefix(0, 0) + "."
    pe_w = spec.pe.w_mm
    for n in nodes.values():
        if not n.id.startswith(prefix):
            continue
        loc = nm.locate(n.id)
        if n.type in nm.PE_BLOCKS:
            if n.type == "pe_scheduler":  # the PE box is centred on its middle block row
                pid = nm.pe_prefix(0, 0, loc.pe)
                dma = nodes[nm.pe_block(0, 0, loc.pe, "pe_dma")]
                boxes[pid] = ViewNode(pid, f"PE{loc.pe}", "pe", dma.x_mm, dma.y_mm, pe_w, pe_w)
            continue
        size = {"router": 0.8, "ucie_phy": 0.6, "hbm_ctrl": 1.0}.get(n.type, 1.4)
        label = {"router": "", "ucie_phy": ""}.get(n.type, loc.unit.replace("hbm_ctrl.", "hbm."))
        boxes[n.id] = ViewNode(n.id, label, n.type, n.x_mm, n.y_mm, size, size)

    def cube_owner(nid: str) -> str | None:
        if not nid.startswith(prefix):
            return None
        loc = nm.locate(nid)
        if loc.unit in nm.PE_BLOCKS:
            return nm.pe_prefix(0, 0, loc.pe)
        return nid

    views["cube"] = _project("cube", f"cube 0: {len(mesh.row_ys)}x{len(mesh.col_xs)} router grid, "
                             f"{spec.pes_per_cube} PEs, HBM zone rows {mesh.hbm_zone[0]}-{mesh.hbm_zone[1]}",
                             boxes, cube_owner, edges)

    # ---- pe: the nine blocks of PE 0
    boxes = {}
    step = spec.pe.w_mm / 3
    for block in nm.PE_BLOCKS:
        n = nodes[nm.pe_block(0, 0, 0, block)]
        boxes[n.id] = ViewNode(n.id, block, block, n.x_mm, n.y_mm, step * 0.8, step * 0.5)
    pe_prefix = nm.pe_prefix(0, 0, 0) + "."
    views["pe"] = _project("pe", "PE 0: nine blocks", boxes,
                           lambda nid: nid if nid.startswith(pe_prefix) else None, edges)
    return views
