"""Model figures quoted in the issue notes: composite MAC efficiency and decode dispatch share.

Prints, for the default topology:
- the `matmul-composite` bench at 512x512x512 f16 per staging variant: composite time
  and MAC efficiency = MACs / (peak MAC rate x composite time);
- the `gqa-decode-single-pe` bench at S_kv = 8192 per variant: kernel time, commands
  issued and PE_CPU dispatch cycles;
- PE_CPU dispatch cycles per KV tile of opt2 and opt3 (runs at 32 and 16 tiles, difference
  / 16) at R = 0.25, 0.0625 (default) and 0.03125 cycles per descriptor byte.
Run: ``python benchmarks/report_efficiency.py``.
"""

from __future__ import annotations

import os
from dataclasses import replace

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import compile_spec, load_topology


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
    for variant in ("opt1", "opt2", "opt3"):
        os.environ.update(GQA_SKV="8192", GQA_VARIANT=variant)
        r = run_bench(registry.resolve("gqa-decode-single-pe"), graph)
        dispatch = [x for x in r.records if x.op_name == "dispatch"]
        cycles = sum(x.params["cycles"] for x in dispatch)
        print(f"gqa-decode-single-pe {variant} S_kv=8192: kernel {r.engines['pe_cpu']['occupancy_ns']:.0f} ns, "
              f"{len(dispatch)} commands, {cycles:.0f} dispatch cycles")
    for r_cpb in (0.25, 0.0625, 0.03125):
        tuned = compile_spec(replace(graph.spec, pe=replace(graph.spec.pe, cost_model=replace(
            graph.spec.pe.cost_model, r_cycles_per_byte=r_cpb))))
        per_tile = {v: _per_tile_dispatch(tuned, registry, v) for v in ("opt2", "opt3")}
        print(f"dispatch per KV tile at R={r_cpb}: opt3 {per_tile['opt3']:.1f} cycles, opt2 {per_tile['opt2']:.1f} "
              f"cycles, ratio {per_tile['opt3'] / per_tile['opt2']:.2f}")


def _per_tile_dispatch(graph, registry, variant: str) -> float:
    totals = []
    for tiles in (32, 16):
        os.environ.update(GQA_SKV=str(64 * tiles), GQA_TILE="64", GQA_VARIANT=variant)
        r = run_bench(registry.resolve("gqa-decode-single-pe"), graph)
        totals.append(sum(x.params["cycles"] for x in r.records if x.op_name == "dispatch"))
    return (totals[0] - totals[1]) / 16


if __name__ == "__main__":
    main()
