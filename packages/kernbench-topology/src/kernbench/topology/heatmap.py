"""Link heatmaps: a cube, a SIP or the whole tray with every directed link coloured by a per-link value.

The value is a link's utilisation (busy time over the run window, 0..1) from
a run's links file (:mod:`kernbench.sim.links`), but this module knows only
``{(src, dst): value}``. Every link is drawn at the real node positions of
the compiled graph (mm, x right, y down); the two directions of a pair are
drawn side by side, each shifted to its own right, so ``a → b`` and
``b → a`` keep their own colour. Colours run through :data:`LINK_COLOURS`
from 0 to the busiest link of the run (the colour bar says so, in percent
of the run window); idle links are light grey. ``command`` links are not
drawn: they carry the control sideband, which occupies no bandwidth in the
fabric model, so their utilisation is always 0.

The same colour scale is used by the ``kernbench web`` viewer
(:func:`link_colour`). Rendering uses matplotlib's object API (no pyplot),
imported on first use; SVG output is deterministic. matplotlib comes with the
``draw`` extra of ``kernbench-topology``; without it the drawing functions
raise :class:`~kernbench.topology.diagrams.DrawingUnavailableError` naming that
extra, while :func:`link_colour` and the constants need nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernbench.topology import naming as nm
from kernbench.topology.diagrams import require_matplotlib
from kernbench.topology.errors import KernbenchError
from kernbench.topology.graph import Edge, TopologyGraph

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Colour stops of the utilisation scale, evenly spaced from 0 to the scale's maximum (matplotlib's YlOrRd
#: sampled from 0.15 to 1.0, so the lowest non-zero value stays visible on white).
LINK_COLOURS = ("#ffe998", "#fed36f", "#fead4a", "#fd863a", "#fa4a29", "#e1191d", "#bb0026", "#800026")
#: Colour of a link that carried nothing (utilisation exactly 0).
IDLE_COLOUR = "#c8c8c8"
#: Edge kinds never drawn: the control sideband (0 bytes by the fabric model).
HIDDEN_KINDS = frozenset({"command"})
SCOPES = ("auto", "system", "sip", "cube")

_STYLE = {  # scope -> (idle width, least used width, busiest width) in pt; direction offset as a share of extent
    "cube": (0.5, 1.0, 3.6, 0.004),
    "sip": (0.25, 0.5, 2.2, 0.0035),
    "system": (0.15, 0.35, 1.5, 0.003),
}


class HeatmapError(KernbenchError):
    """A heatmap cannot be drawn: unknown scope, a SIP or cube that does not exist, links the graph lacks."""


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def link_colour(value: float, vmax: float) -> str:
    """The hex colour of ``value`` on the scale ``[0, vmax]``: piecewise linear through :data:`LINK_COLOURS`,
    :data:`IDLE_COLOUR` for 0, the last stop at or above ``vmax``."""
    if value <= 0:
        return IDLE_COLOUR
    t = min(value / vmax, 1.0) if vmax > 0 else 1.0
    pos = t * (len(LINK_COLOURS) - 1)
    i = min(int(pos), len(LINK_COLOURS) - 2)
    f = pos - i
    a, b = _rgb(LINK_COLOURS[i]), _rgb(LINK_COLOURS[i + 1])
    # floor(v + 0.5), not round(): the viewer's JavaScript rounds halves up, Python's round() to even
    return "#" + "".join(f"{math.floor(x + (y - x) * f + 0.5):02x}" for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class HeatmapInfo:
    """What a heatmap shows: its scope (and SIP/cube), how many links it drew, and the busiest links.

    ``busiest_run`` is the busiest link of all the values given, ``busiest_drawn``
    the busiest link inside the scope (the one labelled on the figure);
    each is ``(src, dst, value)`` or None when nothing carried traffic.
    ``traffic`` is the number of links given a value (the caller gives one to
    each link that carried traffic and to no other), ``traffic_drawn`` how
    many of them this picture draws (the rest lie outside the scope, or are
    of a kind the scope does not draw).
    """

    scope: str
    sip: int | None
    cube: int | None
    drawn: int
    busiest_run: tuple[str, str, float] | None
    busiest_drawn: tuple[str, str, float] | None
    path: Path | None = None
    traffic: int = 0
    traffic_drawn: int = 0


def _busiest(values: Mapping[tuple[str, str], float], graph: TopologyGraph,
             keep=None) -> tuple[str, str, float] | None:
    best = None
    for e in graph.edges:
        v = values.get((e.src, e.dst), 0.0)
        if v > 0 and (keep is None or keep(e)) and (best is None or v > best[2]):
            best = (e.src, e.dst, v)
    return best


def _resolve_scope(graph: TopologyGraph, values: Mapping[tuple[str, str], float], scope: str, sip: int | None,
                   cube: int | None) -> tuple[str, int | None, int | None]:
    if scope not in SCOPES:
        raise HeatmapError(f"unknown heatmap scope {scope!r}; use one of {', '.join(SCOPES)}")
    spec = graph.spec
    sips, cubes = spec.system.sips.count, spec.cubes_per_sip
    if sip is not None and not 0 <= sip < sips:
        raise HeatmapError(f"SIP {sip} does not exist; topology {spec.name!r} has SIPs 0..{sips - 1}")
    if cube is not None and not 0 <= cube < cubes:
        raise HeatmapError(f"cube {cube} does not exist; each SIP of {spec.name!r} has cubes 0..{cubes - 1}")
    top = _busiest(values, graph)
    if scope == "auto":
        if top is None:
            return ("system", None, None) if sips > 1 else ("sip", 0, None)
        a, b = nm.locate(top[0]), nm.locate(top[1])
        if a.sip is not None and a.sip == b.sip:
            return "sip", a.sip, None
        return "system", None, None
    if scope == "system":
        return "system", None, None
    if scope == "sip":
        if sip is None:
            a = nm.locate(top[0]) if top else None
            sip = a.sip if a is not None and a.sip is not None else 0
        return "sip", sip, None
    if sip is None or cube is None:  # the cube of the busiest link that lies inside a cube
        def in_cube(e: Edge) -> bool:
            la, lb = nm.locate(e.src), nm.locate(e.dst)
            return (la.cube is not None and (la.sip, la.cube) == (lb.sip, lb.cube)
                    and (sip is None or la.sip == sip) and (cube is None or la.cube == cube))

        hit = _busiest(values, graph, in_cube)
        loc = nm.locate(hit[0]) if hit else None
        sip = sip if sip is not None else (loc.sip if loc else 0)
        cube = cube if cube is not None else (loc.cube if loc else 0)
    return "cube", sip, cube


def _in_scope(scope: str, sip: int | None, cube: int | None):
    def keep(node_id: str) -> bool:
        if scope == "system":
            return True
        loc = nm.locate(node_id)
        if scope == "sip":
            return loc.sip == sip
        return loc.sip == sip and loc.cube == cube
    return keep


def _outlines(graph: TopologyGraph, scope: str, sip: int | None, cube: int | None) -> list[tuple]:
    """(x0, y0, x1, y1, label, weight) boxes that orient the reader: SIPs, cubes, PEs."""
    groups: dict[tuple, list] = {}
    for n in graph.nodes.values():
        loc = nm.locate(n.id)
        if loc.sip is None:
            continue
        if scope == "system":
            groups.setdefault(("SIP", loc.sip), []).append(n)
        if loc.cube is not None and (scope != "cube" or (loc.sip, loc.cube) == (sip, cube)) and \
                (scope == "system" or loc.sip == sip):
            if scope != "cube":
                groups.setdefault(("cube", loc.sip, loc.cube), []).append(n)
            elif loc.pe is not None and loc.unit.startswith("pe_"):
                groups.setdefault(("PE", loc.pe), []).append(n)
    out = []
    for key, members in groups.items():
        xs, ys = [n.x_mm for n in members], [n.y_mm for n in members]
        pad = {"SIP": 1.5, "cube": 0.4, "PE": 0.25}[key[0]]
        label = f"SIP {key[1]}" if key[0] == "SIP" else (f"PE {key[1]}" if key[0] == "PE" else
                                                          (f"cube {key[2]}" if scope == "sip" else ""))
        out.append((min(xs) - pad, min(ys) - pad, max(xs) + pad, max(ys) + pad, label, key[0]))
    return out


def render_heatmap(graph: TopologyGraph, values: Mapping[tuple[str, str], float], *, title: str,
                   scope: str = "auto", sip: int | None = None, cube: int | None = None,
                   details: Mapping[tuple[str, str], str] | None = None, subtitle: str = "",
                   unit_label: str = "utilisation (% of the run window)") -> tuple[Figure, HeatmapInfo]:
    """Draw the heatmap of ``values`` (``{(src, dst): utilisation}``, 0..1) on ``graph``; see the module doc.

    ``scope`` is ``system`` (every SIP), ``sip`` (one SIP: its cube meshes, UCIe and IO chiplet), ``cube``
    (one cube with its PEs' blocks) or ``auto`` (the SIP holding the run's busiest link, or the tray when that
    link lies between SIPs). A missing ``sip``/``cube`` defaults to where the busiest link is. ``details``
    adds text to the busiest link's label. Returns the figure and a :class:`HeatmapInfo`.
    """
    require_matplotlib()
    from matplotlib.collections import LineCollection
    from matplotlib.colors import LinearSegmentedColormap, Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    missing = [k for k in values if not graph.has_edge(*k)]
    if missing:
        a, b = missing[0]
        raise HeatmapError(f"{len(missing)} link(s) of the data are not in topology {graph.spec.name!r}, e.g. "
                           f"{a} → {b}; pass the topology the run used")
    scope, sip, cube = _resolve_scope(graph, values, scope, sip, cube)
    keep = _in_scope(scope, sip, cube)
    hidden = HIDDEN_KINDS | (frozenset() if scope == "cube" else frozenset({"pe_internal"}))
    edges = [e for e in graph.edges if e.kind not in hidden and keep(e.src) and keep(e.dst)]
    nodes = {n for e in edges for n in (e.src, e.dst)}
    xs = [graph.nodes[n].x_mm for n in nodes] or [0.0]
    ys = [graph.nodes[n].y_mm for n in nodes] or [0.0]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    pad = 0.04 * max(x1 - x0, y1 - y0, 1.0)
    x0, x1, y0, y1 = x0 - pad, x1 + pad, y0 - pad, y1 + pad
    extent = max(x1 - x0, y1 - y0)
    idle_w, low_w, high_w, shift = _STYLE[scope]
    vmax = max((v for v in values.values()), default=0.0) or 1.0
    top_run = _busiest(values, graph)
    drawn_keys = {(e.src, e.dst) for e in edges}
    top_drawn = _busiest(values, graph, lambda e: (e.src, e.dst) in drawn_keys)
    traffic_drawn = sum(1 for k in values if k in drawn_keys)

    w_in = 10.0
    h_in = min(max(w_in * (y1 - y0) / (x1 - x0), 4.0), 11.0)
    fig_h = h_in + 1.3
    fig = Figure(figsize=(w_in + 1.6, fig_h))
    ax = fig.add_axes((0.07, 0.08, 0.78, 0.8))
    cax = fig.add_axes((0.88, 0.12, 0.022, 0.7))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)  # y down, as in the diagrams
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("x (mm)", fontsize=8)
    ax.set_ylabel("y (mm)", fontsize=8)
    ax.tick_params(labelsize=7)

    for bx0, by0, bx1, by1, label, weight in _outlines(graph, scope, sip, cube):
        lw = {"SIP": 1.0, "cube": 0.6, "PE": 0.4}[weight]
        ax.add_patch(Rectangle((bx0, by0), bx1 - bx0, by1 - by0, fill=False, edgecolor="#909090", linewidth=lw,
                               linestyle="-" if weight != "PE" else ":", zorder=0.2))
        if label:
            ax.text(bx0 + 0.02 * (bx1 - bx0), by0 - 0.01 * extent, label, fontsize=7 if weight != "SIP" else 9,
                    color="#505050", ha="left", va="bottom", zorder=0.3)

    segs, colours, widths, order = [], [], [], []
    d = shift * extent
    for e in edges:
        a, b = graph.nodes[e.src], graph.nodes[e.dst]
        dx, dy = b.x_mm - a.x_mm, b.y_mm - a.y_mm
        length = math.hypot(dx, dy)
        ox, oy = ((-dy / length) * d, (dx / length) * d) if length > 0 else (0.0, 0.0)
        v = values.get((e.src, e.dst), 0.0)
        segs.append(((a.x_mm + ox, a.y_mm + oy), (b.x_mm + ox, b.y_mm + oy)))
        colours.append(link_colour(v, vmax))
        widths.append(idle_w if v <= 0 else low_w + (high_w - low_w) * min(v / vmax, 1.0))
        order.append(v)
    idx = sorted(range(len(segs)), key=lambda i: order[i])  # busiest on top
    coll = LineCollection([segs[i] for i in idx], colors=[colours[i] for i in idx],
                           linewidths=[widths[i] for i in idx], capstyle="round", zorder=1)
    coll.set_rasterized(len(segs) > 3000)  # keeps a whole-tray SVG small; text and colour bar stay vector
    ax.add_collection(coll)
    px = [graph.nodes[n].x_mm for n in sorted(nodes)]
    py = [graph.nodes[n].y_mm for n in sorted(nodes)]
    ax.scatter(px, py, s=1.5 if scope != "cube" else 5, c="#404040", linewidths=0, zorder=2,
               rasterized=len(px) > 3000)

    cmap = LinearSegmentedColormap.from_list("kernbench_links", LINK_COLOURS)
    from matplotlib.cm import ScalarMappable

    cb = fig.colorbar(ScalarMappable(Normalize(0.0, 100.0 * vmax), cmap), cax=cax)
    cb.set_label(unit_label + "; grey: idle", fontsize=8)
    cb.ax.tick_params(labelsize=7)

    where = {"system": "whole tray", "sip": f"SIP {sip}", "cube": f"SIP {sip}, cube {cube}"}[scope]
    head = f"Link utilisation: {title}"
    counts = f"{where}, {len(edges)} links drawn ({traffic_drawn} of the {len(values)} with traffic)"
    text_lines = ["; ".join(p for p in (counts, subtitle) if p)]
    if top_run:
        text_lines.append(f"busiest link of the run: {top_run[0]} → {top_run[1]} ({100 * top_run[2]:.1f} %)")
    # the header hangs from the top edge by fixed distances (inches), so a short figure (a tray of SIPs in one
    # row) does not stack the subtitle onto the title
    top = 1.0 - 0.1 / fig_h
    fig.suptitle(head, fontsize=11, x=0.07, ha="left", va="top", y=top)
    fig.text(0.07, top - 0.3 / fig_h, "\n".join(text_lines), fontsize=8, ha="left", va="top", color="#303030")

    if top_drawn:
        a, b = graph.nodes[top_drawn[0]], graph.nodes[top_drawn[1]]
        mx, my = (a.x_mm + b.x_mm) / 2, (a.y_mm + b.y_mm) / 2
        text = f"busiest here: {top_drawn[0]} → {top_drawn[1]}\n{100 * top_drawn[2]:.1f} % busy"
        extra = (details or {}).get((top_drawn[0], top_drawn[1]))
        if extra:
            text += f", {extra}"
        right = mx < (x0 + x1) / 2
        ax.annotate(text, (mx, my), xytext=(40 if right else -40, -40 if my > (y0 + y1) / 2 else 40),
                    textcoords="offset points", ha="left" if right else "right", fontsize=7.5, zorder=6,
                    bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "#24292f",
                          "alpha": 0.92},
                    arrowprops={"arrowstyle": "->", "color": "#24292f", "linewidth": 1.0})
    return fig, HeatmapInfo(scope, sip, cube, len(edges), top_run, top_drawn, None, len(values), traffic_drawn)


def write_heatmap(graph: TopologyGraph, values: Mapping[tuple[str, str], float], path: str | Path, **kwargs) -> \
        HeatmapInfo:
    """Render :func:`render_heatmap` to ``path`` (format from the suffix: .svg, .png or .pdf; parents created)."""
    require_matplotlib()
    from matplotlib import rc_context

    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("svg", "png", "pdf"):
        raise HeatmapError(f"heatmap file {out} must end in .svg, .png or .pdf")
    with rc_context({"svg.hashsalt": "kernbench-heatmap", "svg.fonttype": "none", "font.family": "DejaVu Sans"}):
        fig, info = render_heatmap(graph, values, **kwargs)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            meta = {"Date": None} if fmt == "svg" else ({"CreationDate": None} if fmt == "pdf" else None)
            fig.savefig(out, format=fmt, metadata=meta, dpi=200)
        except OSError as exc:
            raise HeatmapError(f"cannot write the heatmap {out}: {exc.strerror or exc}; choose a writable path") \
                from None
    return replace(info, path=out)


__all__ = ["HIDDEN_KINDS", "IDLE_COLOUR", "LINK_COLOURS", "SCOPES", "HeatmapError", "HeatmapInfo", "link_colour",
           "render_heatmap", "write_heatmap"]
