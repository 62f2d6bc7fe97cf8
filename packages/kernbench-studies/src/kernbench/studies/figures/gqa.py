"""GQA study figures: latency by headline panel, op mix beside engine occupancy, the long-context partitionings'
latency and KV bytes per cube, and dispatch cycles per KV tile."""

from __future__ import annotations

import numpy as np

from kernbench.studies import gqa_reference
from kernbench.studies.figures.common import FigureSpec, log_ticks, new_figure
from kernbench.studies.gqa import LONG_CUBES, LONG_PES, headline_rows
from kernbench.studies.results import select

COMMAND = "kernbench study gqa"
OPS = ("gemm", "math", "dma_read", "dma_write", "ipcq_copy")
ENGINES = ("pe_dma", "pe_fetch_store", "pe_gemm", "pe_math", "pe_cpu")
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
PARTITION_COLORS = {"cube_sp_pe_tp": "#d95f02", "cube_repl_pe_tp": "#e7298a", "cube_repl_pe_sp": "#7570b3",
                    "cube_sp_pe_sp": "#1b9e77"}
#: Marker and line style per partitioning: two partitionings whose curves coincide stay both visible.
PARTITION_STYLES = {"cube_sp_pe_tp": ("s", "--", 6.0), "cube_repl_pe_tp": ("o", "-", 3.5),
                    "cube_repl_pe_sp": ("^", "-", 3.5), "cube_sp_pe_sp": ("D", "-", 3.5)}
VARIANT_COLORS = {"opt1": "#d95f02", "opt2": "#1b9e77", "opt3": "#7570b3"}
#: How a headline panel name reads on an axis: phase, users, PEs, partitioning.
_PHASES = {"prefill": "prefill", "decode": "decode"}


def panel_label(name: str, first: str = ", ", rest: str = ", ") -> str:
    """A headline panel's name in words: ``prefill_c4_ring`` -> ``prefill, 4 users, ring``, ``decode_c1_p8`` ->
    ``decode, 1 user, 8 PEs`` (``first`` after the phase, ``rest`` between the others: newlines for a tick
    label)."""
    parts = name.split("_")
    words = [_PHASES.get(parts[0], parts[0])]
    for p in parts[1:]:
        if p[:1] == "c" and p[1:].isdigit():
            words.append(f"{p[1:]} user" + ("s" if p[1:] != "1" else ""))
        elif p[:1] == "p" and p[1:].isdigit():
            words.append(f"{p[1:]} PE" + ("s" if p[1:] != "1" else ""))
        else:
            words.append(p)
    return words[0] + (first + rest.join(words[1:]) if len(words) > 1 else "")


def _plain_log(ax) -> None:
    ax.set_yscale("log")
    log_ticks(ax.yaxis)


def draw_panels(doc: dict):
    """Latency of each headline panel."""
    rows = headline_rows(doc)
    fig, ax = new_figure(6.4, 2.5)
    x = np.arange(len(rows))
    ax.bar(x, [r["latency_ns"] / 1e3 for r in rows], 0.55, color=PALETTE[0])
    ax.set_xticks(x, [panel_label(r["name"], "\n") for r in rows])
    ax.set_xlabel("headline panel")
    ax.set_ylabel("latency (µs)")
    return fig


def _log_bars(ax, x, rows, keys: tuple[str, ...], field: str, floor: float) -> None:
    """Grouped bars of ``field % key`` on a log axis; a zero gets no bar (it has no place on the axis) but a "0"
    at the bottom of its slot."""
    w = 0.8 / len(keys)
    for i, k in enumerate(keys):
        xs = x + (i - (len(keys) - 1) / 2) * w
        vals = [r[field % k] for r in rows]
        ax.bar(xs, [v if v > 0 else np.nan for v in vals], w, color=PALETTE[i], label=k)
        for xi, v in zip(xs, vals, strict=True):
            if v <= 0:
                ax.annotate("0", (xi, floor), xytext=(0, 1), textcoords="offset points", ha="center", va="bottom",
                            fontsize=7, color=PALETTE[i])
    _plain_log(ax)
    ax.set_ylim(floor, None)


def draw_opmix(doc: dict):
    """(a) Operations per headline panel; (b) summed busy time per engine (log scale)."""
    rows = headline_rows(doc)
    fig, (ax, bx) = new_figure(6.4, 3.3, ncols=2)
    x = np.arange(len(rows))
    _log_bars(ax, x, rows, OPS, "op_%s", 0.5)
    ax.set_ylabel("operations (count, log scale)")
    ax.set_title("(a) operation mix", loc="left")
    _log_bars(bx, x, rows, ENGINES, "occupancy_%s_ns", 1.0)
    bx.set_ylabel("summed busy time (ns, log scale)")
    bx.set_title("(b) engine occupancy", loc="left")
    for a in (ax, bx):
        a.set_xticks(x, [panel_label(r["name"], "\n", "\n") for r in rows])
        a.legend(ncols=3, loc="upper left", bbox_to_anchor=(0, -0.3), borderaxespad=0, frameon=False,
                 fontsize=6.5)
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
        marker, line, size = PARTITION_STYLES.get(name, ("o", "-", 3.5))
        style = {"color": PARTITION_COLORS.get(name, "black"), "marker": marker, "linestyle": line,
                 "markersize": size, "markerfacecolor": "none", "label": name}
        ax.plot(s, [r["latency_ns"] / 1e3 for r in rows], **style)
        bx.plot(s, [r["kv_bytes_max_cube"] / 2**20 for r in rows], **style)
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        keys = sorted({r["keys"] for r in select(doc, panel="long_context")})
        a.set_xticks(keys, [f"{k // 1024}K" for k in keys])
        a.minorticks_off()
        a.set_xlabel("KV sequence length S (keys, log scale)")
        _plain_log(a)
    ax.set_ylabel("decode latency (µs, log scale)")
    ax.set_title(f"(a) one user, {LONG_CUBES} cubes × {LONG_PES} PEs", loc="left")
    bx.set_ylabel("KV bytes in the fullest cube (MiB, log)")
    bx.set_title("(b) KV cache per cube", loc="left")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 0.0), frameon=False, fontsize=7)
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


