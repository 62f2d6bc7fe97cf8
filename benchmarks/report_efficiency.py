"""Model figures quoted in the issue notes: composite MAC efficiency and decode dispatch share.

Prints, for the default topology:
- the `matmul-composite` bench at 512x512x512 f16 per staging variant: composite time
  and MAC efficiency = MACs / (peak MAC rate x composite time);
- the `gqa-decode-single-pe` bench at S_kv = 8192 per variant: kernel time, commands
  issued and PE_CPU dispatch cycles.
Run: ``python benchmarks/report_efficiency.py``.
"""

from __future__ import annotations

import os

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology


def main() -> None:
    graph = load_topology("topologies/topology.yaml")
    peak_macs_per_ns = graph.spec.pe.gemm.peak_tflops * 1e3 / 2
    registry = discover()
    for variant in ("ref_ref", "load_ref", "load_load"):
        os.environ.update(MATMUL_M="512", MATMUL_K="512", MATMUL_N="512", MATMUL_VARIANT=variant)
        r = run_bench(registry.resolve("matmul-composite"), graph)
        comp = next(x for x in r.records if x.op_name == "composite")
        t = comp.t_end - comp.t_start
        print(f"matmul-composite {variant}: composite {t:.0f} ns, "
              f"MAC efficiency {512 ** 3 / (peak_macs_per_ns * t):.3f}")
    for variant in ("opt1", "opt3"):
        os.environ.update(GQA_SKV="8192", GQA_VARIANT=variant)
        r = run_bench(registry.resolve("gqa-decode-single-pe"), graph)
        dispatch = [x for x in r.records if x.op_name == "dispatch"]
        cycles = sum(x.params["cycles"] for x in dispatch)
        print(f"gqa-decode-single-pe {variant} S_kv=8192: kernel {r.engines['pe_cpu']['occupancy_ns']:.0f} ns, "
              f"{len(dispatch)} commands, {cycles:.0f} dispatch cycles")


if __name__ == "__main__":
    main()
