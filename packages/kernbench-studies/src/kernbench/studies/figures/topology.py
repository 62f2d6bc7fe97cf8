"""Topology figures, drawn from the topology files (no simulation): the SIP, cube and PE views of the default
topology, and the logical SIP topologies of the all-reduce study."""

from __future__ import annotations

from pathlib import Path

from matplotlib.patches import FancyArrowPatch, PathPatch, Rectangle
from matplotlib.path import Path as MplPath

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


#: What a box kind is called in a figure's key.
KIND_NAMES = {"cube": "cube", "io": "IO chiplet", "router": "NoC router", "pe": "PE", "hbm_ctrl": "HBM controller",
              "sram": "shared SRAM", "m_cpu": "management CPU", "ucie_phy": "UCIe PHY"}
#: The PE's blocks by their short names, as the PE figure labels them.
PE_BLOCKS = {"pe_cpu": "CPU", "pe_scheduler": "sched-\nuler", "pe_dma": "DMA", "pe_tcm": "TCM",
             "pe_fetch_store": "fetch/\nstore", "pe_gemm": "GEMM", "pe_math": "math", "pe_mmu": "MMU",
             "pe_ipcq": "IPCQ"}
LABEL_PT = 7.5


def _draw_view(ax, graph: TopologyGraph, view_name: str, label_kinds: tuple[str, ...],
               names: dict[str, str] | None = None, floorplan: bool = True, key: bool = False) -> None:
    """Draw one view of ``graph``: boxes where the view puts them, links as lines (width ∝ bandwidth), the boxes of
    ``label_kinds`` labelled (``names`` renames labels). ``floorplan``: keep the millimetre axes (a floorplan);
    else a block diagram without axes. ``key``: a legend of the box colours, outside the drawing."""
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
            text = (names or {}).get(n.label, n.label)
            ax.text(n.x_mm, n.y_mm, text, ha="center", va="center", fontsize=LABEL_PT, zorder=3, linespacing=0.9)
    xs = [n.x_mm - n.w_mm / 2 for n in view.nodes] + [n.x_mm + n.w_mm / 2 for n in view.nodes]
    ys = [n.y_mm - n.h_mm / 2 for n in view.nodes] + [n.y_mm + n.h_mm / 2 for n in view.nodes]
    pad = 0.03 * max(max(xs) - min(xs), max(ys) - min(ys))
    ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.set_ylim(max(ys) + pad, min(ys) - pad)  # y grows downwards, as in the layout
    ax.set_aspect("equal")
    if floorplan:
        ax.set_xlabel("x (mm)")
        ax.set_ylabel("y (mm)")
    else:
        ax.set_axis_off()
    ax.grid(False)
    ax.set_title(view.title, loc="left")
    if key:
        kinds = list(dict.fromkeys(n.kind for n in view.nodes))
        handles = [Rectangle((0, 0), 1, 1, facecolor=KIND_COLORS.get(k, "#eeeeee"), edgecolor="0.2", linewidth=0.5)
                   for k in kinds]
        ax.legend(handles, [KIND_NAMES.get(k, k) for k in kinds], loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0, frameon=False, fontsize=LABEL_PT, title="box kind", title_fontsize=LABEL_PT)


def draw_sip(topology_dir: Path):
    """SIP 0 of the default topology: its cube mesh and IO chiplet (line width ∝ link bandwidth)."""
    fig, ax = new_figure(4.6, 4.2)
    _draw_view(ax, study_graph(topology_dir, DEFAULT), "sip", ("cube", "io"), names={"IO chiplet": "IO"})
    return fig


def draw_cube(topology_dir: Path):
    """Cube 0 of the default topology: routers, PEs, HBM controllers, SRAM, M_CPU and UCIe PHYs, with a key."""
    fig, ax = new_figure(5.6, 4.0)
    _draw_view(ax, study_graph(topology_dir, DEFAULT), "cube", ("pe",), key=True)
    return fig


