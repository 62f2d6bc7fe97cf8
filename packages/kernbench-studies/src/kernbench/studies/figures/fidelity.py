"""The fidelity figure: flow fidelity's speed-up against its latency error, over every study's fidelity panel.

Unlike a study's own figures it is drawn from the results of every study at once (``draw(docs)``, study name ->
results document; :func:`kernbench.studies.figures.render_fidelity`): one marker per fidelity-panel point
(:func:`kernbench.studies.fidelity.rows`), coloured and shaped by study, at x = speed-up (packet wall time over
flow wall time, log scale) and y = |error| of the latency (%, linear near zero and logarithmic above
:data:`LINEAR_BELOW_PCT`, so that an exact point sits on the axis), with issue 24's error bounds (dashed) and
speed-up target (dotted).
"""

from __future__ import annotations

import math

from matplotlib.lines import Line2D

from kernbench.studies.fidelity import ERROR_MAX_BOUND, ERROR_MEDIAN_BOUND, SPEEDUP_TARGET, all_rows
from kernbench.studies.figures.common import FigureSpec, log_ticks, new_figure

COMMAND = "kernbench study all"
#: Colour and marker per study (a study without one is drawn grey with :data:`OTHER`).
STYLE = {"gemm": ("#1b9e77", "o"), "allreduce": ("#d95f02", "s"), "gqa": ("#7570b3", "^"), "moe": ("#e7298a", "D")}
OTHER = ("#666666", "v")
#: The |error| axis is linear below this many percent and logarithmic above.
LINEAR_BELOW_PCT = 0.01


def draw_speed_error(docs: dict[str, dict]):
    """|error| (%) against speed-up, one marker per fidelity-panel point, coloured by study; the bounds and the
    target as lines."""
    rows = all_rows(docs)
    fig, ax = new_figure(6.4, 3.2)
    handles = []
    for study in dict.fromkeys(r.study for r in rows):
        color, marker = STYLE.get(study, OTHER)
        mine = [r for r in rows if r.study == study]
        handles += ax.plot([r.speedup for r in mine], [100 * abs(r.error) for r in mine], marker, color=color,
                           markerfacecolor="none", markersize=5, linestyle="none",
                           label=f"{study} ({len(mine)} points)")
    median_pct, max_pct = 100 * ERROR_MEDIAN_BOUND, 100 * ERROR_MAX_BOUND
    ax.axhline(median_pct, color="#444444", linestyle="--", linewidth=0.9)
    ax.axhline(max_pct, color="#444444", linestyle=(0, (6, 2)), linewidth=0.9)
    ax.axvline(SPEEDUP_TARGET, color="#444444", linestyle=":", linewidth=1.1)
    handles += [Line2D([], [], color="#444444", linestyle="--", linewidth=0.9,
                       label=f"median |error| bound {median_pct:g} %"),
                Line2D([], [], color="#444444", linestyle=(0, (6, 2)), linewidth=0.9,
                       label=f"max |error| bound {max_pct:g} %"),
                Line2D([], [], color="#444444", linestyle=":", linewidth=1.1,
                       label=f"speed-up target {SPEEDUP_TARGET:g}×")]
    speedups = [r.speedup for r in rows if math.isfinite(r.speedup) and r.speedup > 0] or [1.0]
    ax.set_xscale("log")
    ax.set_xlim(min(min(speedups), 1.0) / 1.6, max(max(speedups), SPEEDUP_TARGET) * 1.6)
    log_ticks(ax.xaxis)
    ax.set_yscale("symlog", linthresh=LINEAR_BELOW_PCT, linscale=0.5)
    top = max([max_pct, *(100 * abs(r.error) for r in rows)]) * 2.0
    ax.set_ylim(-0.4 * LINEAR_BELOW_PCT, top)  # a little below zero: a marker at zero is drawn whole
    ticks = [0.0, LINEAR_BELOW_PCT, 0.1, 1.0, 10.0, 100.0]
    ax.set_yticks([t for t in ticks if t <= top], [f"{t:g}" for t in ticks if t <= top])
    ax.set_xlabel("speed-up: packet wall time / flow wall time (×, log scale)")
    ax.set_ylabel("|latency error| of flow vs packet (%)")
    if not rows:
        ax.text(0.5, 0.5, "no fidelity-panel points in these results", transform=ax.transAxes, ha="center",
                va="center")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    return fig


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("fidelity_speed_error", None,
               "Flow fidelity beside packet fidelity on every study's fidelity panel: the speed-up (packet wall "
               "time over flow wall time, each the point's own simulation as the study runner timed it) against "
               "the magnitude of the latency's relative error, one marker per point, by study. Dashed: the bounds "
               "set on the error (median and largest); dotted: the speed-up target. An exact point sits on the x "
               "axis.", COMMAND, draw_speed_error, 0.9,
               tex_caption=r"The bounds are \kbFidErrMedianBound{} and \kbFidErrMaxBound, the target "
                           r"\kbFidSpeedupTarget."),
)
