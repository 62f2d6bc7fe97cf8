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

matplotlib is the optional ``draw`` extra of ``kernbench-topology`` (the
compiler alone does not need it): it is imported only when something is
drawn, and :func:`require_matplotlib` turns its absence into a one-line
:class:`DrawingUnavailableError` naming the extra to install.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from kernbench.topology.errors import KernbenchError, SpecError
from kernbench.topology.graph import TopologyGraph, View, ViewEdge, ViewNode

if TYPE_CHECKING:  # matplotlib is imported on first use, so `import kernbench.topology` stays fast
    from matplotlib.figure import Figure

__all__ = ["DRAW_EXTRA", "DrawingUnavailableError", "box_colour", "emit_diagrams", "render_view",
           "require_matplotlib"]

#: What to install for diagrams and heatmaps: the extra that brings matplotlib.
DRAW_EXTRA = "kernbench-topology[draw]"


class DrawingUnavailableError(KernbenchError):
    """A diagram or heatmap was asked for, but matplotlib (the ``draw`` extra) is not installed."""


def require_matplotlib() -> None:
    """Return quietly when matplotlib can be imported; otherwise raise :class:`DrawingUnavailableError` saying
    which extra to install. Every drawing entry point calls it before its first matplotlib import."""
    try:
        import matplotlib  # noqa: F401  (imported for its presence only)
    except ImportError:
        raise DrawingUnavailableError(
            f"drawing diagrams and heatmaps needs matplotlib, which is not installed; install it with "
            f"pip install '{DRAW_EXTRA}' (the kernbench command and kernbench-benches bring it)") from None

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
_FIG_LONG_MIN_IN = 8.0      # the longer side of the drawing area, inches, at least ...
_FIG_LONG_MAX_IN = 16.0     # ... and at most
_FIG_SHORT_MIN_IN = 4.0     # the shorter side never drops below this, inches
_NODE_FONT_PT = 9.0
_EDGE_FONT_PT = 7.0
_CURVE_RADS = (0.18, -0.18, 0.32, -0.32, 0.5, -0.5)  # tried in order for links that cross a box
_LABEL_TS = (0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74, 0.18, 0.82)  # spots along a link tried for its label
_LINK_STYLE = {"color": "#202020", "linewidth": 1.0, "zorder": 0.5}
_LABEL_BOX = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}


def _colour(kind: str) -> str:
    if kind in _KIND_COLOURS:
        return _KIND_COLOURS[kind]
    return _FALLBACK[zlib.crc32(kind.encode()) % len(_FALLBACK)]


def box_colour(kind: str) -> str:
    """The fill colour the diagrams give a box of this kind (hex; a stable fallback for unknown kinds)."""
    return _colour(kind)


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


def _contains(n: ViewNode, x: float, y: float) -> bool:
    return abs(x - n.x_mm) < n.w_mm / 2 and abs(y - n.y_mm) < n.h_mm / 2


def _bezier(p0: tuple[float, float], p2: tuple[float, float], rad: float) -> tuple[float, float]:
    """Control point of a quadratic curve bowing sideways by ``rad`` × the p0→p2 length (sign picks the side)."""
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
    ts = [i / 48 for i in range(1, 48)]

    def hits(c: tuple[float, float]) -> int:
        pts = [_curve_point(p0, c, p2, t) for t in ts]
        return sum(1 for n in obstacles for x, y in pts if _contains(n, x, y))

    best_hits, best = hits(((p0[0] + p2[0]) / 2, (p0[1] + p2[1]) / 2)), None
    for rad in _CURVE_RADS:
        if best_hits == 0:
            break
        c = _bezier(p0, p2, rad)
        h = hits(c)
        if h < best_hits:
            best_hits, best = h, c
    return best


def _extent(view: View) -> tuple[float, float, float, float]:
    x0 = min(n.x_mm - n.w_mm / 2 for n in view.nodes)
    x1 = max(n.x_mm + n.w_mm / 2 for n in view.nodes)
    y0 = min(n.y_mm - n.h_mm / 2 for n in view.nodes)
    y1 = max(n.y_mm + n.h_mm / 2 for n in view.nodes)
    pad = 0.06 * max(x1 - x0, y1 - y0, 1e-6)
    return x0 - pad, x1 + pad, y0 - pad, y1 + pad


