"""GEMM study figures: measured efficiency, model vs measurement, stage breakdown, efficiency vs tile count."""

from __future__ import annotations

import numpy as np

from kernbench.studies.figures.common import COLORS, FigureSpec, label_shape, new_figure
from kernbench.studies.results import select

VARIANTS = ("ref_ref", "load_ref", "load_load")
STAGES = (("DMA_READ", "busy_dma_read_ns"), ("FETCH", "busy_fetch_ns"), ("GEMM", "busy_gemm_ns"),
          ("STORE", "busy_store_ns"), ("DMA_WRITE", "busy_dma_write_ns"))
COMMAND = "kernbench study gemm"
#: One open marker per staging in the error panel, and the factor by which the stagings are drawn apart on its log
#: axis.
MARKERS = {"ref_ref": "o", "load_ref": "s", "load_load": "^"}
SHIFT = 1.12
#: The error bands the model check reports against (the report's counts and the error panel use the same two).
BAND_NARROW = 0.05
BAND_WIDE = 0.20


def _shapes(doc: dict) -> list[tuple[int, int, int]]:
    seen: dict[tuple[int, int, int], None] = {}
    for r in select(doc, series="shapes"):
        seen.setdefault((r["m"], r["k"], r["n"]), None)
    return list(seen)


def _row(doc: dict, shape: tuple[int, int, int], variant: str) -> dict:
    m, k, n = shape
    (r,) = [x for x in select(doc, series="shapes", variant=variant) if (x["m"], x["k"], x["n"]) == (m, k, n)]
    return r


def _tile_label(doc: dict) -> str:
    r = select(doc, series="shapes")[0]
    return f"tile M{r['tile_m']}×K{r['tile_k']}×N{r['tile_n']}"


def draw_efficiency(doc: dict):
    """Grouped bars: measured MAC efficiency per shape and staging, the shape's fill cap as a black bar."""
    shapes = _shapes(doc)
    fig, ax = new_figure(6.4, 2.8)
    x = np.arange(len(shapes))
    width = 0.26
    for i, v in enumerate(VARIANTS):
        eff = [100 * _row(doc, s, v)["mac_efficiency"] for s in shapes]
        ax.bar(x + (i - 1) * width, eff, width, color=COLORS[v], label=v)
    caps = [100 * _row(doc, s, VARIANTS[0])["fill_ratio"] for s in shapes]
    ax.hlines(caps, x - 1.5 * width, x + 1.5 * width, colors="black", linewidth=1.2,
              label="fill cap (macs / tile_macs)")
    ax.set_xticks(x, [label_shape(*s) for s in shapes], rotation=20)
    ax.set_xlabel(f"GEMM shape M×K×N (elements), {_tile_label(doc)}")
    ax.set_ylabel("MAC efficiency (%)")
    ax.set_ylim(0, 105)
    ax.legend(ncols=4, loc="lower left", bbox_to_anchor=(0, 1.01), borderaxespad=0, frameon=False)
    return fig


def draw_theory(doc: dict):
    """(a) Per shape and staging: measured efficiency (bars), the pipeline model (diamonds) and the compute-bound
    ceiling (dashes); (b) the model's error at every point of both series."""
    shapes = _shapes(doc)
    fig, (ax, bx) = new_figure(6.4, 4.6, nrows=2, gridspec_kw={"height_ratios": [3, 2]})
    x = np.arange(len(shapes))
    width = 0.26
    for i, v in enumerate(VARIANTS):
        rows = [_row(doc, s, v) for s in shapes]
        xs = x + (i - 1) * width
        ax.bar(xs, [100 * r["mac_efficiency"] for r in rows], width, color=COLORS[v], label=f"{v} measured")
        ax.plot(xs, [100 * r["model_efficiency"] for r in rows], "D", color="black", markersize=3.5,
                label="pipeline model" if i == 0 else None)
        ax.plot(xs, [100 * r["compute_bound_efficiency"] for r in rows], "_", color="0.45", markersize=9,
                markeredgewidth=1.5, label="compute-bound ceiling" if i == 0 else None)
    ax.set_xticks(x, [label_shape(*s) for s in shapes], rotation=20)
    ax.set_ylabel("MAC efficiency (%)")
    ax.set_ylim(0, 130)
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("(a) measured vs analytic, by shape (M×K×N, elements)", loc="left")
    ax.legend(ncols=3, loc="upper left", frameon=False, fontsize=6.5)
    for series in ("shapes", "tiles"):
        for i, v in enumerate(VARIANTS):
            rows = select(doc, series=series, variant=v)
            shift = SHIFT ** (i - 1)  # side by side on the log axis, so equal errors do not hide each other
            if series == "shapes":
                bx.plot([r["tiles"] * shift for r in rows], [100 * r["model_error"] for r in rows], MARKERS[v],
                        linestyle="none", color=COLORS[v], markerfacecolor="none", markersize=4.5,
                        markeredgewidth=1.0, label=f"{v} (shapes)", zorder=3)
            else:
                bx.plot([r["tiles"] * shift for r in rows], [100 * r["model_error"] for r in rows], ".",
                        linestyle="none", color=COLORS[v], markersize=3, alpha=0.8, label=f"{v} (tile series)",
                        zorder=2)
    narrow, wide = 100 * BAND_NARROW, 100 * BAND_WIDE
    bx.axhspan(-narrow, narrow, color="0.88", zorder=0, label=f"±{narrow:.0f} % band")
    for sign in (1, -1):
        bx.axhline(sign * wide, color="0.45", linestyle="--", linewidth=0.8, zorder=1,
                   label=f"±{wide:.0f} %" if sign == 1 else None)
    bx.set_xscale("log")
    bx.set_xlabel("tiles in the composite (count, log scale; stagings drawn side by side)")
    bx.set_ylabel("model error (%)")
    low = min(-wide - 5, min(100 * r["model_error"] for r in select(doc)) - 5)
    high = max(wide + 5, max(100 * r["model_error"] for r in select(doc)) + 5)
    bx.set_ylim(low, high)
    bx.set_title("(b) (model − measured) / measured, every point", loc="left")
    bx.legend(ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False, fontsize=6.5)
    fig.tight_layout()
    return fig


