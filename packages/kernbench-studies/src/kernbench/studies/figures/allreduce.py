"""All-reduce study figures: latency vs payload per topology and per buffer kind, the HBM sensitivity panel, and
the two ablations that say why the topologies order as they do."""

from __future__ import annotations

from kernbench.studies.figures.common import (
    COLORS,
    TOPOLOGY_ORDER,
    FigureSpec,
    kib,
    log_ticks,
    new_figure,
    topology_color,
)
from kernbench.studies.results import select
from kernbench.topology.sip_topologies import MESH_2D_NO_WRAP, RING_1D, TORUS_2D

COMMAND = "kernbench study allreduce"
KINDS = ("tcm", "sram", "hbm")


def _payload_axis(ax, payloads: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = [p for p in payloads if p in (16, 256, 4096) or p == payloads[-1]]
    ax.set_xticks(ticks, [kib(p) for p in ticks])
    ax.minorticks_off()
    ax.set_xlabel("payload per PE (bytes, log scale)")


def _log_latency(ax) -> None:
    ax.set_yscale("log")
    log_ticks(ax.yaxis)
    ax.set_ylabel("all-reduce latency (µs, log scale)")


#: One marker per series, and one dash pattern per series' model, so that curves lying on each other stay apart.
MARKERS = ("o", "s", "^", "D", "v")
MODEL_STYLES = ("--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 2)))


def _curves(ax, rx, groups: list[tuple[str, list[dict]]], base: list[dict] | None) -> None:
    for i, (name, rows) in enumerate(groups):
        b = [r["bytes_per_pe"] for r in rows]
        color = topology_color(name)
        marker = MARKERS[i % len(MARKERS)]
        ax.plot(b, [r["allreduce_ns"] / 1e3 for r in rows], f"{marker}-", color=color, markersize=3.5,
                markerfacecolor="none", label=name)
        ax.plot(b, [r["model_ns"] / 1e3 for r in rows], linestyle=MODEL_STYLES[i % len(MODEL_STYLES)], color=color,
                linewidth=1.0, label=f"{name} α–β model")
        if base is not None:
            rx.plot(b, [r["allreduce_ns"] / x["allreduce_ns"] for r, x in zip(rows, base, strict=True)],
                    f"{marker}-", color=color, markersize=3.5, markerfacecolor="none", label=name)


def _legend_below(fig, ax) -> None:
    """One legend for both panels, under the figure, where it can cover no data."""
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, ncols=3, loc="lower center", bbox_to_anchor=(0.5, 0.0), frameon=False,
               fontsize=7)


def draw_topologies(doc: dict):
    """(a) Latency vs payload for ring, torus and mesh with their α–β curves; (b) latency relative to the torus."""
    groups = []
    for topo in TOPOLOGY_ORDER:
        rows = select(doc, panel="topology", sip_topology=topo)
        if rows:
            groups.append((topo, rows))
    base = next(rows for name, rows in groups if name == TORUS_2D.name)
    fig, (ax, rx) = new_figure(6.4, 2.9, ncols=2, gridspec_kw={"width_ratios": [3, 2]})
    _curves(ax, rx, groups, base)
    payloads = [r["bytes_per_pe"] for r in base]
    for a in (ax, rx):
        _payload_axis(a, payloads)
    _log_latency(ax)
    ax.set_title(f"(a) {base[0]['sips']} SIPs, TCM receive rings", loc="left")
    rx.set_ylabel("latency / torus latency (ratio)")
    rx.set_title(f"(b) relative to {TORUS_2D.name}", loc="left")
    _legend_below(fig, ax)
    return fig


def draw_buffer_kinds(doc: dict):
    """(a) Latency vs payload on the torus for TCM, SRAM and HBM receive rings with α–β curves; (b) relative to
    TCM."""
    groups = [(k, select(doc, panel="buffer_kind", buffer_kind=k)) for k in KINDS]
    groups = [(k, rows) for k, rows in groups if rows]
    base = groups[0][1]
    fig, (ax, rx) = new_figure(6.4, 2.9, ncols=2, gridspec_kw={"width_ratios": [3, 2]})
    _curves(ax, rx, groups, base)
    payloads = [r["bytes_per_pe"] for r in base]
    for a in (ax, rx):
        _payload_axis(a, payloads)
    _log_latency(ax)
    ax.set_title(f"(a) {TORUS_2D.name}, receive rings by memory", loc="left")
    rx.set_ylabel(f"latency / {groups[0][0]} latency (ratio)")
    rx.set_title(f"(b) relative to {groups[0][0]}", loc="left")
    _legend_below(fig, ax)
    return fig


def draw_sensitivity(doc: dict):
    """Latency at the panel's payload for each buffer kind as the HBM pseudo-channel bandwidth grows, measured
    (solid) and α–β model (dashed)."""
    fig, ax = new_figure(6.4, 2.8)
    payload = None
    for k in KINDS:
        rows = select(doc, panel="sensitivity", buffer_kind=k)
        if not rows:
            continue
        payload = rows[0]["bytes_per_pe"]
        c = [r["channel_gbs"] for r in rows]
        ax.plot(c, [r["allreduce_ns"] / 1e3 for r in rows], "o-", color=COLORS[k], markersize=3.5, label=k)
        ax.plot(c, [r["model_ns"] / 1e3 for r in rows], "--", color=COLORS[k], linewidth=1.0,
                label=f"{k} α–β model")
    ax.set_xlabel("HBM pseudo-channel bandwidth (GB/s)")
    ax.set_ylabel("all-reduce latency (µs)")
    ax.set_title(f"{TORUS_2D.name}, {kib(payload or 0)} per PE", loc="left")
    ax.legend(ncols=1, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False, fontsize=7)
    return fig


#: The runs the ablation figure compares: panel, legend label, colour, marker.
ABLATIONS = (
    ("topology", "shipped exchange, full cube mesh per SIP", "#333333", "o"),
    ("exchange_only", "shipped exchange, one cube per SIP", "#e6ab02", "s"),
    ("schedule", "one-way exchange, full cube mesh per SIP", "#66a61e", "^"),
)


def draw_ablation(doc: dict):
    """(a) Ring latency over mesh latency against the payload, for the topology panel and its two ablations;
    (b) the exchange between SIPs of each topology beside the reduction and broadcast inside the SIPs (the same
    for all three), measured in the topology panel."""
    fig, (ax, bx) = new_figure(6.4, 3.1, ncols=2)
    payloads = []
    for panel, label, color, marker in ABLATIONS:
        ring = select(doc, panel=panel, sip_topology=RING_1D.name)
        mesh = select(doc, panel=panel, sip_topology=MESH_2D_NO_WRAP.name)
        if not ring or not mesh:
            continue
        payloads = [r["bytes_per_pe"] for r in ring]
        ax.plot(payloads, [r["allreduce_ns"] / m["allreduce_ns"] for r, m in zip(ring, mesh, strict=True)],
                f"{marker}-", color=color, markersize=3.5, markerfacecolor="none", label=label)
    ax.axhline(1.0, color="#999999", linewidth=0.8, zorder=0)
    _payload_axis(ax, payloads)
    ax.set_ylabel("ring latency / mesh latency (ratio)")
    ax.set_title("(a) below the grey line the ring is faster", loc="left")
    for i, topo in enumerate(TOPOLOGY_ORDER):
        rows = select(doc, panel="topology", sip_topology=topo)
        if rows:
            bx.plot([r["bytes_per_pe"] for r in rows], [r["exchange_ns"] / 1e3 for r in rows],
                    f"{MARKERS[i % len(MARKERS)]}-", color=topology_color(topo), markersize=3.5,
                    markerfacecolor="none", label=f"{topo}: exchange")
    torus = select(doc, panel="topology", sip_topology=TORUS_2D.name)
    bx.plot([r["bytes_per_pe"] for r in torus], [(r["reduce_ns"] + r["broadcast_ns"]) / 1e3 for r in torus], "--",
            color="#666666", linewidth=1.2, label="inside the SIPs (every topology)")
    _payload_axis(bx, payloads)
    _log_latency(bx)
    bx.set_ylabel("time (µs, log scale)")
    bx.set_title("(b) where the time goes", loc="left")
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    handles, labels = [], []
    for a in (ax, bx):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, ncols=2, loc="lower center", bbox_to_anchor=(0.5, 0.0), frameon=False, fontsize=7)
    return fig