#: The three columns of the reference comparison: the earlier report, its kernels on our model, ours.
SOURCES = (("reference", "earlier report", "#999999"), ("earlier", "their kernels here", "#d95f02"),
           ("ours", "our kernels here", "#1b9e77"))


def reference_latencies(doc: dict, dispatch: str) -> tuple[list[str], dict[str, list[float | None]]]:
    """Workload names (the earlier report's, in its order) and, per source, each workload's latency in ns (None:
    not run or not reported); the reference's own column is its claim whatever ``dispatch`` is."""
    names = [w.name for w in gqa_reference.WORKLOADS if w.name != gqa_reference.SWEEP]
    claims = gqa_reference.REFERENCE
    out: dict[str, list[float | None]] = {"reference": [claims[n].latency_ns if n in claims else None
                                                        for n in names]}
    for kernels in ("earlier", "ours"):
        got = {r["workload"]: r["latency_ns"]
               for r in select(doc, panel="reference", kernels=kernels, dispatch=dispatch)}
        out[kernels] = [got.get(n) for n in names]
    return names, out


def workload_label(name: str) -> str:
    """An earlier-report workload's name on an axis, in words (``multi_user_decode_gqa`` -> ``4-cube decode``)."""
    return gqa_reference.LABELS[name].replace(" decode", "\ndecode").replace(" prefill", "\nprefill")


def draw_reference(doc: dict):
    """(a) The earlier report's workloads: its latency, its kernels on our model and ours, as modelled; (b) the
    same runs with zero dispatch cost. A missing value gets no bar but "n/a"."""
    fig, axes = new_figure(6.4, 4.0, nrows=2, sharex=True)
    for ax, dispatch, title in zip(axes, ("model", "zero"), ("(a) as modelled", "(b) zero dispatch cost"),
                                   strict=True):
        names, lat = reference_latencies(doc, dispatch)
        x = np.arange(len(names))
        w = 0.8 / len(SOURCES)
        for i, (key, label, color) in enumerate(SOURCES):
            xs = x + (i - (len(SOURCES) - 1) / 2) * w
            vals = lat[key]
            ax.bar(xs, [v / 1e3 if v is not None else np.nan for v in vals], w, color=color, label=label)
            for xi, v in zip(xs, vals, strict=True):
                if v is None:
                    ax.annotate("n/a", (xi, 0), xytext=(0, 2), textcoords="offset points", ha="center",
                                va="bottom", fontsize=6, rotation=90, color=color)
        ax.set_title(title, loc="left")
        ax.set_ylabel("latency (µs)")
    axes[1].set_xticks(x, [workload_label(n) for n in names])
    axes[1].set_xlabel("the earlier report's workload")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, ncols=3, loc="lower center", bbox_to_anchor=(0.5, 0.0), frameon=False, fontsize=7)
    return fig


FIGURES = (
    FigureSpec("gqa_panels", "gqa", "Fused GQA latency of the headline panels (prefill and decode, for one user "
               "and for several).", COMMAND, draw_panels),
    FigureSpec("gqa_opmix", "gqa", "Where the work goes in each headline panel: operation counts, and the summed busy "
               "time of each PE engine on a log scale.", COMMAND, draw_opmix),
    FigureSpec("gqa_partitions", "gqa", "Long-context decode of one user: latency of each partitioning against the "
               "sequence length, and the KV bytes the fullest cube holds.", COMMAND, draw_partitions,
               tex_caption=r"The cache is spread over \kbGqaLongCubes{} cubes of \kbGqaLongPes{} PEs."),
    FigureSpec("gqa_dispatch", "gqa", "PE_CPU dispatch cycles per KV tile of each local loop of the decode kernel "
               "on one PE, from the difference between a shorter and a longer run.", COMMAND, draw_dispatch, 0.8,
               tex_caption=r"The runs have \kbGqaDispatchTilesLow{} and \kbGqaDispatchTilesHigh{} KV tiles of "
                           r"\kbGqaTileKeys{} keys."),
    FigureSpec("gqa_reference", "gqa", "The earlier report's GQA workloads: the latency that report gives, "
               "the earlier team's kernels run on this model, and this library's kernels with the same shapes and "
               "mapping; (a) as modelled, (b) with the PE_CPU dispatch cost set to zero.",
               COMMAND + " (with KERNBENCH_EARLIER_KERNELS set for the middle column)", draw_reference),
)
