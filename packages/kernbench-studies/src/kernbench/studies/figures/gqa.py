"""GQA study figures: latency by headline panel, op mix beside engine occupancy, the long-context partitionings'
latency and KV bytes per cube, and dispatch cycles per KV tile."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import FuncFormatter, NullFormatter

from kernbench.studies.figures.common import FigureSpec, new_figure
from kernbench.studies.results import select

COMMAND = "kernbench study gqa"
OPS = ("gemm", "math", "dma_read", "dma_write", "ipcq_copy")
ENGINES = ("pe_dma", "pe_fetch_store", "pe_gemm", "pe_math", "pe_cpu")
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
PARTITION_COLORS = {"cube_sp_pe_tp": "#d95f02", "cube_repl_pe_tp": "#e7298a", "cube_repl_pe_sp": "#7570b3",
                    "cube_sp_pe_sp": "#1b9e77"}
VARIANT_COLORS = {"opt1": "#d95f02", "opt2": "#1b9e77", "opt3": "#7570b3"}


def _plain_log(ax) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def draw_panels(doc: dict):
    """Latency of each headline panel."""
    rows = select(doc, panel="headline")
    fig, ax = new_figure(6.4, 2.5)
    x = np.arange(len(rows))
    ax.bar(x, [r["latency_ns"] / 1e3 for r in rows], 0.55, color=PALETTE[0])
    ax.set_xticks(x, [r["name"] for r in rows])
    ax.set_xlabel("headline panel")
    ax.set_ylabel("latency (µs)")
    return fig


def draw_opmix(doc: dict):
    """(a) Operations per headline panel; (b) summed busy time per engine (log scale)."""
    rows = select(doc, panel="headline")
    fig, (ax, bx) = new_figure(6.4, 2.9, ncols=2)
    x = np.arange(len(rows))
    w = 0.8 / len(OPS)
    for i, o in enumerate(OPS):
        ax.bar(x + (i - (len(OPS) - 1) / 2) * w, [max(r[f"op_{o}"], 0.5) for r in rows], w, color=PALETTE[i],
               label=o)
    _plain_log(ax)
    ax.set_ylabel("operations (count, log scale)")
    ax.set_title("(a) operation mix", loc="left")
    ax.legend(ncols=2, frameon=False, fontsize=6.5)
    w = 0.8 / len(ENGINES)
    for i, e in enumerate(ENGINES):
        bx.bar(x + (i - (len(ENGINES) - 1) / 2) * w, [max(r[f"occupancy_{e}_ns"], 1.0) for r in rows], w,
               color=PALETTE[i], label=e)
    _plain_log(bx)
    bx.set_ylabel("summed busy time (ns, log scale)")
    bx.set_title("(b) engine occupancy", loc="left")
    bx.legend(ncols=2, frameon=False, fontsize=6.5)
    for a in (ax, bx):
        a.set_xticks(x, [r["name"] for r in rows], rotation=25, ha="right", rotation_mode="anchor")
    fig.tight_layout()
    return fig


def draw_partitions(doc: dict):
    """(a) Long-context decode latency against S per partitioning; (b) KV bytes of the fullest cube."""
    fig, (ax, bx) = new_figure(6.4, 2.9, ncols=2)
    parts: dict[str, list[dict]] = {}
    for r in select(doc, panel="long_context"):
        parts.setdefault(r["partition"], []).append(r)
    for name, rows in parts.items():
        s = [r["keys"] for r in rows]
        ax.plot(s, [r["latency_ns"] / 1e3 for r in rows], "o-", color=PARTITION_COLORS.get(name, "black"),
                markersize=3.5, label=name)
        bx.plot(s, [r["kv_bytes_max_cube"] / 2**20 for r in rows], "o-", color=PARTITION_COLORS.get(name, "black"),
                markersize=3.5, label=name)
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        keys = sorted({r["keys"] for r in select(doc, panel="long_context")})
        a.set_xticks(keys, [f"{k // 1024}K" for k in keys])
        a.minorticks_off()
        a.set_xlabel("KV sequence length S (keys, log scale)")
        _plain_log(a)
    ax.set_ylabel("decode latency (µs, log scale)")
    ax.set_title("(a) one user, 8 cubes × 8 PEs", loc="left")
    bx.set_ylabel("KV bytes in the fullest cube (MiB, log)")
    bx.set_title("(b) KV cache per cube", loc="left")
    ax.legend(frameon=False, fontsize=6.5)
    fig.tight_layout()
    return fig


def dispatch_per_tile(doc: dict) -> dict[str, float]:
    """PE_CPU dispatch cycles per KV tile of each local loop: the difference between its two tile counts divided
    by the difference in tiles."""
    out = {}
    for v in VARIANT_COLORS:
        rows = sorted(select(doc, panel="dispatch", variant=v), key=lambda r: r["kv_tiles"])
        if len(rows) >= 2:
            a, b = rows[0], rows[-1]
            out[v] = (b["dispatch_cycles"] - a["dispatch_cycles"]) / (b["kv_tiles"] - a["kv_tiles"])
    return out


def draw_dispatch(doc: dict):
    """Dispatch cycles per KV tile for opt1, opt2 and opt3 (single PE)."""
    per = dispatch_per_tile(doc)
    fig, ax = new_figure(6.4, 2.4)
    x = np.arange(len(per))
    ax.bar(x, list(per.values()), 0.5, color=[VARIANT_COLORS[v] for v in per])
    ax.set_xticks(x, list(per))
    ax.set_xlabel("local loop of the decode kernel")
    ax.set_ylabel("PE_CPU dispatch per KV tile (cycles)")
    return fig


FIGURES = (
    FigureSpec("gqa_panels", "gqa", "Fused GQA latency of the four headline panels (prefill and decode, one and "
               "four users).", COMMAND, draw_panels),
    FigureSpec("gqa_opmix", "gqa", "Where the work goes in each headline panel: operation counts, and the summed busy "
               "time of each PE engine on a log scale.", COMMAND, draw_opmix),
    FigureSpec("gqa_partitions", "gqa", "Long-context decode of one user over 8 cubes × 8 PEs: latency of the four "
               "partitionings against the sequence length, and the KV bytes the fullest cube holds.", COMMAND,
               draw_partitions),
    FigureSpec("gqa_dispatch", "gqa", "PE_CPU dispatch cycles per KV tile of the three local loops of the decode "
               "kernel on one PE (the difference between runs of 16 and 32 tiles).", COMMAND, draw_dispatch, 0.8),
)