FIGURES = (
    FigureSpec("allreduce_topologies", "allreduce",
               "All-reduce latency over the SIPs of the tray against the payload per PE for each logical SIP topology, "
               "measured (points) beside each topology's α–β model (dashed), and each topology's latency relative "
               "to the torus.", COMMAND, draw_topologies),
    FigureSpec("allreduce_buffer_kinds", "allreduce",
               "All-reduce latency on the 2×3 torus with the IPCQ receive rings in TCM, SRAM or HBM, measured beside "
               "the α–β model, and each kind relative to TCM.", COMMAND, draw_buffer_kinds),
    FigureSpec("allreduce_sensitivity", "allreduce",
               "Sensitivity panel: all-reduce latency per buffer kind as the HBM pseudo-channel bandwidth is raised "
               "(a spec override of the torus topology), measured (solid) and modelled (dashed).",
               COMMAND, draw_sensitivity),
    FigureSpec("allreduce_ablation", "allreduce",
               "Why the topologies order as they do. (a) Ring latency over mesh latency by payload per PE, with "
               "the shipped exchange between SIPs and each SIP's full cube mesh (the topology panel), with one cube "
               "per SIP (so the all-reduce is the exchange alone), and with a one-way exchange that takes more "
               "serial steps on the mesh than on the ring. (b) The exchange between SIPs of each topology beside "
               "the reduction and broadcast inside the SIPs, measured in the topology panel: only the exchange "
               "depends on the topology.", COMMAND, draw_ablation),
)
