"""Attention speed: long-context decode, the four decode partitionings, and the headline panels.

Four measurements, all in timing mode on ``topologies/topology.yaml``, written to
``out/benchmarks/attention.json`` (``--out FILE``; ``--update-committed`` rewrites the committed
``benchmarks/results/attention.json`` that docs/attention.md quotes):

1. ``single_pe_bench``: the ``gqa-decode-single-pe`` bench at S_kv = 131072 (128K), G = 8, d = 64,
   64-key tiles, for each of its variants: wall time of the whole bench run and the simulated
   kernel time on the PE (target: under 60 s wall).
2. ``long_context``: ``gqa_decode`` with ``cube_sp_pe_sp`` over 8 cubes x 8 PEs at S = 128K against
   ``single_pe`` at the same S (G = 8, one KV head, d = 64, opt2): simulated window, wall time of the
   call (deployment included) and SimPy events. Targets: cube_sp_pe_sp faster in simulated time,
   under 60 s wall.
3. ``partitions``: the four long-context partitionings (``cube_sp_pe_tp``, ``cube_repl_pe_tp``,
   ``cube_repl_pe_sp``, ``cube_sp_pe_sp``) over 8 cubes x 8 PEs at S = 4096 and S = 131072: window
   and per-engine occupancy and wall-clock span (``engines`` of the result), active PEs, messages.
4. ``headline``: each panel of ``gqa-headline`` run alone in a fresh context, in timing and in data
   mode: wall time (target: under 5 s each), window, op counts.

Run with ``python benchmarks/bench_attention.py`` (``--skip-partitions-128k`` leaves out the
slowest part: deploying 64 copies of a 128K cache for ``cube_repl_pe_tp`` takes about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from _output import add_output_options, output_path, write_result

from kernbench.benches.gqa_headline import PANELS, run_panel
from kernbench.layers.attention import gqa_decode
from kernbench.runtime import RuntimeContext
from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
LONG = 131072
FOUR = ("cube_sp_pe_tp", "cube_repl_pe_tp", "cube_repl_pe_sp", "cube_sp_pe_sp")


def _arrays(s: int):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 8, 1, 64)).astype(np.float16)
    k = rng.standard_normal((1, 1, s, 64)).astype(np.float16)
    v = rng.standard_normal((1, 1, s, 64)).astype(np.float16)
    return q, k, v


def _decode(graph, s: int, partition: str, pes: int, cubes: int) -> dict:
    torch = RuntimeContext(graph)
    q, k, v = _arrays(s)
    t = time.perf_counter()
    r = gqa_decode(torch, q, k, v, partition=partition, pes=pes, cubes=cubes)
    wall = time.perf_counter() - t
    return {"latency_ns": r.latency_ns, "wall_s": wall, "events": torch.engine.events, "pes_active": r.pes_active,
            "ipcq_messages": r.ipcq_messages, "kv_bytes_per_cube": {str(c): b for c, b in r.kv_bytes_per_cube.items()},
            "engines": r.engines, "op_counts": r.op_counts}


def single_pe_bench(graph) -> dict:
    info = discover().resolve("gqa-decode-single-pe")
    out = {}
    for variant in ("opt1", "opt2", "opt3"):
        os.environ.update(GQA_SKV=str(LONG), GQA_G="8", GQA_DHEAD="64", GQA_TILE="64", GQA_VARIANT=variant)
        t = time.perf_counter()
        r = run_bench(info, graph)
        wall = time.perf_counter() - t
        if not r.ok:
            raise SystemExit(r.error)
        out[variant] = {"wall_s": wall, "kernel_ns": r.engines["pe_cpu"]["occupancy_ns"], "events": r.events}
    for key in ("GQA_SKV", "GQA_G", "GQA_DHEAD", "GQA_TILE", "GQA_VARIANT"):
        os.environ.pop(key, None)
    return out


def headline(graph) -> dict:
    out = {}
    for panel in PANELS:
        row = {}
        for mode, data in (("timing", False), ("data", True)):
            t = time.perf_counter()
            r = run_panel(RuntimeContext(graph, data=data), panel)
            row[mode] = {"wall_s": time.perf_counter() - t, "latency_ns": r.latency_ns, "op_counts": r.op_counts}
        out[panel.name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-partitions-128k", action="store_true", help="measure the four partitionings at 4K only")
    add_output_options(parser, "attention.json")
    args = parser.parse_args(argv)
    path = output_path(args, "attention.json")
    graph = load_topology(ROOT / "topologies" / "topology.yaml")
    results: dict = {"command": "python benchmarks/bench_attention.py", "targets": {"long_context_wall_s": 60.0,
                                                                                    "headline_panel_wall_s": 5.0}}
    results["single_pe_bench"] = {"s_kv": LONG, "g": 8, "d_head": 64, "tile": 64, "results": single_pe_bench(graph)}
    print("single_pe_bench", json.dumps(results["single_pe_bench"]["results"]), flush=True)
    long = {"cube_sp_pe_sp": _decode(graph, LONG, "cube_sp_pe_sp", 8, 8), "single_pe": _decode(graph, LONG,
                                                                                               "single_pe", 1, 1)}
    results["long_context"] = {"s": LONG, "g": 8, "d": 64, "cubes": 8, "pes": 8, "results": long}
    for name, r in long.items():
        print(f"long_context {name}: {r['latency_ns']:.1f} ns simulated, {r['wall_s']:.1f} s wall", flush=True)
    parts: dict = {}
    for s in (4096,) if args.skip_partitions_128k else (4096, LONG):
        parts[str(s)] = {}
        for p in FOUR:
            parts[str(s)][p] = _decode(graph, s, p, 8, 8)
            r = parts[str(s)][p]
            print(f"partitions S={s} {p}: {r['latency_ns']:.1f} ns, {r['wall_s']:.1f} s wall", flush=True)
    results["partitions"] = {"cubes": 8, "pes": 8, "g": 8, "d": 64, "variant": "opt2", "results": parts}
    results["headline"] = headline(graph)
    for name, row in results["headline"].items():
        print(f"headline {name}: {row['timing']['latency_ns']:.1f} ns, wall {row['timing']['wall_s']:.2f} s "
              f"(timing) / {row['data']['wall_s']:.2f} s (data)", flush=True)
    write_result(path, results)
    ok = long["cube_sp_pe_sp"]["wall_s"] < 60.0 and long["cube_sp_pe_sp"]["latency_ns"] < long["single_pe"][
        "latency_ns"] and all(v["wall_s"] < 60.0 for v in results["single_pe_bench"]["results"].values()) and all(
        row[m]["wall_s"] < 5.0 for row in results["headline"].values() for m in ("timing", "data"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
