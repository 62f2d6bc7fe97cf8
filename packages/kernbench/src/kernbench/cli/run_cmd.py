"""``kernbench list`` and ``kernbench run``: the installed benches, their parameters, and one run of one."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from kernbench.cli.paths import output_file
from kernbench.cli.progress import Progress
from kernbench.cli.topo import load_graph
from kernbench.runtime.bench import BenchError, BenchResult, discover, run_bench
from kernbench.runtime.params import parse_assignments
from kernbench.sim.chrome_trace import write_chrome_trace
from kernbench.sim.errors import BudgetError
from kernbench.sim.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_RECORDS, DEFAULT_MAX_SIM_NS, Limits
from kernbench.sim.links import format_top, link_report, write_links


def _warn_problems(registry) -> None:
    for problem in registry.problems:
        print(f"kernbench: warning: {problem}", file=sys.stderr)


def run_list(params: str | None = None) -> int:
    """Print every bench with its index and description; with ``params`` ("" for all, or a bench name) also
    each bench's parameters."""
    registry = discover()
    _warn_problems(registry)
    benches = registry.benches if not params else [registry.resolve(params)]
    for i, b in enumerate(registry.benches, 1):
        if b not in benches:
            continue
        print(f"{i:3d}  {b.name:24s} {b.description}")
        if params is not None:
            for p in b.params:
                print(f"       -p {p.describe()}")
            if not b.params:
                print("       (no parameters)")
    return 0


def _devices(arg: str, sips: int) -> list[int]:
    if arg == "all":
        return list(range(sips))
    if not (arg.isascii() and arg.isdigit()) or int(arg) >= sips:
        raise BenchError(f"--device {arg!r} is invalid; use a SIP index 0..{sips - 1} or 'all'")
    return [int(arg)]


def trace_path(trace: str, bench: str) -> Path:
    """Where ``--trace`` writes: the path itself, or ``<folder>/<bench>.trace.json`` for a folder; checked
    before the run so an unwritable path fails at once."""
    path = Path(trace).expanduser()
    if path.is_dir() or trace.endswith(("/", os.sep)):
        path = path / f"{bench}.trace.json"
    parent = path.parent
    if not parent.is_dir():
        raise BenchError(f"--trace {trace}: folder {parent} does not exist; create it or choose another path")
    if path.is_dir() or not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BenchError(f"--trace {trace}: {path} cannot be written; choose a writable file or folder")
    return output_file(path, "--trace")


#: ``kernbench run``'s wall-clock budget (s): far beyond any bench within the default event budget.
DEFAULT_TIMEOUT_S = 600.0


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    """``--max-events``, ``--max-sim-ns``, ``--max-records`` and ``--timeout`` of ``kernbench run`` (``none``
    switches one off)."""
    parser.add_argument("--max-events", default=str(DEFAULT_MAX_EVENTS), metavar="N",
                        help="stop a run past N simulation events (default: %(default)s; 'none': no limit)")
    parser.add_argument("--max-sim-ns", default=f"{DEFAULT_MAX_SIM_NS:.0f}", metavar="NS",
                        help="stop a run past NS simulated nanoseconds (default: %(default)s; 'none': no limit)")
    parser.add_argument("--max-records", default=str(DEFAULT_MAX_RECORDS), metavar="N",
                        help="stop a run whose op log passes N records, about 170 bytes each (default: %(default)s; "
                             "'none': no limit)")
    parser.add_argument("--timeout", default=f"{DEFAULT_TIMEOUT_S:g}", metavar="SECONDS",
                        help="stop a run past SECONDS of wall-clock time, even a kernel spinning in pure Python "
                             "(default: %(default)s; 'none': no limit)")


def limits_from(max_events: str, max_sim_ns: str, timeout: str, max_records: str = str(DEFAULT_MAX_RECORDS)) -> Limits:
    """The :class:`Limits` the options give; :class:`BudgetError` naming a bad value."""
    def number(text: str, option: str, integral: bool) -> float | int | None:
        if str(text).strip().lower() == "none":
            return None
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value > 0 or value == float("inf") or (integral and value != int(value)):
            kind = "a positive integer" if integral else "a positive number"
            raise BudgetError(f"{option} {str(text)[:80]!r} is invalid; expected {kind}, or 'none' for no limit")
        return int(value) if integral else value

    return Limits(number(max_events, "--max-events", True), number(max_sim_ns, "--max-sim-ns", False),
                  number(timeout, "--timeout", False), number(max_records, "--max-records", True))


