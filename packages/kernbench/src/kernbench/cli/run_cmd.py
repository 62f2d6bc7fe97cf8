"""``kernbench list`` and ``kernbench run``: the installed benches, their parameters, and one run of one."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernbench.cli.paths import output_file, plan_outputs, replace_atomically
from kernbench.cli.progress import Progress
from kernbench.cli.topology_loader import load_graph
from kernbench.runtime.bench import BenchError, BenchInfo, BenchResult, discover, run_bench
from kernbench.runtime.params import parse_assignments
from kernbench.sim import limits as budget
from kernbench.sim.chrome_trace import write_chrome_trace
from kernbench.sim.errors import BudgetError
from kernbench.sim.flow import FIDELITIES
from kernbench.sim.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_RECORDS, DEFAULT_MAX_SIM_NS, Limits
from kernbench.sim.links import format_top, link_report, write_links
from kernbench.topology.spec_loader import expand_user


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
    """Where ``--trace`` writes: the path itself, or ``<folder>/<bench>.trace.json`` for a folder (an existing
    one, or a path ending in a separator); missing folders are created, like every output's. Checked before the
    run so an unwritable path fails at once."""
    return output_file(trace, "--trace", parents=True, folder_name=f"{bench}.trace.json")


def _inputs(topology: str | None) -> dict[str, Path]:
    """The files ``kernbench run`` reads that an output must not overwrite: a topology file and the ccl.yaml
    beside it."""
    if topology is None or not expand_user(topology).is_file():
        return {}
    path = expand_user(topology)
    found = {f"the topology file (--topology {topology})": path}
    if (path.parent / "ccl.yaml").is_file():
        found["the ccl.yaml beside the topology"] = path.parent / "ccl.yaml"
    return found


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
                        help="stop past SECONDS of wall-clock time, counted from before the topology is compiled "
                             "and across every --device run, even a kernel spinning in pure Python "
                             "(default: %(default)s; 'none': no limit)")


def limits_from(max_events: str, max_sim_ns: str, timeout: str, max_records: str = str(DEFAULT_MAX_RECORDS)) -> Limits:
    """The :class:`Limits` the options give, its wall clock started now (so ``--timeout`` covers compiling the
    topology and every ``--device`` run); :class:`BudgetError` naming a bad value. This one object goes to every
    engine of the run."""
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

    seconds = number(timeout, "--timeout", False)
    if seconds is not None and not budget.MIN_TIMEOUT_S <= seconds <= budget.MAX_TIMEOUT_S:
        raise BudgetError(f"--timeout {str(timeout)[:80]!r} is invalid; {budget.timeout_range()}")
    return Limits(max_events=number(max_events, "--max-events", True),
                  max_sim_ns=number(max_sim_ns, "--max-sim-ns", False), timeout_s=seconds,
                  max_records=number(max_records, "--max-records", True), started=time.monotonic())


class _CompileTimeout(BaseException):  # an interrupt, like the engine's alarm: no `except Exception` may swallow it
    """Raised by :func:`compile_deadline`'s alarm wherever compilation is."""


@contextmanager
def compile_deadline(limits: Limits) -> Iterator[None]:
    """Stop the block (compiling a topology) with a :class:`BudgetError` once ``limits``' wall clock has run out.

    The largest valid topology compiles for over a minute, so ``--timeout`` starts before compilation, not when
    the bench starts. Uses ``SIGALRM`` on the main thread of a POSIX process; elsewhere (or without a wall-clock
    limit) it does nothing and the run's engine still enforces the limit."""
    usable = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    deadline = limits.deadline()
    if deadline is None or not usable:
        yield
        return
    timeout_s = limits.timeout_s

    def expire(signum: int, frame: object) -> None:
        raise _CompileTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), budget.MIN_TIMEOUT_S))
        yield
    except _CompileTimeout:
        raise BudgetError(f"compiling the topology took more than the wall-clock timeout of {timeout_s:g} s "
                          f"(--timeout covers compilation and the run); raise --timeout, or use a smaller "
                          f"topology") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def shown_value(value: object) -> str:
    """A parameter value as ``run`` prints it: an empty text as ``""`` (so ``NAME=""`` is not misread)."""
    return '""' if value == "" else str(value)


def _number(value: object, decimal: bool) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.1f}" if decimal else f"{value:,.0f}"
    return str(value)


def _decimal(name: str, values) -> bool:
    """Whether a metric is shown with one decimal: a time (a name or group ending in ``_ns``) or a fraction;
    whole counts are shown as integers."""
    if any(part.endswith("_ns") for part in name.split(".")):
        return True
    return not all(isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() for v in values)