Rect = tuple[float, float, float, float]  # x0, y0, x1, y1 in mm


def _box(n: ViewNode) -> Rect:
    return n.x_mm - n.w_mm / 2, n.y_mm - n.h_mm / 2, n.x_mm + n.w_mm / 2, n.y_mm + n.h_mm / 2


def _overlap(a: Rect, b: Rect) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _seg_hits(p: tuple[float, float], q: tuple[float, float], r: Rect) -> bool:
    """Whether segment p–q meets rectangle r (Liang–Barsky clipping)."""
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for den, num in ((-dx, p[0] - r[0]), (dx, r[2] - p[0]), (-dy, p[1] - r[1]), (dy, r[3] - p[1])):
        if den == 0:
            if num < 0:
                return False
        else:
            t = num / den
            if den < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
            if t0 > t1:
                return False
    return True


class _Placer:
    """Greedy label placement: each label takes the cheapest of its candidate spots.

    Cost counts overlap with labels already placed, with boxes the label does
    not belong to, with links other than its own, and spill outside the plot.
    Sizes are estimated from the font size and the plot's points-per-mm.
    """

    def __init__(self, nodes: dict[str, ViewNode], polylines: list[list[tuple[float, float]]],
                 limits: Rect, pt_per_mm: float) -> None:
        self.nodes = nodes
        self.boxes = {nid: _box(n) for nid, n in nodes.items()}
        self.polylines = polylines
        self.limits = limits
        self.pt_per_mm = pt_per_mm
        self.placed: list[Rect] = []

    def size(self, text: str, font_pt: float, vertical: bool) -> tuple[float, float]:
        w = (0.6 * len(text) + 0.3) * font_pt / self.pt_per_mm
        h = 1.4 * font_pt / self.pt_per_mm
        return (h, w) if vertical else (w, h)

    def cost(self, r: Rect, own: set[str], own_link: int | None) -> float:
        area = max((r[2] - r[0]) * (r[3] - r[1]), 1e-12)
        c = sum(100.0 * _overlap(r, p) for p in self.placed) / area
        for nid, b in self.boxes.items():
            ov = _overlap(r, b)
            if ov:
                weight = 0.5 if nid in own else (20.0 if self.nodes[nid].label else 6.0)
                c += weight * ov / area
        for i, line in enumerate(self.polylines):
            if i != own_link and any(_seg_hits(p, q, r) for p, q in pairwise(line)):
                c += 4.0
        lx0, ly0, lx1, ly1 = self.limits
        inside = max(0.0, min(r[2], lx1) - max(r[0], lx0)) * max(0.0, min(r[3], ly1) - max(r[1], ly0))
        return c + 50.0 * (1 - inside / area)

    def place(self, candidates: list[tuple[float, float, float, float, float]], own: set[str],
              own_link: int | None = None) -> int:
        """Pick the cheapest candidate (x, y, w, h, penalty) centred at (x, y); record it, return its index."""
        best: tuple[float, int, Rect] | None = None
        for k, (x, y, w, h, penalty) in enumerate(candidates):
            r = (x - w / 2, y - h / 2, x + w / 2, y + h / 2)
            c = self.cost(r, own, own_link) + penalty
            if best is None or c < best[0]:
                best = (c, k, r)
        assert best is not None
        self.placed.append(best[2])
        return best[1]


