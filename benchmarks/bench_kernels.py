"""Kernel-execution speed: a 2048-tile composite GEMM (512x512x512, f16) in timing mode.

Reports the wall time of the whole bench run (deployment, launch, kernel),
the SimPy events the engine processed, and the engine's wall time per event
against a bare SimPy ``timeout`` loop of the same event count in the same
process. That ratio is higher than the fabric benchmark's because a
composite does its per-tile stage arithmetic without scheduling events (and
the wall time includes deployment and tile-plan construction): fewer events,
more work each. Target (issue #3): the 2048-tile GEMM under 20 s on this machine.
Run with ``nox -s benchmarks`` or ``python benchmarks/bench_kernels.py``; writes ``out/benchmarks/kernels.json``
(``--out FILE``; ``--update-committed`` rewrites the committed ``benchmarks/results/kernels.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _output import add_output_options, output_path, write_result
from bench_fabric import bare_simpy  # same directory

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    add_output_options(ap, "kernels.json")
    args = ap.parse_args(argv)
    path = output_path(args, "kernels.json")
    graph = load_topology(ROOT / "topologies" / "topology.yaml")
    info = discover().resolve("matmul-composite")
    results = {}
    for variant in ("ref_ref", "load_ref", "load_load"):
        os.environ.update(MATMUL_M="512", MATMUL_K="512", MATMUL_N="512", MATMUL_VARIANT=variant)
        walls, ratios = [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            result = run_bench(info, graph)
            wall = time.perf_counter() - t
            events = result.events
            walls.append(wall)
            ratios.append(wall / bare_simpy(events))
        gemm = result.stages["GEMM"]
        results[variant] = {
            "tiles": result.op_counts["gemm"], "events": events, "wall_s": statistics.median(walls),
            "wall_vs_bare_simpy_same_events": statistics.median(ratios), "latency_ns": result.latency_ns,
            "gemm_busy_ns": gemm["occupancy_ns"],
        }
    out = {"command": "python benchmarks/bench_kernels.py " + " ".join(sys.argv[1:]), "bench": "matmul-composite",
           "shape": [512, 512, 512], "results": results, "target_wall_s": 20.0}
    print(json.dumps(out, indent=2))
    write_result(path, out)
    return 0 if all(r["wall_s"] < 20.0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