def metric_lines(metrics: dict, notes: dict[str, str] | None = None, rows: str = "") -> list[str]:
    """The ``metrics`` section of ``kernbench run``: one line per metric with its note, or, when the bench names
    its parts (``rows``, e.g. "panel") and reports ``PART.metric``, a table with one row per part (one block of
    columns per metric group such as ``op.*``) followed by the notes of its columns."""
    notes = notes or {}
    title = "  metrics (measured by the bench itself"
    parted = {name: name.partition(".") for name in metrics}
    table = {name: (part, col) for name, (part, dot, col) in parted.items() if rows and dot}
    lines = [title + (f", one row per {rows}):" if table else "):")]
    if table:
        parts = list(dict.fromkeys(part for part, _ in table.values()))
        columns = list(dict.fromkeys(col for _, col in table.values()))
        cells = {(part, col): metrics[name] for name, (part, col) in table.items()}
        groups: dict[str, list[str]] = {}
        for col in columns:
            group, dot, _ = col.partition(".")
            groups.setdefault(group + ".*" if dot else rows, []).append(col)
        width = max(len(x) for x in (*parts, *groups)) + 2
        for head, cols in groups.items():
            texts = {}
            for col in cols:
                values = [cells[p, col] for p in parts if (p, col) in cells]
                decimal = _decimal(col, values)
                texts[col] = {p: _number(cells[p, col], decimal) if (p, col) in cells else "-" for p in parts}
            shown = {col: col.partition(".")[2] if head != rows else col for col in cols}
            widths = {col: max(len(shown[col]), *(len(t) for t in texts[col].values())) for col in cols}
            lines.append(f"    {head:{width}s}" + "  ".join(f"{shown[c]:>{widths[c]}s}" for c in cols))
            lines += [f"    {p:{width}s}" + "  ".join(f"{texts[c][p]:>{widths[c]}s}" for c in cols) for p in parts]
        lines += [f"    {col}: {notes[col]}" for col in columns if col in notes]
    for name, value in metrics.items():
        if name in table:
            continue
        text = f"    {name:28s} {_number(value, _decimal(name, [value]))}"
        lines.append(f"{text}  ({notes[name]})" if name in notes else text)
    return lines


def _print(r: BenchResult, info: BenchInfo | None = None) -> None:
    flow = " [flow fidelity]" if getattr(r.engine, "fidelity", "packet") == "flow" else ""
    print(f"bench {r.bench} on device {r.device}: latency {r.latency_ns:,.1f} ns (op-log window of the whole run: "
          f"first op start to last op end, deployment included){flow}")
    if r.params:
        print("  parameters: " + ", ".join(f"{k}={shown_value(v)}" for k, v in r.params.items()))
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
        notes, rows = (dict(info.metric_notes), info.metric_rows) if info is not None else ({}, "")
        print("\n".join(metric_lines(r.metrics, notes, rows)))
    starts = sorted(set(r.pe_exec_start_ns.values()))
    if starts:
        shown = ", ".join(f"{s:,.1f}" for s in starts[:4]) + (", ..." if len(starts) > 4 else "")
        print(f"  {len(r.pe_exec_start_ns)} PE(s) entered the kernel at {shown} ns")


def run_run(topology: str | None, bench: str, device: str, *, data: bool, as_json: bool, trace: str | None,
            params: list[str] | None = None, links: str | None = None, links_top: int = 0,
            limits: Limits | None = None, debug: bool = False, fidelity: str = "packet") -> int:
    """Run one bench on one device (or every device); exit 2 when it fails.

    ``links`` writes the run's per-link results (:mod:`kernbench.sim.links`); ``links_top`` prints the N busiest
    links (on stderr with ``as_json``, so stdout stays JSON). ``limits`` are the run's budgets
    (:func:`limits_from` the options; default: a :data:`DEFAULT_TIMEOUT_S` wall clock started now), passed as
    they are to every device's engine; ``debug`` prints a failed bench's traceback. ``fidelity`` is the network
    model, ``packet`` or ``flow`` (:mod:`kernbench.sim.flow`). Every output path is checked before anything runs.
    """
    if fidelity not in FIDELITIES:
        raise BenchError(f"--fidelity {str(fidelity)[:40]!r} is invalid; use packet (every packet on every link) or "
                         f"flow (every transfer one flow sharing its links max-min fairly)")
    registry = discover()
    _warn_problems(registry)
    if len(bench) > 200:  # a bench index of thousands of digits overflowed int() before
        raise BenchError(f"--bench {bench[:40]!r}... ({len(bench):,} characters) is not a bench name or index; "
                         f"`kernbench list` shows them")
    info = registry.resolve(bench)
    given = parse_assignments(params)
    from kernbench.runtime.params import resolve as resolve_params

    resolve_params(info.name, info.params, given)  # refuse bad values before compiling anything
    outputs = plan_outputs({"--trace": (trace, f"{info.name}.trace.json"), "--links": (links, None)},
                           _inputs(topology))
    out, links_out = outputs.get("--trace"), outputs.get("--links")
    if limits is None:
        limits = Limits(timeout_s=DEFAULT_TIMEOUT_S, started=time.monotonic())
    if links_top < 0:
        raise BenchError(f"--links-top {links_top} must be 0 or more")
    with compile_deadline(limits):  # --timeout covers compiling the topology too
        graph = load_graph(topology)
    devices = _devices(device, graph.spec.system.sips.count)
    if (links or links_top) and len(devices) > 1:
        raise BenchError(f"--links/--links-top describe one simulation, but --device {device} runs {len(devices)}; "
                         f"pass one --device (0..{len(devices) - 1})")
    results = []
    for d in devices:
        with Progress(f"{info.name} on device {d}") as progress:
            results.append(run_bench(info, graph, d, data=data, params=given, observe=progress.watch,
                                     limits=limits, fidelity=fidelity))
    if out is not None:
        with replace_atomically(out) as part:
            write_chrome_trace([rec for r in results for rec in r.records], part)
    report = None
    if links or links_top:
        r = results[0]
        report = link_report(r.engine, {"bench": r.bench, "device": r.device, "ok": r.ok,
                                        "latency_ns": r.latency_ns, "topology_file": graph.spec.source})
        if links:
            with replace_atomically(links_out) as part:
                write_links(report, part)
    if as_json:
        doc = [r.to_json() for r in results]
        if fidelity != "packet":  # a packet run's JSON stays as it was
            doc = [{**d, "fidelity": fidelity} for d in doc]
        print(json.dumps(doc[0] if len(doc) == 1 else doc, indent=2))
    else:
        for r in results:
            _print(r, info)
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
