"""All-reduce study heatmaps: the links panel's per-link traffic of each SIP topology, drawn on the whole tray.

One figure per SIP topology, from the links-panel point of ``results.json``
and the compiled topology the point ran on, with
:func:`kernbench.topology.heatmap.render_heatmap`: the drawing code of
``kernbench links FILE --heatmap``, given the same values (each link's
utilisation, ``busy_ns / window_ns``), the same busiest-link details and the
same subtitle, so the study's figure of a topology is the figure that
command draws for a links file of the same run at ``--scope system``.

The scope is the whole tray: the three topologies run the same reduction
and broadcast inside every SIP and differ only in which SIPs exchange
partial sums, which shows on the SIPs' PCIe links and in which SIPs' root
cubes work hardest (the mesh's middle SIPs talk to three neighbours). A
one-SIP view would show nearly the same picture three times.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from matplotlib.text import Annotation

from kernbench.studies import allreduce_links
from kernbench.studies.base import StudyError
from kernbench.studies.cache import file_digest
from kernbench.studies.figures.common import FigureSpec, kib
from kernbench.studies.graphs import study_graph
from kernbench.studies.results import one
from kernbench.topology import TopologyGraph
from kernbench.topology.heatmap import render_heatmap
from kernbench.topology.sip_topologies import SHIPPED

COMMAND = "kernbench study allreduce"
SCOPE = "system"
#: SIP topology -> figure tag (the strategy's label, letters only: the report names each figure's macro after it).
TAGS = {t.name: t.label for t in SHIPPED}
#: Resolution of the rasterised link layer (a whole tray has more than 3,000 links), dots per inch.
DPI = 200


def links_row(doc: dict, sip_topology: str) -> dict:
    """The links-panel row of ``sip_topology`` (:class:`SchemaError` when the results lack it)."""
    return one(doc, panel="links", sip_topology=sip_topology)


def recorded_graph(doc: dict, row: dict, topology_dir: Path, heatmap: str | None = None,
                   command: str = COMMAND) -> TopologyGraph:
    """The compiled topology ``row`` ran on, read from ``topology_dir``; :class:`StudyError` unless the file there
    is the one the results were recorded with (same SHA-256 as in their provenance). ``heatmap`` names the figure
    in the error (default: the all-reduce heatmap of the row's SIP topology) and ``command`` reruns its study."""
    name = str(row["topology"])
    recorded = doc["provenance"].get("topology_files", {}).get(name)
    here = file_digest(Path(topology_dir) / name)
    if recorded is None or here != recorded:
        what = "does not exist" if here is None else ("is not listed in the results' provenance" if recorded is None
                                                       else "differs from the file the results were recorded on")
        heatmap = heatmap or f"the all-reduce heatmap of {row['sip_topology']}"
        raise StudyError(f"cannot draw {heatmap}: {Path(topology_dir) / name} {what}; rerun `{command}` (or pass "
                         f"the topology folder it used)")
    return study_graph(topology_dir, name)


def draw_links(doc: dict, topology_dir: Path, sip_topology: str):
    """The heatmap of the links point of ``sip_topology``: every link of the tray coloured by its utilisation
    (busy time over the run window, 0..1), the busiest drawn link labelled with its bytes and packets."""
    row = links_row(doc, sip_topology)
    rows = allreduce_links.decode(row["links"], f"allreduce results, links point of {sip_topology}")
    window = float(row["window_ns"])
    graph = recorded_graph(doc, row, topology_dir)
    values = {(r.src, r.dst): r.utilisation(window) for r in rows}
    details = {(r.src, r.dst): f"{r.bytes:,} B in {r.packets:,} packets ({r.kind})" for r in rows}
    title = (f"all-reduce on {sip_topology}, {kib(row['bytes_per_pe'])} per PE, "
             f"{str(row['buffer_kind']).upper()} receive rings")
    fig, _ = render_heatmap(graph, values, title=title, scope=SCOPE, details=details,
                            subtitle=f"run window {window / 1000:.2f} µs")
    fit_to_page(fig)
    fig.set_dpi(DPI)
    return fig


#: The largest size of a heatmap's axes on the page, inches: three heatmaps (a one-row tray and two 2×3 ones) and
#: their captions share one page, and the report includes them at their own size, so every label prints at the
#: size it is drawn (at least 6 pt).
MAX_AXES_WIDTH_IN, MAX_AXES_HEIGHT_IN = 5.2, 1.9
_LEFT_IN, _BAR_GAP_IN, _BAR_WIDTH_IN, _RIGHT_IN = 0.5, 0.12, 0.1, 0.4
_FOOT_IN = 0.36


_SIDE_IN = 2.55  # room for the header beside a narrow tray (a 2×3 grid of SIPs), inches
_HEADER_PT = 7.0


def header_lines(header: list[str], notes: list) -> list[str]:
    """The heatmap's header and its busiest-drawn-link label as short lines (a link's name on a line of its own);
    the label on the link itself becomes ``busiest link drawn``."""
    lines = []
    for text in header:
        for ln in text.replace("; ", "\n").split("\n"):
            m = re.match(r"busiest link of the run: (.*) \((.*)\)$", ln)
            if m:
                lines += [f"busiest link of the run ({m[2]}):", f"  {m[1]}"]
            elif " (" in ln and ln.startswith("whole tray"):
                head, _, rest = ln.partition(" (")
                lines += [head, f"  ({rest}"]
            elif ln.strip():
                lines.append(ln)
    for note in notes:
        link, _, rest = note.get_text().removeprefix("busiest here: ").partition("\n")
        busy, _, traffic = rest.partition(", ")
        lines += [f"busiest link drawn ({busy}):", f"  {link}", f"  {traffic}"]
        note.set_text("busiest link drawn")
    return lines



def _suptitle(fig):
    """The figure's suptitle as a text artist (None without one), found through the public API."""
    title = fig.get_suptitle()
    return next((t for t in fig.texts if title and t.get_text() == title), None)

def fit_to_page(fig) -> None:
    """Re-lay a whole-tray heatmap for a page that holds all three: the axes cropped to the tray's aspect (no empty
    band around it) and no larger than :data:`MAX_AXES_WIDTH_IN` × :data:`MAX_AXES_HEIGHT_IN`, the colour bar as
    tall as the tray, the title left to the sub-caption (it repeats it), and the header lines (links drawn, run
    window, busiest links, the busiest drawn link's traffic) above a wide tray or beside a narrow one, with only a
    short label at the busiest drawn link itself."""
    ax, cax = fig.axes[0], fig.axes[1]
    (x0, x1), (y1, y0) = ax.get_xlim(), ax.get_ylim()
    aspect = abs(y1 - y0) / abs(x1 - x0)
    width = min(MAX_AXES_WIDTH_IN, MAX_AXES_HEIGHT_IN / aspect)
    height = width * aspect
    suptitle = _suptitle(fig)
    lines = header_lines([t.get_text() for t in fig.texts if t is not suptitle],
                         [t for t in ax.texts if isinstance(t, Annotation)])
    beside = width < MAX_AXES_WIDTH_IN - _SIDE_IN
    if not beside:  # above a wide tray there is room for a link's name on its heading's line
        joined: list[str] = []
        for ln in lines:
            if ln.startswith("  ") and joined:
                glue = " " if joined[-1].endswith(":") or ln.strip().startswith("(") else ", "
                joined[-1] += glue + ln.strip()
            else:
                joined.append(ln)
        lines = joined
    head = 0.05 if beside else 0.12 + 0.13 * len(lines)
    fig_w = _LEFT_IN + width + _BAR_GAP_IN + _BAR_WIDTH_IN + _RIGHT_IN + (_SIDE_IN if beside else 0.0)
    fig_h = head + height + _FOOT_IN
    fig.set_size_inches(fig_w, fig_h)
    ax.set_position((_LEFT_IN / fig_w, _FOOT_IN / fig_h, width / fig_w, height / fig_h))
    cax.set_position(((_LEFT_IN + width + _BAR_GAP_IN) / fig_w, _FOOT_IN / fig_h, _BAR_WIDTH_IN / fig_w,
                      height / fig_h))
    cax.set_ylabel("busy, % of the run window", fontsize=6.5)  # as tall as the tray at most (grey: idle, caption)
    if suptitle is not None:
        suptitle.set_text("")
    texts = [t for t in fig.texts if t is not suptitle]
    for t in texts[1:]:
        t.set_text("")
    text = texts[0]
    text.set_text("\n".join(lines))
    if beside:  # in the room beside the colour bar
        text.set_position(((fig_w - _SIDE_IN + 0.05) / fig_w, (_FOOT_IN + height) / fig_h))
    else:
        text.set_position((_LEFT_IN / fig_w, 1 - 0.04 / fig_h))
    text.set_fontsize(_HEADER_PT)
    text.set_verticalalignment("top")
    text.set_horizontalalignment("left")
    _keep_labels_inside(fig, ax)


def _keep_labels_inside(fig, ax) -> None:
    """Turn an annotation that runs past the axes' right or left edge to the other side of the point it labels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    frame = ax.get_window_extent(renderer)
    for note in [t for t in ax.texts if isinstance(t, Annotation)]:
        box = note.get_window_extent(renderer)
        dx, dy = note.xyann
        if (box.x1 > frame.x1 and dx > 0) or (box.x0 < frame.x0 and dx < 0):
            note.xyann = (-dx, dy)
            note.set_horizontalalignment("right" if dx > 0 else "left")


GROUP_CAPTION = ("Link utilisation of the all-reduce (links panel, TCM receive rings) on each SIP topology, "
                 "whole tray: every directed link coloured by its busy time as a share of the run window, the colour "
                 "scale ending at the run's busiest link; grey links carried nothing; links inside a PE and the "
                 "control sideband are not drawn. Drawn by kernbench.topology.heatmap, the code behind the heatmaps "
                 "of the links command.")


def _spec(sip_topology: str) -> FigureSpec:
    tag = TAGS[sip_topology]
    cap = tag.capitalize()
    return FigureSpec(
        f"allreduce_links_{tag}", "allreduce",
        f"Link utilisation of the all-reduce on {sip_topology} (links panel, TCM receive rings), whole tray: every "
        "directed link coloured by its busy time as a share of the run window, the colour scale ending at the "
        "run's busiest link; grey links carried nothing; links inside a PE and the control sideband are not "
        "drawn. Drawn by kernbench.topology.heatmap, the code behind the heatmaps of the links command.",
        COMMAND, partial(draw_links, sip_topology=sip_topology), 0.0, topologies=True, group="allreduce_links",
        group_caption=GROUP_CAPTION, short_caption=f"{sip_topology}.",
        tex_caption=(rf"Payload \kbArLinksPayload{{}} per PE; run window \kbArLinks{cap}Window; the busiest link "
                     rf"drawn is busy \kbArLinks{cap}Busiest{{}} of it; the PCIe links between the SIPs and the "
                     rf"switch carry \kbClaimArLinks{cap}Pcie{{}} per link and direction."))


FIGURES = tuple(_spec(t) for t in TAGS)