def draw_pe(topology_dir: Path):
    """PE 0: its blocks and the links between them (a block diagram: positions, not distances)."""
    fig, ax = new_figure(4.0, 2.6)
    graph = study_graph(topology_dir, DEFAULT)
    _draw_view(ax, graph, "pe", tuple(PE_BLOCKS), names=PE_BLOCKS, floorplan=False)
    blocks = len({n.type for n in graph.nodes.values() if n.type in PE_BLOCKS})
    ax.set_title(f"PE 0: {blocks} blocks", loc="left")  # counted, not typed (the view's title spells it)
    return fig


def _detour(a: tuple[int, int], b: tuple[int, int], rows: int, cols: int, k: int) -> list[tuple[float, float]]:
    """A right-angled path between two SIPs in different rows and columns that crosses no other link: the first
    such link leaves ``a`` downwards into the gap below its row and runs along it to ``b``'s column; the next ones
    go round the outside of the grid, each a little further out."""
    (x0, y0), (x1, y1) = a, b
    if k == 0:
        gap = min(y0, y1) + 0.5
        return [(x0, y0 + (0.2 if y1 > y0 else -0.2)), (x0, gap), (x1, gap), (x1, y1 - (0.2 if y1 > y0 else -0.2))]
    out = 0.45 + 0.1 * k
    right, top, left = cols - 1 + out, -out, -out
    far, near = (a, b) if x0 > x1 else (b, a)  # leave the right-hand SIP to the right, round the top and the left
    return [(far[0] + 0.25, far[1]), (right, far[1]), (right, top), (left, top), (left, near[1]),
            (near[0] - 0.25, near[1])]


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
        detours = 0
        for (rank, _, _), links in sorted(table.items()):
            for (peer, _, _) in links.values():
                pair = (min(rank, peer), max(rank, peer))
                if pair in drawn:
                    continue
                drawn.add(pair)
                (x0, y0), (x1, y1) = xy[pair[0]], xy[pair[1]]
                color = topology_color(name)
                if abs(x0 - x1) + abs(y0 - y1) == 1:  # grid neighbours: a straight line
                    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-", color=color, linewidth=1.4,
                                                 shrinkA=9, shrinkB=9))
                elif y0 == y1 or x0 == x1:  # a wrap-around along a row or column: an arc bowing out of the grid
                    outward = -0.35 if (y0 == y1 and y0 == 0) or (x0 == x1 and x0 == cols - 1) else 0.35
                    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-", color=color, linewidth=1.4,
                                                 connectionstyle=f"arc3,rad={outward}", shrinkA=9, shrinkB=9))
                else:  # between rows and columns: right-angled, through a gap or around the grid, never crossing
                    ax.add_patch(PathPatch(MplPath(_detour((x0, y0), (x1, y1), rows, cols, detours)), fill=False,
                                           edgecolor=color, linewidth=1.4, joinstyle="round"))
                    detours += 1
        for r, (x, y) in xy.items():
            ax.add_patch(Rectangle((x - 0.25, y - 0.2), 0.5, 0.4, facecolor="#d9e7f5", edgecolor="0.2",
                                   linewidth=0.6))
            ax.text(x, y, f"SIP {r}", ha="center", va="center", fontsize=6.5)
        ax.set_xlim(-0.75, cols - 0.25)
        ax.set_ylim(rows - 0.4, -0.75)
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
               "One cube: the router grid, the PEs, the per-PE HBM controllers, the shared SRAM, the "
               "management CPU and the UCIe PHYs (box colours in the key). The PEs are numbered corner by corner "
               "(north-west, north-east, south-west, south-east), each pair from its corner inwards, as the "
               "topology's PE layout places them, which gives each row its unusual order.", COMMAND, draw_cube, 0.75),
    FigureSpec("topology_pe", None,
               "One PE as a block diagram: its blocks (CPU, scheduler, DMA, TCM, fetch/store, GEMM, math, MMU, "
               "IPCQ) and their links, line width proportional to link bandwidth.", COMMAND, draw_pe, 0.45),
    FigureSpec("sip_topologies", None,
               "The logical inter-SIP links of the all-reduce topologies on the 2×3 SIP grid (the ring's links "
               "between rows drawn round the grid, so that no links cross). Every link is carried by the "
               "same physical path: SIP, IO chiplet, PCIe switch, IO chiplet, SIP.",
               COMMAND, draw_sip_topologies),
)