def _print(r: BenchResult) -> None:
    print(f"bench {r.bench} on device {r.device}: latency {r.latency_ns:,.1f} ns "
          f"(last op end - first op start, deployment included)")
    if r.params:
        print("  parameters: " + ", ".join(f"{k}={v}" for k, v in r.params.items()))
    print("  ops: " + ", ".join(f"{k} {v}" for k, v in r.op_counts.items()))
    print("  occupancy = time an engine was busy, summed over its PEs; wall = first start to last end")
    for title, group in (("engines", r.engines), ("pipeline stages", r.stages)):
        used = {name: u for name, u in group.items() if u["count"]}
        if not used:
            continue
        print(f"  {title}:")
        print(f"    {'':16s} {'occupancy ns':>14s} {'wall ns':>12s} {'count':>8s}")
        for name, u in used.items():
            print(f"    {name:16s} {u['occupancy_ns']:14,.1f} {u['wall_ns']:12,.1f} {u['count']:8d}")
    if r.metrics:
        print("  metrics:")
        for name, value in r.metrics.items():
            print(f"    {name:28s} {value:,.1f}" if isinstance(value, float) else f"    {name:28s} {value}")
    starts = sorted(set(r.pe_exec_start_ns.values()))
    if starts:
        shown = ", ".join(f"{s:,.1f}" for s in starts[:4]) + (", ..." if len(starts) > 4 else "")
        print(f"  {len(r.pe_exec_start_ns)} PE(s) entered the kernel at {shown} ns")


def run_run(topology: str | None, bench: str, device: str, *, data: bool, as_json: bool, trace: str | None,
            params: list[str] | None = None, links: str | None = None, links_top: int = 0,
            budgets: tuple[str, ...] | None = None, debug: bool = False) -> int:
    """Run one bench on one device (or every device); exit 2 when it fails.

    ``links`` writes the run's per-link results (:mod:`kernbench.sim.links`); ``links_top`` prints the N busiest
    links (on stderr with ``as_json``, so stdout stays JSON). ``budgets`` are the ``--max-events``,
    ``--max-sim-ns``, ``--timeout`` and ``--max-records`` texts; ``debug`` prints a failed bench's traceback.
    Every output path is checked before anything runs.
    """
    registry = discover()
    _warn_problems(registry)
    info = registry.resolve(bench)
    given = parse_assignments(params)
    from kernbench.runtime.params import resolve as resolve_params

    resolve_params(info.name, info.params, given)  # refuse bad values before compiling anything
    out = trace_path(trace, info.name) if trace else None
    if links:
        output_file(links, "--links", parents=True)
    limits = limits_from(*budgets) if budgets is not None else Limits(timeout_s=DEFAULT_TIMEOUT_S)
    if links_top < 0:
        raise BenchError(f"--links-top {links_top} must be 0 or more")
    graph = load_graph(topology)
    devices = _devices(device, graph.spec.system.sips.count)
    if (links or links_top) and len(devices) > 1:
        raise BenchError(f"--links/--links-top describe one simulation, but --device {device} runs {len(devices)}; "
                         f"pass one --device (0..{len(devices) - 1})")
    results = []
    for d in devices:
        with Progress(f"{info.name} on device {d}") as progress:
            results.append(run_bench(info, graph, d, data=data, params=given, observe=progress.watch,
                                     limits=limits))
    if out is not None:
        write_chrome_trace([rec for r in results for rec in r.records], out)
    report = None
    if links or links_top:
        r = results[0]
        report = link_report(r.engine, {"bench": r.bench, "device": r.device, "ok": r.ok,
                                        "latency_ns": r.latency_ns, "topology_file": graph.spec.source})
        if links:
            write_links(report, links)
    if as_json:
        doc = [r.to_json() for r in results]
        print(json.dumps(doc[0] if len(doc) == 1 else doc, indent=2))
    else:
        for r in results:
            _print(r)
        if out is not None:
            print(f"  trace written to {out} (open it in Perfetto or chrome://tracing)")
        if links:
            print(f"  links written to {links} (draw them: kernbench links {links} --heatmap out/links.svg)")
    if report is not None and links_top:
        print(format_top(report.busiest(links_top), report.title, report.window_ns),
              file=sys.stderr if as_json else sys.stdout)
    failed = [r for r in results if not r.ok]
    if failed and debug and failed[0].exception is not None:
        exc = failed[0].exception
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if failed:
        print(f"kernbench: error: {failed[0].error_code}: {failed[0].error}", file=sys.stderr)
        return 2
    return 0