def draw_stages(doc: dict):
    """Busy time of each pipeline stage inside the composite, per shape, one panel per staging (log scale)."""
    shapes = _shapes(doc)
    fig, axes = new_figure(6.4, 5.0, nrows=3, sharex=True)
    x = np.arange(len(shapes))
    width = 0.16
    for ax, v in zip(axes, VARIANTS, strict=True):
        for i, (stage, key) in enumerate(STAGES):
            vals = [_row(doc, s, v)[key] for s in shapes]
            xs = x + (i - 2) * width
            ax.bar(xs, [val if val > 0 else np.nan for val in vals], width, color=COLORS[stage], label=stage)
            for xi, val in zip(xs, vals, strict=True):
                if val <= 0:  # a zero has no bar on a log axis: say it
                    ax.annotate("0", (xi, 1), xytext=(0, 1), textcoords="offset points", ha="center", va="bottom",
                                fontsize=7.5, color=COLORS[stage])
        comp = [_row(doc, s, v)["composite_ns"] for s in shapes]
        ax.hlines(comp, x - 2.5 * width, x + 2.5 * width, colors="black", linewidth=1.0, label="composite time")
        ax.set_yscale("log")
        ax.set_ylim(1, None)
        ax.set_ylabel("busy time (ns)")
        ax.set_title(f"staging {v}", loc="left")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, ncols=6, loc="upper center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    axes[-1].set_xticks(x, [label_shape(*s) for s in shapes], rotation=20)
    axes[-1].set_xlabel("GEMM shape M×K×N (elements)")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig


def draw_tiles(doc: dict):
    """Efficiency vs tiles along K for each staging: measured (solid), pipeline model (dashed), compute-bound
    ceiling (dotted)."""
    fig, ax = new_figure(6.4, 3.0)
    for v in VARIANTS:
        rows = select(doc, series="tiles", variant=v)
        t = [r["tiles"] for r in rows]
        # measured: a broad pale band; the model: a dark dashed line on top of it, so neither hides the other
        ax.plot(t, [100 * r["mac_efficiency"] for r in rows], "-", color=COLORS[v], linewidth=3.2, alpha=0.45,
                label=f"{v} measured", zorder=2)
        ax.plot(t, [100 * r["model_efficiency"] for r in rows], "--", color=COLORS[v], linewidth=1.1,
                label=f"{v} model", zorder=3)
    rows = select(doc, series="tiles", variant=VARIANTS[0])
    ax.plot([r["tiles"] for r in rows], [100 * r["compute_bound_efficiency"] for r in rows], ":", color="black",
            label="compute-bound ceiling", zorder=4)
    ax.set_xlabel(f"tiles along K (count; M = tile_m, N = tile_n, {_tile_label(doc)})")
    ax.set_ylabel("MAC efficiency (%)")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, max(r["tiles"] for r in rows) + 1)
    ax.legend(ncols=4, loc="lower left", bbox_to_anchor=(0, 1.01), borderaxespad=0, frameon=False)
    return fig


FIGURES = (
    FigureSpec("gemm_efficiency", "gemm",
               "Measured MAC efficiency of one composite GEMM on one PE for every shape and operand staging. The "
               "black bar over each group is the shape's fill cap, the share of the paid tile MACs that the shape "
               "uses.", COMMAND, draw_efficiency),
    FigureSpec("gemm_theory", "gemm",
               "Measured efficiency against the independent pipeline model (diamonds) and the compute-bound "
               "ceiling (dashes), and the model's relative error at every point of both series (open markers: the "
               "shapes; dots: the tile series).",
               COMMAND, draw_theory,
               tex_caption=r"The grey band is $\pm$\kbGemmBandNarrow{}, the dashed lines $\pm$\kbGemmBandWide."),
    FigureSpec("gemm_stages", "gemm",
               "Busy time of each pipeline stage inside the composite, per shape and staging (log scale); the "
               "black bar is the composite's own time, and a zero marks a stage that has no work in that staging.",
               COMMAND, draw_stages, 0.9),
    FigureSpec("gemm_tiles", "gemm",
               "MAC efficiency against the number of tiles along K (one output tile) for each staging, measured "
               "(broad pale lines) beside the pipeline model (dashed) and the compute-bound ceiling (dotted).",
               COMMAND, draw_tiles),
)
