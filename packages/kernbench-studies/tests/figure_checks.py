"""Layout checks of a drawn matplotlib figure: what a reviewer would otherwise find by eye on the page.

* a legend covers no plotted data: no data point of a line, no bar and no point of a line collection lies inside a
  legend's box (axes legends and figure legends, against every axes of the figure);
* a log axis has at least :data:`MIN_LOG_LABELS` labelled ticks inside its view;
* a legend's font is no larger than its axes' label font;
* every text prints at :data:`MIN_PRINT_PT` or more, at the width the report gives the figure;
* no text (title, axis label, legend, annotation) spells a number as a word (the report's grounding rule,
  :data:`kernbench.studies.report.grounding.NUMBER_WORD`): a count drawn in a figure is formatted from the data.

Loaded by path from the tests (``--import-mode=importlib``); each check returns a list of problems (empty: fine).
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from kernbench.studies.report.grounding import ALLOWED_PHRASES, NUMBER_WORD

MIN_LOG_LABELS = 3
MIN_PRINT_PT = 6.0
#: The report's text width (A4 with 22 mm margins), inches.
TEXT_WIDTH_IN = (210 - 44) / 25.4


def _renderer(fig):
    if not hasattr(fig.canvas, "get_renderer"):  # a Figure made without pyplot (the heatmaps)
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _legends(fig):
    out = [(ax.get_legend(), ax) for ax in fig.axes if ax.get_legend() is not None]
    return out + [(leg, None) for leg in fig.legends]


def _data_points(ax) -> np.ndarray:
    """Display coordinates of every data point, bar corner/centre and collection point drawn in ``ax``."""
    pts = []
    for line in ax.get_lines():
        if not line.get_visible() or (line.get_label() == "_nolegend_" and len(line.get_xdata()) == 0):
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
        if len(xy) and line.get_transform() == ax.transData:
            pts.append(line.get_transform().transform(xy))
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                seg = np.asarray(seg, float)
                if len(seg) >= 2:  # the segment's ends and points along it
                    t = np.linspace(0, 1, 9)[:, None]
                    seg = np.vstack([seg[i] + t * (seg[i + 1] - seg[i]) for i in range(len(seg) - 1)])
                pts.append(coll.get_transform().transform(seg))
        elif isinstance(coll, PathCollection):
            off = coll.get_offsets()
            if len(off):
                pts.append(coll.get_offset_transform().transform(np.asarray(off, float)))
    return np.vstack(pts) if pts else np.zeros((0, 2))


def _bars(ax, renderer) -> list[Bbox]:
    """The drawn part of every bar: its extent clipped to the axes (a bar on a log axis starts far below it)."""
    frame = ax.get_window_extent(renderer)
    out = []
    for p in ax.patches:
        if not (isinstance(p, Rectangle) and p.get_visible() and p.get_width() and p.get_height()
                and p.get_transform() != ax.transAxes):
            continue
        box = Bbox.intersection(p.get_window_extent(renderer), frame)
        if box is not None and box.width > 0 and box.height > 0:
            out.append(box)
    return out


def legend_overlaps(fig) -> list[str]:
    """Legends whose box holds a data point or meets a bar of any axes of ``fig``."""
    renderer = _renderer(fig)
    problems = []
    for leg, owner in _legends(fig):
        box = leg.get_window_extent(renderer).expanded(1.0, 1.0)
        where = owner.get_title(loc="left") or owner.get_title() if owner is not None else "figure legend"
        for ax in fig.axes:
            pts = _data_points(ax)
            frame = ax.get_window_extent(renderer)  # points outside the axes are clipped, not drawn
            pts = pts[(pts[:, 0] >= frame.x0 - 1) & (pts[:, 0] <= frame.x1 + 1) & (pts[:, 1] >= frame.y0 - 1)
                      & (pts[:, 1] <= frame.y1 + 1)]
            inside = pts[(pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)]
            if len(inside):
                problems.append(f"legend of {where!r} covers {len(inside)} data point(s) of axes "
                                f"{ax.get_title(loc='left') or ax.get_ylabel()!r}")
            hit = [b for b in _bars(ax, renderer) if b.overlaps(box)]
            if hit:
                problems.append(f"legend of {where!r} covers {len(hit)} bar(s) of axes "
                                f"{ax.get_title(loc='left') or ax.get_ylabel()!r}")
    return problems


def _labelled(axis, lo: float, hi: float) -> list[str]:
    lo, hi = min(lo, hi), max(lo, hi)
    ticks = [(t.get_loc(), t.label1.get_text()) for t in axis.get_major_ticks() + axis.get_minor_ticks()
             if t.label1.get_visible()]
    return [text for loc, text in ticks if text.strip() and lo * (1 - 1e-9) <= loc <= hi * (1 + 1e-9)]


def log_axis_labels(fig) -> list[str]:
    """Log axes with fewer than :data:`MIN_LOG_LABELS` labelled ticks in view."""
    _renderer(fig)
    problems = []
    for ax in fig.axes:
        for name, axis, lim in (("x", ax.xaxis, ax.get_xlim()), ("y", ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            labels = _labelled(axis, *lim)
            if len(labels) < MIN_LOG_LABELS:
                problems.append(f"log {name} axis of {ax.get_title(loc='left') or ax.get_ylabel()!r} has "
                                f"{len(labels)} labelled tick(s): {labels}")
    return problems


def legend_fonts(fig) -> list[str]:
    """Legends whose text is larger than the axis labels of their axes (or of the first axes, for a figure
    legend)."""
    problems = []
    for leg, owner in _legends(fig):
        ax = owner or fig.axes[0]
        label = max(ax.xaxis.label.get_fontsize(), ax.yaxis.label.get_fontsize())
        big = [t.get_fontsize() for t in leg.get_texts() if t.get_fontsize() > label + 1e-6]
        if big:
            problems.append(f"legend text {max(big):g} pt is larger than the axis labels ({label:g} pt)")
    return problems


def print_scale(fig, width_share: float) -> float:
    """How much the figure is scaled on the page: the report sets its tight box to ``width_share`` of the text
    width (0: the figure is included at the size it is drawn)."""
    if not width_share:
        return 1.0
    renderer = _renderer(fig)
    bbox = fig.get_tightbbox(renderer)  # inches
    return width_share * TEXT_WIDTH_IN / bbox.width


def small_text(fig, width_share: float) -> list[str]:
    """Texts that print below :data:`MIN_PRINT_PT` at the width the report gives the figure."""
    scale = print_scale(fig, width_share)
    small = {}
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() * scale < MIN_PRINT_PT - 1e-6:
            small.setdefault(round(t.get_fontsize() * scale, 1), t.get_text()[:30])
    return [f"text {text!r} prints at {pt} pt (< {MIN_PRINT_PT:g})" for pt, text in sorted(small.items())]


def _apart(a: Text, b: Text, ba: Bbox, bb: Bbox, dpi: float) -> bool:
    """Whether two tick labels of one axis stand clear of each other. Labels turned by the same angle are
    parallel strips: they are clear when the distance between their anchors, across the strips, is at least a
    line of text (their upright boxes overlap long before the text does)."""
    angle = a.get_rotation() % 180
    if angle == 0 or angle != b.get_rotation() % 180:
        return not ba.overlaps(bb.shrunk(0.98, 0.98))
    line = 1.15 * max(a.get_fontsize(), b.get_fontsize()) * dpi / 72
    (xa, ya), (xb, yb) = (a.get_transform().transform(a.get_position()), b.get_transform().transform(b.get_position()))
    t = np.radians(angle)
    return abs(-(xb - xa) * np.sin(t) + (yb - ya) * np.cos(t)) >= line


def tick_label_overlaps(fig) -> list[str]:
    """Neighbouring tick labels of one axis that overlap each other."""
    renderer = _renderer(fig)
    problems = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            boxes = [t.get_window_extent(renderer) for t in labels]
            for i in range(len(labels) - 1):
                if not _apart(labels[i], labels[i + 1], boxes[i], boxes[i + 1], fig.dpi):
                    problems.append(f"{name} tick labels {labels[i].get_text()!r} and {labels[i + 1].get_text()!r} "
                                    f"of {ax.get_title(loc='left') or ax.get_ylabel()!r} overlap")
    return problems


def hidden_series(fig, px: float = 1.5) -> list[str]:
    """Two labelled lines of one axes drawn on the same points (within ``px`` pixels) with the same marker and
    line style: the one underneath cannot be seen."""
    _renderer(fig)
    problems = []
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if ln.get_visible() and not ln.get_label().startswith("_")]
        pts = {id(ln): ln.get_transform().transform(np.column_stack([np.asarray(ln.get_xdata(), float),
                                                                     np.asarray(ln.get_ydata(), float)]))
               for ln in lines}
        for i, a in enumerate(lines):
            for b in lines[i + 1:]:
                pa, pb = pts[id(a)], pts[id(b)]
                if pa.shape != pb.shape or not len(pa) or np.nanmax(np.abs(pa - pb)) > px:
                    continue
                if (a.get_marker(), a.get_linestyle()) == (b.get_marker(), b.get_linestyle()):
                    problems.append(f"series {b.get_label()!r} hides {a.get_label()!r} in "
                                    f"{ax.get_title(loc='left') or ax.get_ylabel()!r}")
    return problems


def number_words(fig) -> list[str]:
    """Texts of ``fig`` that spell a number as a word ("(a) six SIPs"), outside the grounding check's allowed
    phrases: a count in a figure is formatted from the results or the study's definition, never typed."""
    problems = []
    for t in fig.findobj(Text):
        text = t.get_text()
        for phrase in ALLOWED_PHRASES:
            text = text.replace(phrase, "")
        found = NUMBER_WORD.findall(text) if t.get_visible() else []
        if found:
            problems.append(f"text {t.get_text()[:40]!r} spells a number as a word ({', '.join(found)})")
    return problems


def all_problems(fig, width_share: float) -> list[str]:
    """Every problem the checks find in ``fig``."""
    return (legend_overlaps(fig) + log_axis_labels(fig) + legend_fonts(fig) + small_text(fig, width_share)
            + tick_label_overlaps(fig) + hidden_series(fig) + number_words(fig))