def _containers(nodes: dict[str, ViewNode]) -> dict[str, set[str]]:
    """For each box id, the ids of larger boxes that hold its centre."""
    out: dict[str, set[str]] = {nid: set() for nid in nodes}
    for n in nodes.values():
        for o in nodes.values():
            if o.id != n.id and o.w_mm * o.h_mm > n.w_mm * n.h_mm and _contains(o, n.x_mm, n.y_mm):
                out[n.id].add(o.id)
    return out


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
    require_matplotlib()
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle
    from matplotlib.path import Path as MplPath

    if not view.nodes:
        raise SpecError(f"view {view.name!r} has no boxes to draw")
    nodes = {n.id: n for n in view.nodes}
    inside_of = _containers(nodes)
    holders = {c for cs in inside_of.values() for c in cs}
    links = _pair_links(view.edges)

    # Which links carry a label: mesh links once per distinct (length, bandwidth), all others always.
    seen_mesh: set[tuple[float, float, float | None]] = set()
    labelled: list[bool] = []
    for link in links:
        if nodes[link.a].kind in _MESH_KINDS and nodes[link.b].kind in _MESH_KINDS:
            key = (round(link.distance_mm, 6), link.bw_ab, link.bw_ba)
            labelled.append(key not in seen_mesh)
            seen_mesh.add(key)
        else:
            labelled.append(True)

    # Figure size grows with the number of labels so dense views keep their text apart.
    x0, x1, y0, y1 = _extent(view)
    span_x, span_y = x1 - x0, y1 - y0
    n_labels = sum(labelled) + sum(1 for n in view.nodes if n.label)
    long_in = min(_FIG_LONG_MAX_IN, max(_FIG_LONG_MIN_IN, 2.4 * math.sqrt(n_labels)))
    if span_x >= span_y:
        w_in, h_in = long_in, max(_FIG_SHORT_MIN_IN, long_in * span_y / span_x)
    else:
        w_in, h_in = max(_FIG_SHORT_MIN_IN, long_in * span_x / span_y), long_in
    margin_l, margin_b, margin_t, legend_in = 0.7, 0.6, 0.6, 1.9
    fig_w, fig_h = margin_l + w_in + legend_in, margin_b + h_in + margin_t
    fig = Figure(figsize=(fig_w, fig_h))
    FigureCanvasSVG(fig)
    ax = fig.add_axes((margin_l / fig_w, margin_b / fig_h, w_in / fig_w, h_in / fig_h))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)  # y grows downward
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("x (mm)", fontsize=8)
    ax.set_ylabel("y (mm)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(view.title, fontsize=12)
    pt_per_mm = 72.0 * min(w_in / span_x, h_in / span_y)

    # Boxes: bigger ones underneath, so a router stays visible on top of its PE.
    for rank, n in enumerate(sorted(view.nodes, key=lambda n: (-n.w_mm * n.h_mm, n.id))):
        ax.add_patch(Rectangle((n.x_mm - n.w_mm / 2, n.y_mm - n.h_mm / 2), n.w_mm, n.h_mm,
                               facecolor=_colour(n.kind), edgecolor="#404040", linewidth=0.8,
                               zorder=1 + rank * 1e-3))

    # Links, each undirected pair once; drawn under the boxes so only the part between boxes shows.
    polylines: list[list[tuple[float, float]]] = []
    ctrls: list[tuple[float, float] | None] = []
    for link in links:
        p0, p2 = (nodes[link.a].x_mm, nodes[link.a].y_mm), (nodes[link.b].x_mm, nodes[link.b].y_mm)
        ctrl = _route(link, nodes)
        ctrls.append(ctrl)
        if ctrl is None:
            ax.add_line(Line2D([p0[0], p2[0]], [p0[1], p2[1]], **_LINK_STYLE))
            polylines.append([p0, p2])
        else:
            ax.add_patch(PathPatch(MplPath([p0, ctrl, p2], [MplPath.MOVETO, MplPath.CURVE3, MplPath.CURVE3]),
                                   fill=False, edgecolor=_LINK_STYLE["color"],
                                   linewidth=_LINK_STYLE["linewidth"], zorder=_LINK_STYLE["zorder"]))
            polylines.append([_curve_point(p0, ctrl, p2, i / 16) for i in range(17)])

    placer = _Placer(nodes, polylines, (x0, y0, x1, y1), pt_per_mm)

    # Box labels: centred on plain boxes; on a box holding others, at the free-est spot along its edges.
    for n in sorted(view.nodes, key=lambda n: n.id in holders):
        if not n.label:
            continue
        w, h = placer.size(n.label, _NODE_FONT_PT, False)
        if n.id not in holders:
            placer.place([(n.x_mm, n.y_mm, w, h, 0.0)], {n.id})
            ax.text(n.x_mm, n.y_mm, n.label, ha="center", va="center", fontsize=_NODE_FONT_PT, zorder=5)
            continue
        mx, my = 0.04 * n.w_mm + w / 2, 0.04 * n.h_mm + h / 2
        left, right = n.x_mm - n.w_mm / 2 + mx, n.x_mm + n.w_mm / 2 - mx
        top, bottom = n.y_mm - n.h_mm / 2 + my, n.y_mm + n.h_mm / 2 - my
        spots = [(n.x_mm, top), (left, top), (right, top), (n.x_mm, bottom), (left, bottom), (right, bottom)]
        k = placer.place([(sx, sy, w, h, 0.05 * i) for i, (sx, sy) in enumerate(spots)], {n.id})
        ax.text(*spots[k], n.label, ha="center", va="center", fontsize=_NODE_FONT_PT, fontweight="bold", zorder=5)

    # Link labels: along the link (or just beside it), preferring its middle and the stretch between boxes.
    for i, link in enumerate(links):
        if not labelled[i]:
            continue
        na, nb = nodes[link.a], nodes[link.b]
        own = {link.a, link.b} | inside_of[link.a] | inside_of[link.b]
        text = link.label()
        line = polylines[i]
        (ax_, ay_), (bx_, by_) = line[0], line[-1]
        w, h = placer.size(text, _EDGE_FONT_PT, False)
        gap = 0.15 * h
        cands: list[tuple[float, float, float, float, float]] = []
        rots: list[int] = []
        if (ax_, ay_) == (bx_, by_):  # zero length: beside the smaller box at that point
            s = na if na.w_mm * na.h_mm <= nb.w_mm * nb.h_mm else nb
            spots = [(s.x_mm, s.y_mm + s.h_mm / 2 + gap + h / 2), (s.x_mm, s.y_mm - s.h_mm / 2 - gap - h / 2),
                     (s.x_mm + s.w_mm / 2 + gap + w / 2, s.y_mm), (s.x_mm - s.w_mm / 2 - gap - w / 2, s.y_mm)]
            cands = [(sx, sy, w, h, 0.05 * k) for k, (sx, sy) in enumerate(spots)]
            rots = [0] * len(cands)
        else:
            vertical = abs(bx_ - ax_) < 0.25 * abs(by_ - ay_)
            horizontal = abs(by_ - ay_) < 0.25 * abs(bx_ - ax_)
            for k, t in enumerate(_LABEL_TS):
                if ctrls[i] is None:
                    px, py = ax_ + t * (bx_ - ax_), ay_ + t * (by_ - ay_)
                else:
                    px, py = _curve_point(line[0], ctrls[i], line[-1], t)
                pen = 0.02 * k
                if vertical:  # text along the link, else level text to either side of it
                    cands += [(px, py, h, w, pen), (px + w / 2 + gap, py, w, h, 0.3 + pen),
                              (px - w / 2 - gap, py, w, h, 0.3 + pen)]
                    rots += [90, 0, 0]
                elif horizontal:  # on the link, else just above or below it
                    cands += [(px, py, w, h, pen), (px, py - h / 2 - gap, w, h, 0.3 + pen),
                              (px, py + h / 2 + gap, w, h, 0.3 + pen)]
                    rots += [0, 0, 0]
                else:
                    cands.append((px, py, w, h, pen))
                    rots.append(0)
        k = placer.place(cands, own, i)
        ax.text(cands[k][0], cands[k][1], text, ha="center", va="center", rotation=rots[k],
                fontsize=_EDGE_FONT_PT, zorder=6, bbox=_LABEL_BOX)

    kinds = list(dict.fromkeys(n.kind for n in view.nodes))
    handles = [Rectangle((0, 0), 1, 1, facecolor=_colour(k), edgecolor="#404040", linewidth=0.8) for k in kinds]
    fig.legend(handles, kinds, loc="upper left", fontsize=8, title="box kind", title_fontsize=8, frameon=False,
               bbox_to_anchor=((margin_l + w_in + 0.15) / fig_w, 1 - margin_t / fig_h))
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

    Raises :class:`SpecError` for an unknown view name (listing the valid ones) and
    :class:`DrawingUnavailableError` when matplotlib is not installed.
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
    require_matplotlib()
    from matplotlib import rc_context

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
