"""MoE study figures, drawn from the moe study's ``results.json`` only.

* ``moe_collectives``: latency against the payload per rank (log-log) of the all-to-all (pairwise, hierarchical)
  and the all-gather, one line per SIP topology, each with its least-squares α–β line (dashed);
* ``moe_expert_parallel``: the layer's time against the expert-parallel degree, one line per routing
  distribution;
* ``moe_steps``: the layer's steps stacked per degree for one distribution, with the share of moving tokens
  (``move_share``) above each bar;
* ``moe_capacity``: dropped token-slots and layer time against the capacity factor (no limit drawn as ∞ at the
  right), and the per-expert token histogram of the no-limit point with its max and mean;
* ``moe_dispatch_links_*``: the per-link utilisation of the dispatch all-to-all on the torus (balanced and
  Zipf routing), drawn like the all-reduce heatmaps (:mod:`kernbench.studies.figures.allreduce_links`).
"""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from kernbench.studies import allreduce_links
from kernbench.studies.allreduce_model import LineFit, fit_alpha_beta
from kernbench.studies.base import StudyError
from kernbench.studies.figures import allreduce_links as allreduce_links_figures
from kernbench.studies.figures.allreduce_links import DPI, SCOPE, fit_to_page
from kernbench.studies.figures.common import TOPOLOGY_ORDER, FigureSpec, kib, log_ticks, new_figure, topology_color
from kernbench.studies.moe import CAPACITY_SKEW, COLLECTIVES, MOVE_STEPS, STEPS
from kernbench.studies.results import one, select
from kernbench.topology import TopologyGraph
from kernbench.topology.heatmap import render_heatmap

COMMAND = "kernbench study moe"


def series_name(collective: str, algorithm: str) -> str:
    """A collective series as figures and tables name it: ``all-to-all, pairwise``, ``all-gather``."""
    name = collective.replace("_", "-")
    return f"{name}, {algorithm.removeprefix('grid_all_to_all_')}" if algorithm else name


#: The collective series of the collectives panel, in the order drawn: (collective, algorithm) -> short name.
SERIES = {s: series_name(*s) for s in COLLECTIVES}
#: One colour per step: the steps that compute in greys and greens, the ones that move tokens in warm colours.
STEP_COLORS = {"router": "#999999", "permute": "#fdb863", "counts": "#e6ab02", "dispatch": "#e66101",
               "experts": "#1b9e77", "combine_exchange": "#b2182b", "combine": "#7570b3"}
#: One colour and marker per routing distribution (by distribution, then Zipf skew in increasing order).
ROUTING_COLORS = ("#1b9e77", "#7570b3", "#e6ab02", "#d95f02", "#b2182b", "#666666")
MARKERS = ("o", "s", "^", "D", "v", "P")
LINESTYLES = ("--", "-", "-", "-", "-", "-")
#: The routing distribution whose steps the figures show (the capacity panel's).
STEPS_ROUTING = ("zipf", CAPACITY_SKEW)
#: The dispatch-links points of the study: (distribution, skew) -> figure tag (letters only).
LINK_POINTS = {("balanced", None): "balanced", ("zipf", CAPACITY_SKEW): "zipf"}


def routing_label(distribution: str, skew: float | None) -> str:
    """A routing distribution as figures and tables name it: ``balanced``, ``uniform``, ``Zipf s=1.2``."""
    return f"Zipf s={skew:g}" if distribution == "zipf" else distribution


def routings(doc: dict, panel: str = "expert_parallel") -> list[tuple[str, float | None]]:
    """The (distribution, skew) pairs of ``panel``, in grid order."""
    return list(dict.fromkeys((r["distribution"], r["skew"]) for r in select(doc, panel=panel)))


def series_rows(doc: dict, collective: str, algorithm: str, sip_topology: str) -> list[dict]:
    """The collectives-panel rows of one series on one SIP topology, by payload."""
    rows = select(doc, panel="collectives", collective=collective, algorithm=algorithm, sip_topology=sip_topology)
    return sorted(rows, key=lambda r: r["bytes_per_rank"])


def series_fit(rows: list[dict]) -> LineFit:
    """The least-squares α–β line (latency = α + β·bytes) through ``rows`` (latency_ns against bytes_per_rank)."""
    return fit_alpha_beta([r["bytes_per_rank"] for r in rows], [r["latency_ns"] for r in rows])


def _topologies(doc: dict) -> list[str]:
    found = {r["sip_topology"] for r in select(doc, panel="collectives")}
    return [t for t in TOPOLOGY_ORDER if t in found] + sorted(found - set(TOPOLOGY_ORDER))


