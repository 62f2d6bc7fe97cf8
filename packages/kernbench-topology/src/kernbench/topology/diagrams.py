"""SVG diagrams of the four view projections of a compiled topology.

Every box and every link is drawn where the view puts it: box centres and
sizes are the view's millimetre coordinates (x right, y down), links join box
centres. Nothing is placed by hand; the only layout decisions made here are
derived from that geometry (a link that would run straight through an
unrelated box is drawn as a gentle curve, and a box that holds other boxes
carries its label along its top edge instead of its centre).

Rendering uses matplotlib's object API (``Figure`` + the SVG canvas), never
pyplot's global state, so it is safe to call from any thread or backend.
Output is deterministic: the same graph gives byte-identical files.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernbench.topology.errors import SpecError
from kernbench.topology.graph import TopologyGraph, View, ViewEdge, ViewNode
from matplotlib import rc_context
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path as MplPath

__all__ = ["emit_diagrams", "render_view"]

# Fill colours per ViewNode.kind; unknown kinds get a stable colour from _FALLBACK.
_KIND_COLOURS = {
    "host_cpu": "#f4cccc", "switch": "#fce5cd", "sip": "#eef3fb", "io": "#d9ead3", "cube": "#dde7f6",
    "router": "#7f7f7f", "pe": "#fff2cc", "hbm_ctrl": "#c9daf8", "ucie_phy": "#b4a7d6",
    "m_cpu": "#f4cccc", "sram": "#d0e0e3",
    "pe_cpu": "#f4cccc", "pe_scheduler": "#fce5cd", "pe_dma": "#c9daf8", "pe_fetch_store": "#d0e0e3",
    "pe_gemm": "#d9ead3", "pe_math": "#b6d7a8", "pe_tcm": "#fff2cc", "pe_mmu": "#ead1dc",
    "pe_ipcq": "#d9d2e9",
}
_FALLBACK = ("#e6b8af", "#f9cb9c", "#ffe599", "#b6d7a8", "#a2c4c9", "#9fc5e8", "#b4a7d6", "#d5a6bd")

_MESH_KINDS = ("router",)   # links between two boxes of these kinds are "mesh" links (labelled sparsely)
_FIG_LONG_IN = 11.0         # the longer side of the drawing area, inches
_FIG_SHORT_MIN_IN = 4.0     # the shorter side never drops below this, inches
_NODE_FONT_PT = 9.0
_EDGE_FONT_PT = 7.0
_CURVE_RADS = (0.18, -0.18, 0.32, -0.32, 0.5, -0.5)  # tried in order for links that cross a box
_LINK_STYLE = {"color": "#202020", "linewidth": 1.0, "zorder": 0.5}
_LABEL_BOX = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}


def _colour(kind: str) -> str:
    if kind in _KIND_COLOURS:
        return _KIND_COLOURS[kind]
    return _FALLBACK[zlib.crc32(kind.encode()) % len(_FALLBACK)]


def _fmt_mm(d: float) -> str:
    return f"{d:.2f} mm" if 0 < d < 1 else f"{d:.1f} mm"


def _fmt_bw(bw: float) -> str:
    return f"{bw:.4g}"


@dataclass(frozen=True)
class _Link:
    """One undirected drawn link: the pair a→b (and b→a when present) of a view."""

    a: str
    b: str
    distance_mm: float
    bw_ab: float
    bw_ba: float | None
    count: int

    def label(self) -> str:
        bw = _fmt_bw(self.bw_ab)
        if self.bw_ba is not None and self.bw_ba != self.bw_ab:
            bw += f"/{_fmt_bw(self.bw_ba)}"  # a→b / b→a
        text = f"{_fmt_mm(self.distance_mm)} · {bw} GB/s"
        return text + (f" ×{self.count}" if self.count > 1 else "")


def _pair_links(edges: Iterable[ViewEdge]) -> list[_Link]:
    """Merge each a→b with its b→a into one link, keeping first-seen order."""
    by_pair: dict[tuple[str, str], ViewEdge] = {}
    order: list[tuple[str, str]] = []
    for e in edges:
        if (e.src, e.dst) not in by_pair:
            by_pair[(e.src, e.dst)] = e
            if (e.dst, e.src) not in by_pair:
                order.append((e.src, e.dst))
    links = []
    for a, b in order:
        fwd, back = by_pair[(a, b)], by_pair.get((b, a))
        links.append(_Link(a, b, fwd.distance_mm, fwd.bw_gbs, back.bw_gbs if back else None,
                           max(fwd.count, back.count if back else 0)))
    return links


def _contains(n: ViewNode, x: float, y: float, shrink: float = 0.0) -> bool:
    return abs(x - n.x_mm) < n.w_mm / 2 - shrink and abs(y - n.y_mm) < n.h_mm / 2 - shrink


def _bezier(p0: tuple[float, float], p2: tuple[float, float], rad: float) -> tuple[float, float]:
    """Control point of a quadratic curve bowing ``rad`` × length to the left of p0→p2."""
    mx, my = (p0[0] + p2[0]) / 2, (p0[1] + p2[1]) / 2
    dx, dy = p2[0] - p0[0], p2[1] - p0[1]
    return mx - rad * dy, my + rad * dx


def _curve_point(p0, c, p2, t: float) -> tuple[float, float]:
    u = 1 - t
    return (u * u * p0[0] + 2 * u * t * c[0] + t * t * p2[0], u * u * p0[1] + 2 * u * t * c[1] + t * t * p2[1])


def _route(link: _Link, nodes: dict[str, ViewNode]) -> tuple[float, float] | None:
    """Return a curve control point if the straight link would cross an unrelated box, else None."""
    na, nb = nodes[link.a], nodes[link.b]
    p0, p2 = (na.x_mm, na.y_mm), (nb.x_mm, nb.y_mm)
    if p0 == p2:
        return None
    # Boxes holding either end (e.g. a PE box around its router) are the link's own surroundings.
    obstacles = [n for n in nodes.values() if n.id not in (link.a, link.b)
                 and not _contains(n, *p0) and not _contains(n, *p2)]
    ts = [i / 24 for i in range(1, 24)]

    def hits(c: tuple[float, float]) -> bool:
        pts = [_curve_point(p0, c, p2, t) for t in ts]
        return any(_contains(n, x, y, shrink=-0.02 * min(n.w_mm, n.h_mm)) for n in obstacles for x, y in pts)

    straight = ((p0[0] + p2[0]) / 2, (p0[1] + p2[1]) / 2)
    if not hits(straight):
        return None
    for rad in _CURVE_RADS:
        c = _bezier(p0, p2, rad)
        if not hits(c):
            return c
    return _bezier(p0, p2, _CURVE_RADS[0])


def _extent(view: View) -> tuple[float, float, float, float]:
    x0 = min(n.x_mm - n.w_mm / 2 for n in view.nodes)
    x1 = max(n.x_mm + n.w_mm / 2 for n in view.nodes)
    y0 = min(n.y_mm - n.h_mm / 2 for n in view.nodes)
    y1 = max(n.y_mm + n.h_mm / 2 for n in view.nodes)
    pad = 0.06 * max(x1 - x0, y1 - y0, 1e-6)
    return x0 - pad, x1 + pad, y0 - pad, y1 + pad


def render_view(view: View) -> Figure:
    """Draw one view into a new matplotlib :class:`Figure` (SVG canvas attached).

    Boxes are the view's nodes at their centre (``x_mm``, ``y_mm``) with size
    ``w_mm`` × ``h_mm``, coloured by ``kind`` and labelled with ``label``; the
    axes are in millimetres with y growing downward. Each link joins two box
    centres and is labelled "<distance> mm · <bandwidth> GB/s" (×N when N
    parallel edges were merged; "a/b GB/s" when the two directions differ).
    Links between two routers are labelled once per distinct (distance,
    bandwidth); every other link carries its own label.
    """
    if not view.nodes:
        raise SpecError(f"view {view.name!r} has no boxes to draw")
    nodes = {n.id: n for n in view.nodes}
    x0, x1, y0, y1 = _extent(view)
    span_x, span_y = x1 - x0, y1 - y0
    if span_x >= span_y:
        w_in, h_in = _FIG_LONG_IN, max(_FIG_SHORT_MIN_IN, _FIG_LONG_IN * span_y / span_x)
    else:
        w_in, h_in = max(_FIG_SHORT_MIN_IN, _FIG_LONG_IN * span_x / span_y), _FIG_LONG_IN
    legend_in = 2.2
    fig = Figure(figsize=(w_in + legend_in, h_in + 0.7))
    FigureCanvasSVG(fig)
    ax = fig.add_axes((0.04, 0.03, w_in / (w_in + legend_in) - 0.05, h_in / (h_in + 0.7) - 0.02))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)  # y grows downward
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("x (mm)", fontsize=8)
    ax.set_ylabel("y (mm)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(view.title, fontsize=12)

    # Boxes: bigger ones underneath, so a router stays visible on top of its PE.
    by_area = sorted(view.nodes, key=lambda n: -n.w_mm * n.h_mm)
    area_rank = {n.id: i for i, n in enumerate(by_area)}
    for n in by_area:
        z = 1 + area_rank[n.id] * 0.01
        ax.add_patch(Rectangle((n.x_mm - n.w_mm / 2, n.y_mm - n.h_mm / 2), n.w_mm, n.h_mm,
                               facecolor=_colour(n.kind), edgecolor="#404040", linewidth=0.8, zorder=z))
        if not n.label:
            continue
        holds_other = any(o.id != n.id and o.w_mm * o.h_mm < n.w_mm * n.h_mm and _contains(n, o.x_mm, o.y_mm)
                          for o in view.nodes)
        if holds_other:  # label along the top edge, clear of the boxes inside
            ax.text(n.x_mm, n.y_mm - n.h_mm / 2 + 0.04 * n.h_mm, n.label, ha="center", va="top",
                    fontsize=_NODE_FONT_PT, fontweight="bold", zorder=5)
        else:
            ax.text(n.x_mm, n.y_mm, n.label, ha="center", va="center", fontsize=_NODE_FONT_PT, zorder=5)

    # Links, each undirected pair once; drawn under the boxes so only the part between boxes shows.
    labelled_mesh: set[tuple[float, float, float | None]] = set()
    for link in _pair_links(view.edges):
        na, nb = nodes[link.a], nodes[link.b]
        p0, p2 = (na.x_mm, na.y_mm), (nb.x_mm, nb.y_mm)
        ctrl = _route(link, nodes)
        if ctrl is None:
            ax.add_line(Line2D([p0[0], p2[0]], [p0[1], p2[1]], **_LINK_STYLE))
            mid = ((p0[0] + p2[0]) / 2, (p0[1] + p2[1]) / 2)
        else:
            ax.add_patch(PathPatch(MplPath([p0, ctrl, p2], [MplPath.MOVETO, MplPath.CURVE3, MplPath.CURVE3]),
                                   fill=False, edgecolor=_LINK_STYLE["color"],
                                   linewidth=_LINK_STYLE["linewidth"], zorder=_LINK_STYLE["zorder"]))
            mid = _curve_point(p0, ctrl, p2, 0.5)
        if na.kind in _MESH_KINDS and nb.kind in _MESH_KINDS:
            key = (round(link.distance_mm, 6), link.bw_ab, link.bw_ba)
            if key in labelled_mesh:
                continue
            labelled_mesh.add(key)
        if p0 == p2:  # zero-length link: label just below the smaller box at that point
            small = na if na.w_mm * na.h_mm <= nb.w_mm * nb.h_mm else nb
            ax.text(small.x_mm, small.y_mm + small.h_mm / 2 + 0.02 * span_y, link.label(), ha="center",
                    va="top", fontsize=_EDGE_FONT_PT, zorder=6, bbox=_LABEL_BOX)
            continue
        ang = math.degrees(math.atan2(-(p2[1] - p0[1]), p2[0] - p0[0]))  # screen angle (y axis inverted)
        if ang > 90:
            ang -= 180
        elif ang <= -90:
            ang += 180
        rot = ang if abs(ang) > 60 else 0.0  # steep links get text along them, others stay horizontal
        ax.text(mid[0], mid[1], link.label(), ha="center", va="center", rotation=rot, rotation_mode="anchor",
                fontsize=_EDGE_FONT_PT, zorder=6, bbox=_LABEL_BOX)

    kinds = list(dict.fromkeys(n.kind for n in view.nodes))
    handles = [Rectangle((0, 0), 1, 1, facecolor=_colour(k), edgecolor="#404040", linewidth=0.8) for k in kinds]
    fig.legend(handles, kinds, loc="upper right", fontsize=8, title="box kind", title_fontsize=8,
               frameon=False, bbox_to_anchor=(0.995, 0.96))
    return fig


def emit_diagrams(graph: TopologyGraph, out_dir: str | Path, views: Iterable[str] | None = None) -> list[Path]:
    """Write one SVG diagram per view of ``graph`` into ``out_dir``; return the paths written.

    ``views`` names the views to draw ("system", "sip", "cube", "pe"; default
    ``graph.spec.emit_views``); each goes to ``{out_dir}/{view}.svg``. A
    diagram draws every box of the view as a rectangle at its centre position
    with its size, both in millimetres exactly as the view gives them (x to
    the right, y downward), coloured by box kind and labelled; and every link
    as a line between box centres labelled with its length (mm) and bandwidth
    (GB/s), "×N" when N parallel edges were merged. Opposite directed edges
    are drawn and labelled once. Router-to-router mesh links are labelled once
    per distinct (length, bandwidth); every other link has its own label.
    Files are byte-identical across runs for the same graph.

    Raises :class:`SpecError` for an unknown view name (listing the valid ones).
    """
    if views is None:
        names = list(graph.spec.emit_views)
    elif isinstance(views, str):
        names = [views]
    else:
        names = list(views)
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in graph.views]
    if unknown:
        raise SpecError(f"unknown diagram view(s) {', '.join(repr(n) for n in unknown)}; "
                        f"valid views are: {', '.join(graph.views)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with rc_context({"svg.hashsalt": "kernbench-diagrams", "svg.fonttype": "none", "font.family": "DejaVu Sans"}):
        for name in names:
            fig = render_view(graph.views[name])
            path = out / f"{name}.svg"
            fig.savefig(path, format="svg", metadata={"Date": None})
            written.append(path)
    return written
