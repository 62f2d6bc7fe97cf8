"""Flow fidelity against packet fidelity: error and speed-up, point by point (issue 24, ADR 0039).

Every point runs one bench (``run_bench``, timing mode, device 0) in both
fidelities in this process, alternately (packet, flow, packet, flow, ...
``--repeats`` times each), and prints per point: the packet latency, the flow
latency, the error ``(flow - packet) / packet``, the median wall time of each
and the speed-up. The compared latency is the bench's own headline metric
when it reports one (``allreduce_ns`` for ``ccl-allreduce``), else the
op-log window ``kernbench run`` prints.

Two speed-ups are printed:

* ``cold``: each run builds its own route memo (``PathRouter.drop_shared``
  before it), as a new ``kernbench run`` process does, so route searches
  (identical in both fidelities) are part of both wall times;
* ``warm``: both fidelities share the graph's :class:`PathRouter`, which an
  earlier run of the point has filled, so the figure is the simulation alone
  (as the points of a study sweep on one topology share their routes).

Points (``--points all|quick``): the 6-SIP all-reduce (``ccl-allreduce``) at
several payloads on the ring, torus and mesh 2x3 topologies; ``gemm-single-pe``
at two sizes; ``gqa-decode`` with several partitionings and context lengths;
the four panels of ``gqa-headline`` (the GQA study's headline points).
Issue 24's targets: >= 20x faster on the all-reduce and GQA points, error
<= 5 % median and <= 15 % max. Each row also prints the engine events of both
fidelities (``events`` column, packet/flow). The result goes to
``out/benchmarks/fidelity.json`` (``--out FILE``; ``--update-committed`` for
``benchmarks/results/fidelity.json``).

``--clock cpu`` times each run by the process's CPU time instead of the wall
clock, which varies less on a machine shared with other work.

Run: ``python benchmarks/bench_fidelity.py [--points quick] [--repeats 3] [--only TEXT] [--clock wall|cpu]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _output import add_output_options, output_path, write_result

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology
from kernbench.topology.routing import PathRouter

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "topologies"
SIX_SIP = {"ring": "6sip_2x3_ring_1d.yaml", "torus": "6sip_2x3_torus_2d.yaml", "mesh": "6sip_2x3_mesh_2d_no_wrap.yaml"}
#: The headline metric of a bench, compared instead of the op-log window when the bench reports it.
METRIC = {"ccl-allreduce": "allreduce_ns"}
#: The GQA study's headline panels (``gqa-headline``'s PANELS).
HEADLINE = ("prefill_c1", "prefill_c4_ring", "decode_c1_p8", "decode_c4_p8")
#: How a run is timed: the wall clock, or the process's CPU time (``--clock``).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
#: Point classes summarised separately (the first part of a point's label).
CLASSES = ("allreduce", "gemm", "gqa", "gqa-headline")


def points(which: str) -> list[tuple[str, str, str, dict[str, str]]]:
    """``(label, topology file, bench, params)`` of every point."""
    out = []
    payloads = (4096, 65536) if which == "quick" else (1024, 4096, 16384, 65536, 131072)
    families = ("torus",) if which == "quick" else ("ring", "torus", "mesh")
    for fam in families:
        for b in payloads:
            out.append((f"allreduce/{fam}/{b}", SIX_SIP[fam], "ccl-allreduce", {"BYTES": str(b)}))
    for m in ((128,) if which == "quick" else (128, 256)):
        out.append((f"gemm/{m}", "topology.yaml", "gemm-single-pe", {"M": str(m), "K": str(m), "N": str(m)}))
    gqa = [("cube_sp_pe_sp", 4096)] if which == "quick" else [
        ("single_pe", 1024), ("cube_sp_pe_sp", 4096), ("cube_sp_pe_sp", 16384), ("cube_sp_pe_tp", 16384),
        ("cube_repl_pe_sp", 16384), ("cube_repl_pe_tp", 4096)]
    for part, skv in gqa:
        params = {"PARTITION": part, "SKV": str(skv)}
        if part != "single_pe":
            params.update(PES="8", CUBES="8")
        out.append((f"gqa/{part}/{skv}", "topology.yaml", "gqa-decode", params))
    panels = ("decode_c1_p8",) if which == "quick" else HEADLINE
    for panel in panels:
        out.append((f"gqa-headline/{panel}", "topology.yaml", "gqa-headline", {"PANELS": panel}))
    return out


def _latency(result, bench: str) -> float:
    metric = METRIC.get(bench)
    return float(result.metrics[metric]) if metric in result.metrics else float(result.latency_ns)


def run_point(graph, bench: str, params: dict[str, str], fidelity: str,
              clock=time.perf_counter) -> tuple[float, float, int]:
    """(latency ns, run time s by ``clock``, engine events) of one run."""
    info = discover().resolve(bench)
    t = clock()
    result = run_bench(info, graph, 0, params=params, fidelity=fidelity)
    wall = clock() - t
    if not result.ok:
        raise SystemExit(f"{bench} {params} failed in {fidelity} fidelity: {result.error_code}: {result.error}")
    return _latency(result, bench), wall, result.events


def measure(label: str, topology: str, bench: str, params: dict[str, str], repeats: int,
            clock=time.perf_counter) -> dict:
    """Run one point ``repeats`` times per fidelity, alternately, cold then warm (module docstring)."""
    graph = load_topology(TOPOLOGIES / topology)
    walls: dict[str, list[float]] = {"packet": [], "flow": []}
    lat: dict[str, float] = {}
    events: dict[str, int] = {}
    for _ in range(repeats):  # cold: a fresh route memo per run, as a new process has
        for fid in ("packet", "flow"):
            PathRouter.drop_shared(graph)
            lat[fid], wall, events[fid] = run_point(graph, bench, params, fid, clock)
            walls[fid].append(wall)
    warm: dict[str, list[float]] = {"packet": [], "flow": []}
    PathRouter.drop_shared(graph)
    run_point(graph, bench, params, "flow")  # fills the route memo every later run on this graph shares
    for _ in range(repeats):
        for fid in ("packet", "flow"):
            warm[fid].append(run_point(graph, bench, params, fid, clock)[1])
    cold = {k: statistics.median(v) for k, v in walls.items()}
    hot = {k: statistics.median(v) for k, v in warm.items()}
    return {"point": label, "topology": topology, "bench": bench, "params": params,
            "packet_ns": lat["packet"], "flow_ns": lat["flow"],
            "error_pct": 100.0 * (lat["flow"] - lat["packet"]) / lat["packet"],
            "packet_events": events["packet"], "flow_events": events["flow"],
            "packet_wall_s": cold["packet"], "flow_wall_s": cold["flow"], "speedup_cold": cold["packet"] / cold["flow"],
            "packet_wall_warm_s": hot["packet"], "flow_wall_warm_s": hot["flow"],
            "speedup_warm": hot["packet"] / hot["flow"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", choices=("all", "quick"), default="all", help="which points (default: all)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each fidelity per point (default: 3)")
    ap.add_argument("--only", default="", help="only points whose label contains this text")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                    help="time runs by the wall clock (default) or by the process's CPU time")
    add_output_options(ap, "fidelity.json")
    args = ap.parse_args(argv)
    path = output_path(args, "fidelity.json")
    rows = []
    head = (f"{'point':30s} {'packet ns':>11s} {'flow ns':>11s} {'error':>7s} {'events':>15s} {'packet s':>9s} "
            f"{'flow s':>8s} {'speed-up':>8s} {'warm pkt s':>10s} {'warm flow s':>11s} {'warm x':>7s}")
    print(head, flush=True)
    for label, topology, bench, params in points(args.points):
        if args.only not in label:
            continue
        r = measure(label, topology, bench, params, args.repeats, CLOCKS[args.clock])
        rows.append(r)
        events = f"{r['packet_events']}/{r['flow_events']}"
        print(f"{label:30s} {r['packet_ns']:11,.1f} {r['flow_ns']:11,.1f} {r['error_pct']:+6.2f}% {events:>15s} "
              f"{r['packet_wall_s']:9.3f} {r['flow_wall_s']:8.3f} {r['speedup_cold']:7.1f}x "
              f"{r['packet_wall_warm_s']:10.3f} {r['flow_wall_warm_s']:11.3f} {r['speedup_warm']:6.1f}x", flush=True)
    errors = [abs(r["error_pct"]) for r in rows]
    summary = {}
    if rows:
        summary = {"median_abs_error_pct": statistics.median(errors), "max_abs_error_pct": max(errors)}
        for cls in CLASSES:
            sel = [r for r in rows if r["point"].split("/")[0] == cls]
            if sel:
                summary[f"{cls}_median_speedup_cold"] = statistics.median(r["speedup_cold"] for r in sel)
                summary[f"{cls}_median_speedup_warm"] = statistics.median(r["speedup_warm"] for r in sel)
                summary[f"{cls}_max_abs_error_pct"] = max(abs(r["error_pct"]) for r in sel)
        print(f"|error|: median {summary['median_abs_error_pct']:.2f} %, max {summary['max_abs_error_pct']:.2f} % "
              f"(targets 5 % / 15 %)")
        for cls in CLASSES:
            if f"{cls}_median_speedup_cold" in summary:
                print(f"{cls:12s} median speed-up {summary[f'{cls}_median_speedup_cold']:.1f}x cold, "
                      f"{summary[f'{cls}_median_speedup_warm']:.1f}x warm; max |error| "
                      f"{summary[f'{cls}_max_abs_error_pct']:.2f} %")
    write_result(path, {"command": "python benchmarks/bench_fidelity.py " + " ".join(sys.argv[1:]),
                        "repeats": args.repeats, "clock": args.clock, "points": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