def _payload_axis(ax, payloads: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(payloads, [kib(p).replace(" KiB", "K") for p in payloads])
    ax.minorticks_off()
    ax.set_xlabel("bytes per rank (KiB)")


def draw_collectives(doc: dict):
    """One panel per collective series: latency against the payload per rank (log-log), one line per SIP
    topology, and the α–β line fitted to it by least squares (dashed)."""
    fig, axes = new_figure(6.4, 2.5, ncols=len(SERIES))
    topologies = _topologies(doc)
    low, high = math.inf, 0.0
    for i, (ax, ((collective, algorithm), name)) in enumerate(zip(axes, SERIES.items(), strict=True)):
        payloads: list[int] = []
        for j, topo in enumerate(topologies):
            rows = series_rows(doc, collective, algorithm, topo)
            if not rows:
                continue
            b = [r["bytes_per_rank"] for r in rows]
            payloads = b
            color = topology_color(topo)
            t = [r["latency_ns"] / 1e3 for r in rows]
            low, high = min(low, *t), max(high, *t)
            ax.plot(b, t, MARKERS[j % len(MARKERS)], color=color, markersize=3.5, markerfacecolor="none", label=topo)
            if len(set(b)) >= 2:
                fit = series_fit(rows)
                x = np.geomspace(min(b), max(b), 32)
                y = (fit.alpha_ns + fit.beta_ns_per_byte * x) / 1e3
                ok = y > 0  # a negative intercept has no place on a log axis
                ax.plot(x[ok], y[ok], "--", color=color, linewidth=1.0, label="_fit")
        _payload_axis(ax, payloads)
        ax.set_title(f"({'abc'[i]}) {name}", loc="left")
    for ax in axes:  # the same log scale in every panel, each labelled (a shared axis hides the labels)
        ax.set_yscale("log")
        if high > 0:
            ax.set_ylim(low / 1.15, high * 1.15)
        log_ticks(ax.yaxis)
    axes[0].set_ylabel("latency (µs, log scale)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Line2D([], [], color="#666666", linestyle="--", linewidth=1.0))
    labels.append("least-squares α–β line of each")
    fig.legend(handles, labels, ncols=len(labels), loc="lower center", bbox_to_anchor=(0.5, 0.0), frameon=False,
               fontsize=7)
    return fig


def _degree_axis(ax, degrees: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(degrees, [str(d) for d in degrees])
    ax.minorticks_off()
    ax.set_xlabel("expert-parallel degree (SIPs, log scale)")


def draw_expert_parallel(doc: dict):
    """The layer's time against the expert-parallel degree, one line per routing distribution (no capacity
    limit)."""
    fig, ax = new_figure(6.4, 2.6)
    degrees: list[int] = []
    for i, (dist, skew) in enumerate(routings(doc)):
        rows = sorted(select(doc, panel="expert_parallel", distribution=dist, skew=skew), key=lambda r: r["sips_used"])
        degrees = [r["sips_used"] for r in rows]
        ax.plot(degrees, [r["moe_ns"] / 1e3 for r in rows], marker=MARKERS[i % len(MARKERS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)], color=ROUTING_COLORS[i % len(ROUTING_COLORS)],
                markersize=3.5, markerfacecolor="none", label=routing_label(dist, skew))
    _degree_axis(ax, degrees)
    ax.set_ylabel("layer time (µs)")
    ax.set_ylim(bottom=0)
    ax.legend(ncols=1, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False, fontsize=7,
              title="routing", title_fontsize=7)
    return fig


def draw_steps(doc: dict, routing: tuple[str, float | None] = STEPS_ROUTING):
    """The layer's steps (the largest over the ranks of each) stacked per expert-parallel degree for one routing
    distribution; the steps that move tokens are hatched, and their share of the layer (``move_share``) is
    written above each bar."""
    dist, skew = routing
    rows = sorted(select(doc, panel="expert_parallel", distribution=dist, skew=skew), key=lambda r: r["sips_used"])
    fig, ax = new_figure(6.4, 2.8)
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for step in STEPS:
        h = np.array([r[f"{step}_ns"] / 1e3 for r in rows])
        ax.bar(x, h, 0.6, bottom=bottom, color=STEP_COLORS[step], edgecolor="white", linewidth=0.4,
               hatch="///" if step in MOVE_STEPS else None, label=step.replace("_", " "))
        bottom += h
    top = float(bottom.max()) if len(rows) else 1.0
    for xi, b, r in zip(x, bottom, rows, strict=True):
        ax.text(xi, b + 0.02 * top, f"moving {100 * r['move_share']:.0f} %", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [str(r["sips_used"]) for r in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(0, 1.15 * top)
    ax.set_xlabel("expert-parallel degree (SIPs)")
    ax.set_ylabel("step time, largest rank (µs)")
    ax.set_title(f"{routing_label(dist, skew)} routing; hatched: steps that move tokens", loc="left")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], ncols=1, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              frameon=False, fontsize=7)
    return fig


def capacity_rows(doc: dict) -> tuple[list[dict], dict | None]:
    """The capacity panel's rows with a capacity factor (in increasing order) and its no-limit row (or None)."""
    rows = select(doc, panel="capacity")
    limited = sorted((r for r in rows if r["capacity_factor"] is not None), key=lambda r: r["capacity_factor"])
    free = next((r for r in rows if r["capacity_factor"] is None), None)
    return limited, free


def histogram(row: dict) -> list[int]:
    """The per-expert kept token-slots of a MoE point (its ``histogram`` JSON text)."""
    data = json.loads(row["histogram"])
    if not isinstance(data, list) or not all(isinstance(v, int) and v >= 0 for v in data):
        raise StudyError(f"moe results: histogram {str(row['histogram'])[:40]!r} is not a JSON array of token "
                         f"counts; regenerate it with `{COMMAND}`")
    return data


def draw_capacity(doc: dict):
    """(a) Dropped token-slots and (b) the layer's time against the capacity factor (one tick per factor of the
    panel, evenly spaced), no limit drawn as ∞ at the right; (c) the per-expert kept token-slots of the no-limit
    point, with their max and mean."""
    limited, free = capacity_rows(doc)
    fig, axes = new_figure(6.4, 4.2, nrows=2, ncols=2, gridspec_kw={"height_ratios": [1, 1.1]})
    (ax, bx), bottom = axes
    for a in bottom:
        a.remove()
    hx = fig.add_subplot(ax.get_gridspec()[1, :])  # the histogram spans the figure's width
    factors = [r["capacity_factor"] for r in limited]
    x = list(range(len(factors)))
    inf_x = len(factors) + 0.5
    ticks, labels = list(x), [f"{f:g}" for f in factors]
    if free is not None:
        ticks.append(inf_x)
        labels.append("∞ (none)")
    color = ROUTING_COLORS[3]
    for a, key, scale in ((ax, "dropped", 1.0), (bx, "moe_ns", 1e3)):
        a.plot(x, [r[key] / scale for r in limited], "o-", color=color, markersize=3.5, markerfacecolor="none")
        if free is not None and limited:
            a.plot([x[-1], inf_x], [limited[-1][key] / scale, free[key] / scale], ":", color=color, linewidth=1.0)
            a.plot([inf_x], [free[key] / scale], "o", color=color, markersize=3.5)
        a.set_xticks(ticks, labels)
        a.set_xlim(-0.5, (inf_x if free is not None else x[-1] if x else 0) + 0.5)
        a.minorticks_off()
        a.set_xlabel("capacity factor")
        a.set_ylim(bottom=0)
    ax.set_ylabel("dropped token-slots")
    ax.set_title("(a) drops", loc="left")
    bx.set_ylabel("layer time (µs)")
    bx.set_title("(b) layer time", loc="left")
    if free is not None:
        counts = histogram(free)
        top = max(counts, default=0)
        mean = float(np.mean(counts)) if counts else 0.0
        hx.bar(np.arange(len(counts)), counts, 0.8, color=color, linewidth=0)
        hx.axhline(top, color="#333333", linestyle=":", linewidth=1.0, label=f"max {top}")
        hx.axhline(mean, color="#333333", linestyle="--", linewidth=1.0, label=f"mean {mean:.3g}")
        hx.set_xlim(-1, len(counts))
        hx.set_ylim(0, 1.3 * max(top, 1))
        hx.legend(ncols=2, loc="upper right", frameon=False, fontsize=7, borderaxespad=0.2)
    hx.set_xlabel("expert")
    hx.set_ylabel("token-slots (all ranks)")
    hx.set_title("(c) kept token-slots per expert, no capacity limit", loc="left")
    fig.tight_layout(h_pad=0.8)
    return fig


def links_row(doc: dict, distribution: str, skew: float | None) -> dict:
    """The dispatch-links row of one routing distribution (:class:`SchemaError` when the results lack it)."""
    return one(doc, panel="dispatch_links", distribution=distribution, skew=skew)


def recorded_graph(doc: dict, row: dict, topology_dir: Path) -> TopologyGraph:
    """The compiled topology ``row`` ran on (:func:`kernbench.studies.figures.allreduce_links.recorded_graph`)."""
    return allreduce_links_figures.recorded_graph(doc, row, topology_dir, "the MoE dispatch heatmap", COMMAND)


def draw_dispatch_links(doc: dict, topology_dir: Path, distribution: str, skew: float | None):
    """The heatmap of the dispatch all-to-all of one routing distribution on the torus: every link of the tray
    coloured by its utilisation over the dispatch window (busy time over the window, 0..1), the busiest drawn
    link labelled with its bytes and packets."""
    row = links_row(doc, distribution, skew)
    rows = allreduce_links.decode(row["links"], f"moe results, dispatch links of {routing_label(distribution, skew)}")
    window = float(row["window_ns"])
    graph = recorded_graph(doc, row, topology_dir)
    values = {(r.src, r.dst): r.utilisation(window) for r in rows}
    details = {(r.src, r.dst): f"{r.bytes:,} B in {r.packets:,} packets ({r.kind})" for r in rows}
    title = f"dispatch all-to-all on {row['sip_topology']}, {routing_label(distribution, skew)} routing"
    fig, _ = render_heatmap(graph, values, title=title, scope=SCOPE, details=details,
                            subtitle=f"dispatch window {window / 1000:.2f} µs")
    fit_to_page(fig)
    fig.axes[1].set_ylabel("busy, % of the dispatch window", fontsize=6.5)
    for t in fig.texts:
        t.set_text(t.get_text().replace("of the run", "of the window"))
    fig.set_dpi(DPI)
    return fig


LINKS_GROUP_CAPTION = ("Link utilisation of the MoE layer's dispatch all-to-all on the 2×3 torus (dispatch_links "
                       "panel), whole tray: every directed link coloured by its busy time as a share of the dispatch "
                       "window (from the moment every rank has entered the dispatch to its return), the colour scale "
                       "ending at the window's busiest link; grey links carried nothing; links inside a PE and the "
                       "control sideband are not drawn. Drawn by kernbench.topology.heatmap, the code behind the "
                       "heatmaps of the links command.")


def _links_spec(routing: tuple[str, float | None], tag: str) -> FigureSpec:
    dist, skew = routing
    cap = tag.capitalize()
    return FigureSpec(
        f"moe_dispatch_links_{tag}", "moe",
        f"Link utilisation of the MoE layer's dispatch all-to-all on the 2×3 torus, {routing_label(dist, skew)} "
        "routing, whole tray: every directed link coloured by its busy time as a share of the dispatch window; grey "
        "links carried nothing.", COMMAND, partial(draw_dispatch_links, distribution=dist, skew=skew), 0.0,
        topologies=True, group="moe_dispatch_links", group_caption=LINKS_GROUP_CAPTION,
        short_caption=f"{dist.capitalize()} routing.",
        tex_caption=((rf"Skew \kbMoeLinks{cap}Skew; dispatch" if skew is not None else "Dispatch")
                     + rf" window \kbMoeLinks{cap}Window; the busiest link drawn is busy \kbMoeLinks{cap}Busiest{{}} "
                       "of it."))


FIGURES = (
    FigureSpec("moe_collectives", "moe",
               "The collectives of a mixture-of-experts layer on the 2×3 SIP tray: latency against the input bytes "
               "per rank (log-log) of the all-to-all with even splits (pairwise and hierarchical algorithms) and of "
               "the all-gather, one series per SIP topology (points), each with the α–β line fitted to it by least "
               "squares (dashed).", COMMAND, draw_collectives),
    FigureSpec("moe_expert_parallel", "moe",
               "The MoE layer's time (the sum of its steps on the slowest rank) against the expert-parallel degree, "
               "one line per routing distribution, no capacity limit; the tokens per rank are fixed, and the "
               "experts divide over the ranks.", COMMAND, draw_expert_parallel),
    FigureSpec("moe_steps", "moe",
               "The MoE layer's steps (each the largest over the ranks) stacked per expert-parallel degree, Zipf "
               "routing of the capacity panel's skew; hatched steps move tokens, and the share of the slowest rank's "
               "time they take is written above each bar.", COMMAND, draw_steps),
    FigureSpec("moe_capacity", "moe",
               "Capacity panel (the layer on the 2×3 torus, Zipf routing): (a) token-slots dropped over capacity and "
               "(b) the layer's time against the capacity factor, no limit drawn at the right; (c) the kept "
               "token-slots of every expert, all ranks pooled, without a limit, with their max (dotted) and mean "
               "(dashed).",
               COMMAND, draw_capacity),
    *(_links_spec(r, t) for r, t in LINK_POINTS.items()),
)
