"""Long-context decode speed: ``gqa-decode-single-pe`` at S_kv = 131072 (128K) in timing mode.

Records the wall time of the whole bench run and the simulated kernel time on
the PE, for each decode variant. Target (issue #4): under 60 s wall on this
machine. Run with ``nox -s benchmarks`` or ``python benchmarks/bench_attention.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    graph = load_topology(ROOT / "topologies" / "topology.yaml")
    info = discover().resolve("gqa-decode-single-pe")
    results = {}
    for variant in ("opt1", "opt2", "opt3"):
        os.environ.update(GQA_SKV="131072", GQA_G="8", GQA_DHEAD="64", GQA_TILE="64", GQA_VARIANT=variant)
        t = time.perf_counter()
        r = run_bench(info, graph)
        wall = time.perf_counter() - t
        if not r.ok:
            print(r.error, file=sys.stderr)
            return 1
        results[variant] = {"wall_s": wall, "kernel_ns": r.engines["pe_cpu"]["occupancy_ns"], "events": r.events}
    out = {"command": "python benchmarks/bench_attention.py", "s_kv": 131072, "g": 8, "d_head": 64, "tile": 64,
           "results": results, "target_wall_s": 60.0}
    path = ROOT / "benchmarks" / "results" / "attention.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0 if all(v["wall_s"] < 60.0 for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
