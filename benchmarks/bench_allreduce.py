"""All-reduce study: latency vs payload on the 6-SIP 2x3 topologies, buffer kinds, and simulator wall time.

Runs the ``ccl-allreduce`` bench in timing mode:
- for each SIP topology (ring_1d, torus_2d, mesh_2d_no_wrap) and payload per PE
  (256 B, 4 KiB, 16 KiB, 64 KiB, 96 KiB): the all-reduce latency (``allreduce_ns``);
- on the torus at 64 KiB/PE: the latency per IPCQ buffer kind (tcm, sram, hbm);
- the wall time of one 6-SIP torus all-reduce at 96 KiB/PE (the whole bench run:
  deployment, process group, collective), median of 3;
- the 16-SIP all-reduce: latency and wall time (median of 3) of the bench at 64 KiB/PE on the
  builtin 4x4 torus ``16sip_4x4_torus_2d`` (the engine-speed workload of issue 24).
Writes ``out/benchmarks/allreduce.json`` (``--out FILE``; ``--update-committed`` rewrites the committed
``benchmarks/results/allreduce.json`` that docs/collectives.md quotes). Run: ``python benchmarks/bench_allreduce.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from _output import add_output_options, output_path, write_result

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ("ring_1d", "torus_2d", "mesh_2d_no_wrap")
SIZES = (256, 4096, 16384, 65536, 98304)


def _run(info, graph, nbytes: int, kind: str = "tcm") -> tuple[float, float]:
    os.environ.update(CCL_BYTES=str(nbytes), CCL_BUFFER=kind)
    t = time.perf_counter()
    r = run_bench(info, graph)
    wall = time.perf_counter() - t
    if not r.ok:
        raise SystemExit(f"{info.name} failed: {r.error}")
    return r.metrics["allreduce_ns"], wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_options(ap, "allreduce.json")
    args = ap.parse_args(argv)
    path = output_path(args, "allreduce.json")
    info = discover().resolve("ccl-allreduce")
    graphs = {t: load_topology(ROOT / "topologies" / f"6sip_2x3_{t}.yaml") for t in TOPOLOGIES}
    latency = {t: {n: _run(info, graphs[t], n)[0] for n in SIZES} for t in TOPOLOGIES}
    kinds = {k: _run(info, graphs["torus_2d"], 65536, k)[0] for k in ("tcm", "sram", "hbm")}
    walls = [_run(info, graphs["torus_2d"], 98304)[1] for _ in range(3)]
    graph16 = load_topology(ROOT / "topologies" / "16sip_4x4_torus_2d.yaml")
    runs16 = [_run(info, graph16, 65536) for _ in range(3)]
    out = {"command": "python benchmarks/bench_allreduce.py", "bytes_per_pe": list(SIZES),
           "latency_ns": latency, "torus_64k_by_buffer_kind_ns": kinds,
           "torus_96k_wall_s": statistics.median(walls),
           "torus16_64k_allreduce_ns": runs16[0][0], "torus16_64k_wall_s": statistics.median(w for _, w in runs16)}
    write_result(path, out)
    print(f"{'bytes/PE':>9} " + " ".join(f"{t:>16}" for t in TOPOLOGIES))
    for n in SIZES:
        print(f"{n:>9} " + " ".join(f"{latency[t][n]:>16.1f}" for t in TOPOLOGIES))
    print("torus 64 KiB/PE by buffer kind:", {k: round(v, 1) for k, v in kinds.items()})
    print(f"wall time, 6-SIP torus all-reduce at 96 KiB/PE: {out['torus_96k_wall_s']:.2f} s")
    print(f"16-SIP 4x4 torus all-reduce at 64 KiB/PE: {out['torus16_64k_allreduce_ns']:.1f} ns simulated, "
          f"{out['torus16_64k_wall_s']:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
