"""Topology figures, drawn from the topology files (no simulation): the SIP, cube and PE views of the default
topology, and the logical SIP topologies of the all-reduce study."""

from __future__ import annotations

from pathlib import Path

from matplotlib.patches import FancyArrowPatch, Rectangle

from kernbench.ccl.neighbours import inter_sip
from kernbench.studies.figures.common import FigureSpec, new_figure, topology_color
from kernbench.studies.graphs import study_graph
from kernbench.topology import TopologyGraph
from kernbench.topology.sip_topologies import SHIPPED

COMMAND = "kernbench report"
DEFAULT = "topology.yaml"
SIP_FILES = tuple((t.name, f"6sip_2x3_{t.name}.yaml") for t in SHIPPED)
KIND_COLORS = {"cube": "#d9e7f5", "io": "#f5e3c8", "router": "#e0e0e0", "pe": "#cfe8cf", "hbm_ctrl": "#e8d5f0",
               "sram": "#f7d4c4", "m_cpu": "#f0ecc0", "ucie_phy": "#c8e6ef"}


def _draw_view(ax, graph: TopologyGraph, view_name: str, label_kinds: tuple[str, ...]) -> None:
    view = graph.views[view_name]
    pos = {n.id: (n.x_mm, n.y_mm) for n in view.nodes}
    widths = {}
    for e in view.edges:
        if e.src in pos and e.dst in pos and (e.dst, e.src) not in widths:
            widths[(e.src, e.dst)] = e.bw_gbs
    top = max(widths.values(), default=1.0)
    for (a, b), bw in sorted(widths.items()):
        (x0, y0), (x1, y1) = pos[a], pos[b]
        ax.plot([x0, x1], [y0, y1], color="0.35", linewidth=0.4 + 1.6 * bw / top, zorder=1)
    for n in view.nodes:
        ax.add_patch(Rectangle((n.x_mm - n.w_mm / 2, n.y_mm - n.h_mm / 2), n.w_mm, n.h_mm,
                               facecolor=KIND_COLORS.get(n.kind, "#eeeeee"), edgecolor="0.2", linewidth=0.5, zorder=2))
        if n.kind in label_kinds:
            ax.text(n.x_mm, n.y_mm, n.label, ha="center", va="center", fontsize=5.5, zorder=3)
    xs = [n.x_mm - n.w_mm / 2 for n in view.nodes] + [n.x_mm + n.w_mm / 2 for n in view.nodes]
    ys = [n.y_mm - n.h_mm / 2 for n in view.nodes] + [n.y_mm + n.h_mm / 2 for n in view.nodes]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(max(ys) + 1, min(ys) - 1)  # y grows downwards, as in the layout
    ax.set_aspect("equal")
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    ax.set_title(view.title, loc="left")


def draw_sip(topology_dir: Path):
    """SIP 0 of the default topology: its cube mesh and IO chiplet (line width ∝ link bandwidth)."""
    fig, ax = new_figure(4.6, 4.2)
    _draw_view(ax, study_graph(topology_dir, DEFAULT), "sip", ("cube", "io"))
    return fig


def draw_cube(topology_dir: Path):
    """Cube 0 of the default topology: routers, PEs, HBM controllers, SRAM, M_CPU and UCIe PHYs."""
    fig, ax = new_figure(4.6, 4.4)
    _draw_view(ax, study_graph(topology_dir, DEFAULT), "cube", ("pe", "sram", "m_cpu"))
    return fig


def draw_pe(topology_dir: Path):
    """PE 0: its nine blocks and the links between them."""
    fig, ax = new_figure(4.6, 3.4)
    _draw_view(ax, study_graph(topology_dir, DEFAULT), "pe",
               ("pe_cpu", "pe_dma", "pe_fetch_store", "pe_gemm", "pe_ipcq", "pe_math", "pe_mmu", "pe_scheduler",
                "pe_tcm"))
    return fig


def draw_sip_topologies(topology_dir: Path):
    """The inter-SIP links each 6-SIP file gives the all-reduce, with ranks placed on the SIP grid."""
    fig, axes = new_figure(6.4, 2.3, ncols=3)
    for ax, (name, file) in zip(axes, SIP_FILES, strict=True):
        spec = study_graph(topology_dir, file).spec
        world = spec.system.sips.count
        rows, cols = spec.system.sips.grid
        xy = {r: (r % cols, r // cols) for r in range(world)}
        table = inter_sip(spec, world, spec.system.sips.topology, cube=0)
        drawn = set()
        for (rank, _, _), links in sorted(table.items()):
            for (peer, _, _) in links.values():
                pair = (min(rank, peer), max(rank, peer))
                if pair in drawn:
                    continue
                drawn.add(pair)
                (x0, y0), (x1, y1) = xy[pair[0]], xy[pair[1]]
                adjacent = abs(x0 - x1) + abs(y0 - y1) == 1
                ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-", color=topology_color(name),
                                             linewidth=1.4, connectionstyle="arc3" if adjacent else "arc3,rad=0.35",
                                             shrinkA=9, shrinkB=9))
        for r, (x, y) in xy.items():
            ax.add_patch(Rectangle((x - 0.25, y - 0.2), 0.5, 0.4, facecolor="#d9e7f5", edgecolor="0.2",
                                   linewidth=0.6))
            ax.text(x, y, f"SIP {r}", ha="center", va="center", fontsize=6.5)
        ax.set_xlim(-0.6, cols - 0.4)
        ax.set_ylim(rows - 0.4, -0.6)
        ax.set_aspect("equal")
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.set_xlabel("SIP grid column")
        ax.set_ylabel("SIP grid row")
        ax.grid(False)
        ax.set_title(f"{name}: {len(drawn)} links", loc="left")
    fig.tight_layout()
    return fig


FIGURES = (
    FigureSpec("topology_sip", None,
               "One SIP of the default topology: the cube mesh and the IO chiplet that attaches it to the PCIe "
               "switch (line width proportional to link bandwidth).", COMMAND, draw_sip, 0.6),
    FigureSpec("topology_cube", None,
               "One cube: the router grid, the eight PEs, the per-PE HBM controllers, the shared SRAM, the "
               "management CPU and the UCIe PHYs.", COMMAND, draw_cube, 0.6),
    FigureSpec("topology_pe", None,
               "One PE: the nine blocks (CPU, scheduler, DMA, TCM, fetch/store, GEMM, math, MMU, IPCQ) and their "
               "links.", COMMAND, draw_pe, 0.6),
    FigureSpec("sip_topologies", None,
               "The logical inter-SIP links of the three all-reduce topologies on the 2×3 SIP grid. Every link is "
               "carried by the same physical path: SIP, IO chiplet, PCIe switch, IO chiplet, SIP.",
               COMMAND, draw_sip_topologies),
)
