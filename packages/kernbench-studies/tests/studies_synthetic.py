"""Synthetic results documents for testing the figure and report pipeline without running simulations.

The values are made up from simple formulas of the point params (not measurements, never shown anywhere but in
test output folders); they only have to be complete, finite and different from point to point, so that tests can
follow one value from a results file into a figure, a macro and the PDF. The all-reduce links points name real
links of their topology (a heatmap draws on the compiled graph), with made-up traffic, and the provenance holds
the real SHA-256 of every topology file, as a run would record it.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernbench.studies import results as res
from kernbench.studies.cache import file_digest
from kernbench.studies.graphs import study_graph
from kernbench.studies.registry import get_study

TOPOLOGIES = Path(__file__).resolve().parents[3] / "topologies"

PROVENANCE = {"packages": {"kernbench-studies": "test"}, "python": "test", "topology_files": {},
              "source_sha256": "0" * 64, "git_commit": None}


def _gemm_values(p: dict) -> dict:
    if p["series"] == "tiles":
        m, k, n = 32, 32 * p["k_tiles"], 64
    else:
        m, k, n = p["m"], p["k"], p["n"]
    tiles = -(-m // 32) * -(-n // 64) * -(-k // 32)
    out_tiles = -(-m // 32) * -(-n // 64)
    macs, tile_macs = m * k * n, tiles * 32 * 64 * 32
    slow = {"ref_ref": 14.0, "load_ref": 9.0, "load_load": 1.0}[p["variant"]]
    t = 30.0 + tiles * 16.384 * slow
    model = t * (1.03 if tiles % 7 else 0.8)  # every seventh point misses by 20 %: an outlier to report
    cb = 28.0 + tiles * 16.384
    return {"m": m, "k": k, "n": n, "tile_m": 32, "tile_n": 64, "tile_k": 32, "tiles": tiles,
            "output_tiles": out_tiles, "macs": macs, "tile_macs": tile_macs, "fill_ratio": macs / tile_macs,
            "composite_ns": t, "mac_efficiency": macs / (4000 * t), "model_ns": model,
            "model_efficiency": macs / (4000 * model), "model_error": (model - t) / t,
            "model_bottleneck": "GEMM" if slow == 1 else "DMA_READ", "compute_bound_ns": cb,
            "compute_bound_efficiency": macs / (4000 * cb), "model_read_ns": 16.384 * (slow - 1),
            "model_fetch_ns": 12.0, "model_gemm_ns": 16.384, "model_store_ns": 8.0 * out_tiles / tiles,
            "model_write_ns": 40.0 * out_tiles / tiles, "busy_dma_read_ns": tiles * 16.384 * (slow - 1),
            "busy_fetch_ns": 12.0 * tiles, "busy_gemm_ns": 16.384 * tiles, "busy_store_ns": 8.0 * out_tiles,
            "busy_dma_write_ns": 40.0 * out_tiles, "events": 50 + 4 * tiles}


def _allreduce_values(p: dict) -> dict:
    topo = p["topology"].removeprefix("6sip_2x3_").removesuffix(".yaml")
    one_way = p.get("schedule") == "one_way"
    one_cube = p.get("cube_mesh") == "1x1"
    steps = {"ring_1d": 1.2, "torus_2d": 1.0, "mesh_2d_no_wrap": 1.15}[topo]
    if one_way:  # the one-way exchange: the mesh loses to the ring at every payload
        steps = {"ring_1d": 1.25, "torus_2d": 1.05, "mesh_2d_no_wrap": 1.3}[topo]
    kind = {"tcm": 1.0, "sram": 1.3, "hbm": 1.31}[p["buffer_kind"]]
    chan = p["hbm_channel_gbs"] or 16.0
    if p["buffer_kind"] == "hbm":
        kind = 1.0 + 0.31 * 16.0 / chan
    b = p["bytes_per_pe"]
    t = steps * (2000.0 + 0.35 * b * kind) * (0.5 if one_cube else 1.0)
    model = 0.94 * t
    sip = 0.0 if one_cube else 0.4 * t / steps  # the SIP-internal phases do not depend on the topology
    exchange = {"ring_1d": (3, 5), "torus_2d": (2, 3), "mesh_2d_no_wrap": (3, 4)}[topo]
    if one_way:
        exchange = {"ring_1d": (5, 5), "torus_2d": (3, 3), "mesh_2d_no_wrap": (6, 3)}[topo]
    out = {"sip_topology": topo, "sips": 6, "channel_gbs": chan, "allreduce_ns": t, "model_ns": model,
           "model_alpha_ns": 0.94 * steps * 2000.0, "model_beta_ns_per_b": 0.94 * steps * 0.35 * kind,
           "model_error": -0.06, "model_message_ns": 0.4 * model, "model_accumulate_ns": 0.5 * model,
           "messages": 10, "accumulates": 7, "exchange_messages": exchange[0], "exchange_accumulates": exchange[1],
           "reduce_ns": 0.6 * sip, "exchange_ns": t - sip, "broadcast_ns": 0.4 * sip, "ipcq_messages": 198,
           "events": 1000 + b // 16}
    if p.get("link_stats"):
        out.update(_links_values(p, 1.04 * t))
    return out


#: Edge kinds the synthetic links points put traffic on.
_LINK_KINDS = ("router_mesh", "router_to_pe", "pe_internal", "pcie", "cube_to_io", "io_to_cube", "ucie_mesh")


def synthetic_links(topology: str, window_ns: float) -> str:
    """A ``links`` value on real links of ``topology``: every PCIe link and every seventh link of a few other
    kinds, with made-up bytes, packets and busy times (the busiest, a PE-internal link, half the window)."""
    graph = study_graph(TOPOLOGIES, topology)
    rows = []
    for i, e in enumerate(graph.edges):
        if e.kind in _LINK_KINDS and (e.kind == "pcie" or i % 7 == 0):
            packets = 1 + (i * 7919) % 23
            nbytes = 4096 * packets
            rows.append([e.src, e.dst, e.kind, nbytes, packets, min(nbytes / e.bw_gbs * (1 + i % 5), 0.45 * window_ns)])
    # as in a real run, the run's busiest link lies inside a PE, where the tray's heatmap does not draw it
    first_pe = next(r for r in rows if r[2] == "pe_internal")
    first_pe[5] = 0.5 * window_ns
    return json.dumps(rows, separators=(",", ":"))


def _links_values(p: dict, window_ns: float) -> dict:
    text = synthetic_links(p["topology"], window_ns)
    rows = json.loads(text)
    top = max(rows, key=lambda r: r[5])
    return {"window_ns": window_ns, "links_used": len(rows), "link_bytes": sum(r[3] for r in rows),
            "busiest_link": f"{top[0]} → {top[1]}", "busiest_utilisation": top[5] / window_ns, "links": text}


def _gqa_values(p: dict) -> dict:
    keys = p.get("keys") or 64 * p.get("kv_tiles", 2)
    part = p.get("partition") or p.get("name") or p.get("variant")
    spread = {"cube_sp_pe_sp": 64, "cube_sp_pe_tp": 8, "cube_repl_pe_sp": 8, "cube_repl_pe_tp": 1}.get(part, 4)
    latency = 500.0 + 40.0 * keys / spread
    commands = {"opt1": 20, "opt2": 2, "opt3": 21}.get(part, 5) * p.get("kv_tiles", 4)
    return {"latency_ns": latency, "pes_active": spread, "ipcq_intra_cube": 3, "ipcq_inter_cube": 4,
            "kv_bytes_total": 256 * keys, "kv_bytes_max_cube": 256 * keys // max(1, spread // 8),
            "op_gemm": 8, "op_math": 30, "op_dma_read": 12, "op_dma_write": 2, "op_ipcq_copy": 7,
            "occupancy_pe_dma_ns": 4.0 * latency, "occupancy_pe_fetch_store_ns": latency,
            "occupancy_pe_gemm_ns": 0.5 * latency, "occupancy_pe_math_ns": 0.8 * latency,
            "occupancy_pe_cpu_ns": 2.0 * latency, "dispatch_cycles": 41.5 * commands, "commands": commands,
            "events": 100 + keys // 8}


def _moe_values(p: dict) -> dict:
    """The moe study's made-up values: collectives near an α–β line, the layer's steps and per-expert histogram
    from the routing and degree, drops from the capacity factor, dispatch links on real torus links, and the
    decoder block's parts."""
    import numpy as np

    from kernbench.studies.moe import LAYER, MOVE_STEPS
    from kernbench.studies.report.moe_tex import per_expert

    if p.get("placement"):
        handoff, ffn = 1500.0 * (p["placement"] == "tensor"), 30000.0 if p["ffn_kind"] == "dense" else 45000.0
        return {"sip_topology": "ring_1d", "sips": 2, "attention_ns": 20000.0, "handoff_ns": handoff,
                "ffn_ns": ffn, "block_ns": 20000.0 + handoff + ffn, "events": 9000}
    if p.get("collective"):
        topo = p["topology"].removeprefix("6sip_2x3_").removesuffix(".yaml")
        algo = p["algorithm"].removeprefix("grid_all_to_all_")
        alpha, beta = {"pairwise": (2500.0, 0.02), "hierarchical": (2800.0, 0.025), "": (1500.0, 0.1)}[algo]
        b = p["bytes_per_rank"]
        wiggle = 1.02 if (b.bit_length() // 2) % 2 else 0.98  # off the line, alternately above and below
        scale = {"ring_1d": 1.1, "torus_2d": 1.0, "mesh_2d_no_wrap": 1.2}[topo]
        return {"sip_topology": topo, "sips": 6, "latency_ns": (alpha + beta * b) * scale * wiggle,
                "events": 1000 + b // 64}
    sips, cap = p["sips_used"], p["capacity_factor"]
    slots = LAYER.tokens * LAYER.topk * sips
    s = 0.0 if p["distribution"] == "balanced" else 0.3 if p["distribution"] == "uniform" else float(p["skew"])
    w = np.array([(i + 1) ** -s for i in range(LAYER.experts)])
    counts = np.floor(w / w.sum() * slots).astype(int)
    counts[: slots - counts.sum()] += 1
    if cap is not None:
        counts = np.minimum(counts, per_expert(cap) * sips)
    multi, top = sips > 1, int(counts.max())
    steps = {"router": 700.0, "permute": 4000.0 * multi, "counts": 300.0 * sips * multi,
             "dispatch": (800.0 + 20.0 * top) * multi, "experts": 400.0 * top + 30000.0 / sips,
             "combine_exchange": (900.0 + 25.0 * top) * multi, "combine": 6000.0}
    total = sum(steps.values())
    out = {"sip_topology": "torus_2d", "sips": max(sips, 2), "moe_ns": total,
           **{f"{k}_ns": v for k, v in steps.items()}, "move_share": sum(steps[k] for k in MOVE_STEPS) / total,
           "max_load": top,
           "mean_load": float(counts.mean()), "imbalance": float(top / counts.mean()),
           "dropped": slots - int(counts.sum()), "histogram": json.dumps([int(c) for c in counts]),
           "events": 5000 + sips}
    if p.get("link_stats"):
        out.update(_links_values(p, steps["dispatch"]))
        out["window_ns"] = steps["dispatch"]
    return out


#: Made-up relative latency errors of flow fidelity, taken in turn by a study's fidelity-panel points.
FLOW_ERRORS = (0.002, -0.004, 0.0, 0.011, -0.0007)
#: Made-up speed-ups of flow fidelity, taken in turn; a GQA long-context point at the largest size gets
#: :data:`FAST_SPEEDUP`, so that some points reach the target and others miss it.
FLOW_SPEEDUPS = (1.3, 0.8, 2.4, 1.1, 3.5)
FAST_SPEEDUP = 32.0


def _flow_values(study, params: dict, values: dict, n: int) -> dict:
    """The values of the ``n``-th fidelity-panel point: its packet point's, the latency off by a made-up error."""
    field = study.fidelity.latency(params)
    return {**values, field: values[field] * (1 + FLOW_ERRORS[n % len(FLOW_ERRORS)]),
            "events": max(1, values["events"] // 8)}


def _flow_speedup(params: dict, n: int) -> float:
    if params.get("panel") == "long_context" and params.get("keys") == 131072:
        return FAST_SPEEDUP
    return FLOW_SPEEDUPS[n % len(FLOW_SPEEDUPS)]


def synthetic_doc(name: str) -> dict:
    """A complete results document of study ``name`` with made-up values (see the module docstring). Its fidelity
    panel's points hold their packet point's values with the latency off by :data:`FLOW_ERRORS` and wall times
    shorter by :data:`FLOW_SPEEDUPS`."""
    study = get_study(name)
    make = {"gemm": _gemm_values, "allreduce": _allreduce_values, "gqa": _gqa_values, "moe": _moe_values}[name]
    points, walls, n = [], [], 0
    for i, p in enumerate(study.grid()):
        params = dict(p.params)
        base = {k: v for k, v in params.items() if k != "fidelity"}
        values, wall = make(base), 0.01 * (1 + i % 7)
        if "fidelity" in params:
            values = _flow_values(study, base, values, n)
            wall = 0.02 * (1 + n % 3) / _flow_speedup(base, n)
            n += 1
        points.append({"labels": dict(p.labels), "params": params, "values": values})
        walls.append(wall)
    for i, p in enumerate(points):  # a packet point's wall time: its flow copy's times its speed-up
        if "fidelity" in p["params"]:
            base = {k: v for k, v in p["params"].items() if k != "fidelity"}
            j = next(k for k, q in enumerate(points) if q["params"] == base)
            walls[j] = walls[i] * _flow_speedup(base, _nth(points, i))
    run = {"argv": ["test"], "executor": "serial", "jobs": 1, "wall_s": 0.0, "points_run": len(points),
           "points_cached": 0, "point_wall_s": walls}
    files = sorted({f for p in study.grid() for f in study.files(dict(p.params))})
    topology_files = {f: file_digest(TOPOLOGIES / f) for f in files}
    return res.document(study, points, {**PROVENANCE, "topology_files": topology_files, "run": run})


def _nth(points: list[dict], i: int) -> int:
    """How many fidelity-panel points come before point ``i``."""
    return sum("fidelity" in p["params"] for p in points[:i])


def write_synthetic(folder, names=("gemm", "allreduce", "gqa", "moe")) -> dict:
    """Write synthetic ``results.json`` files as ``folder/NAME/``; returns the documents."""
    docs = {n: synthetic_doc(n) for n in names}
    for n, doc in docs.items():
        res.write(folder / n, doc)
    return docs
