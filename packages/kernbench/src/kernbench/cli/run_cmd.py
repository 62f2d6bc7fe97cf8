"""``kernbench list`` and ``kernbench run``: benches from ``kernbench.benches`` on a topology."""

from __future__ import annotations

import json
import sys

from kernbench.runtime.bench import BenchError, BenchResult, discover, run_bench
from kernbench.sim.chrome_trace import write_chrome_trace
from kernbench.sim.links import format_top, link_report, write_links
from kernbench.topology import load_topology


def run_list() -> int:
    """Print every bench with its index and description."""
    for i, b in enumerate(discover().benches, 1):
        print(f"{i:3d}  {b.name:24s} {b.description}")
    return 0


def _devices(arg: str, sips: int) -> list[int]:
    if arg == "all":
        return list(range(sips))
    if not arg.isdigit() or int(arg) >= sips:
        raise BenchError(f"--device {arg!r} is invalid; use a SIP index 0..{sips - 1} or 'all'")
    return [int(arg)]


def _print(r: BenchResult) -> None:
    print(f"bench {r.bench} on device {r.device}: latency {r.latency_ns:.1f} ns "
          f"(last op end - first op start, deployment included)")
    print("  ops: " + ", ".join(f"{k} {v}" for k, v in r.op_counts.items()))
    print(f"  {'engine':16s} {'occupancy ns':>14s} {'wall ns':>12s} {'count':>8s}")
    for name, u in {**r.engines, **r.stages}.items():
        if u["count"]:
            print(f"  {name:16s} {u['occupancy_ns']:14.1f} {u['wall_ns']:12.1f} {u['count']:8d}")
    starts = sorted(set(r.pe_exec_start_ns.values()))
    if starts:
        print(f"  {len(r.pe_exec_start_ns)} PE(s) entered the kernel at {', '.join(f'{s:.1f}' for s in starts)} ns")


def run_run(topology: str, bench: str, device: str, *, data: bool, as_json: bool, trace: str | None,
            links: str | None = None, links_top: int = 0) -> int:
    """Run one bench on one device (or every device); exit 2 when it fails.

    ``links`` writes the run's per-link results (:mod:`kernbench.sim.links`); ``links_top`` prints the N busiest
    links (on stderr with ``as_json``, so stdout stays JSON).
    """
    graph = load_topology(topology)
    info = discover().resolve(bench)
    devices = _devices(device, graph.spec.system.sips.count)
    if links_top < 0:
        raise BenchError(f"--links-top {links_top} must be 0 or more")
    if (links or links_top) and len(devices) > 1:
        raise BenchError(f"--links/--links-top describe one simulation, but --device {device} runs {len(devices)}; "
                         f"pass one --device (0..{len(devices) - 1})")
    results = [run_bench(info, graph, d, data=data) for d in devices]
    if trace:
        records = [rec for r in results for rec in r.records]
        write_chrome_trace(records, trace)
    report = None
    if links or links_top:
        r = results[0]
        report = link_report(r.engine, {"bench": r.bench, "device": r.device, "ok": r.ok,
                                        "latency_ns": r.latency_ns, "topology_file": topology})
        if links:
            write_links(report, links)
    if as_json:
        out = [r.to_json() for r in results]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    else:
        for r in results:
            _print(r)
        if trace:
            print(f"  trace written to {trace} (open it in Perfetto or chrome://tracing)")
        if links:
            print(f"  links written to {links} (draw them: kernbench links {links} --heatmap out/links.svg)")
    if report is not None and links_top:
        print(format_top(report.busiest(links_top), report.title, report.window_ns),
              file=sys.stderr if as_json else sys.stdout)
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"kernbench: error: {failed[0].error_code}: {failed[0].error}", file=sys.stderr)
        return 2
    return 0
