"""``kernbench study`` and ``kernbench report``: run the milestone studies (cached, in parallel) and build the report.

``kernbench study NAME|all`` runs a study's grid (serial, a process pool, or
Dask), keeps each point in the user cache, writes ``results.json`` and
``results.csv`` under ``out/studies/NAME/`` and draws the study's figures
from that file. ``--dry-run`` lists each point as ``cached`` or ``runs
because …`` and runs nothing. ``--fidelity flow`` runs every point in flow
fidelity (ADR 0039) into ``out/studies-flow/NAME/``; a packet run prints,
per study, what its fidelity panel measured (flow beside packet fidelity).

Long stages say on stderr when they start and end (figures being drawn,
latexmk running); the points' progress is a bar on a terminal and plain
lines every few seconds elsewhere (:mod:`kernbench.studies.progress`).

``kernbench report`` draws the report's figures from the results files,
writes the generated LaTeX (numbers, claims, tables, the hardware table),
and runs ``latexmk`` into ``out/report/build/kernbench-codesign-report.pdf``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kernbench.cli.progress import announce
from kernbench.studies.executors import EXECUTORS
from kernbench.studies.registry import resolve, study_names
from kernbench.studies.runner import RunOptions, parse_where, plan, run


def add_parsers(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Register ``study`` and ``report`` on the ``kernbench`` subcommand parser; returns the new parsers."""
    s = sub.add_parser("study", help="run a milestone study (cached, parallel) and draw its figures",
                       description="Run a study's grid and write results.json/results.csv and figures.")
    s.add_argument("name", help=f"study name ({', '.join(study_names())}), several joined by commas, or 'all'")
    s.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker processes (default: the CPU count)")
    s.add_argument("--executor", choices=EXECUTORS, default=None,
                   help="serial, process (default) or dask (default with --scheduler)")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="a running dask.distributed scheduler (tcp://HOST:PORT); without it --executor dask starts "
                        "a LocalCluster")
    s.add_argument("--out", metavar="DIR", help="results folder (default: out/studies/NAME; with 'all', one "
                                                "folder per study inside DIR)")
    s.add_argument("--topologies", default=None, metavar="DIR",
                   help="folder holding the topology files (default: ./topologies, else the repository's or the "
                        "packaged copies)")
    s.add_argument("--dry-run", action="store_true", help="list every point as cached or why it runs; run nothing")
    s.add_argument("--force", action="store_true", help="rerun every point even when cached")
    s.add_argument("--no-figures", action="store_true", help="do not draw the study's figures")
    s.add_argument("--where", action="append", metavar="KEY=V[,V...]",
                   help="run only the points whose label or param KEY is one of the values (repeatable); the "
                        "results then hold only those points and no figures are drawn")
    s.add_argument("--fidelity", default="packet", metavar="packet|flow",
                   help="network model of every point: 'packet' simulates every packet on every link (default); "
                        "'flow' every transfer as one flow sharing its links max-min fairly (ADR 0039; results "
                        "default to out/studies-flow/NAME). A packet run also runs each study's fidelity panel, "
                        "some of its points in flow fidelity beside their packet results")
    r = sub.add_parser("report", help="build the codesign report (figures, generated LaTeX, PDF) from study results",
                       description="Draw the figures and write the generated LaTeX from out/studies/*/results.json, "
                                   "then run latexmk.")
    r.add_argument("--studies", default="out/studies", metavar="DIR",
                   help="folder holding one results folder per study (default: %(default)s)")
    r.add_argument("--source", default=None, metavar="DIR",
                   help="report sources: main.tex, sections/, reference/ (default: those installed with "
                        "kernbench-studies)")
    r.add_argument("--out", default="out/report", metavar="DIR", help="output folder (default: %(default)s)")
    r.add_argument("--topologies", default=None, metavar="DIR",
                   help="folder holding the topology files (default: ./topologies, else the repository's or the "
                        "packaged copies)")
    r.add_argument("--no-pdf", action="store_true", help="stop after the generated LaTeX (no latexmk)")
    return [s, r]


def topology_dir(arg: str | None) -> Path:
    """The folder of topology files: ``arg``, else ``./topologies``, else the repository's above the current folder
    or a temporary folder holding the packaged copies under their repository names."""
    if arg:
        return Path(arg)
    if Path("topologies").is_dir():
        return Path("topologies")
    from kernbench.topology.builtins import topologies_folder

    return topologies_folder(Path.cwd() / "_")


def _describe(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def run_study_command(args: argparse.Namespace) -> int:
    """``kernbench study``: plan, then run (or list with --dry-run), then draw figures; one summary line."""
    executor = args.executor or ("dask" if args.scheduler else "process")
    options = RunOptions(jobs=args.jobs, executor=executor, scheduler=args.scheduler,
                         out=Path(args.out) if args.out else None, force=args.force,
                         topology_dir=topology_dir(args.topologies), argv=("kernbench", *sys.argv[1:]),
                         where=parse_where(args.where), fidelity=args.fidelity)
    options = options.checked()  # the runner probes --out before any point runs (runner.check_writable)
    studies = resolve(args.name)
    t0 = time.perf_counter()
    plans = plan(studies, options)
    if args.dry_run:
        todo = 0
        for p in plans:
            for pp in p.points:
                status = "cached" if pp.cached else f"runs because {pp.reason}"
                todo += not pp.cached
                print(f"{p.study.name}[{pp.index}] {_describe(dict(pp.point.params))}: {status}")
        total = sum(len(p.points) for p in plans)
        print(f"dry run{_mode(options.fidelity)}: {total} points, {todo} would run, {total - todo} cached")
        return 0
    runs = run(plans, options)
    figures = 0
    if not args.no_figures and not args.where:  # the figures need the whole grid
        figures = draw_figures(runs, options.topology_dir)
    wall = time.perf_counter() - t0
    for r in runs:
        print(f"{r.study}: {r.points} points ({r.ran} run, {r.cached} cached){_mode(options.fidelity)} -> "
              f"{r.results}")
        line = fidelity_line(r.results)
        if line:
            print(f"  {line}")
    print(f"{len(runs)} {'study' if len(runs) == 1 else 'studies'}: {sum(r.ran for r in runs)} points run, "
          f"{sum(r.cached for r in runs)} cached, {figures} figure files, {wall:.1f} s wall")
    return 0


def _mode(fidelity: str) -> str:
    return "" if fidelity == "packet" else f" [{fidelity} fidelity]"


def fidelity_line(results: Path) -> str:
    """One line on a study's fidelity panel (flow beside packet fidelity, :mod:`kernbench.studies.fidelity`), or
    "" when its results have none (a flow run, a ``--where`` selection without the pairs)."""
    from kernbench.studies.fidelity import rows, summary
    from kernbench.studies.results import load

    s = summary(rows(load(results)))
    if s is None:
        return ""
    return (f"fidelity panel: {len(s.rows)} points in flow beside packet fidelity: |error| median "
            f"{100 * s.median_error:.2f} %, max {100 * s.max_error:.2f} % ({s.worst.point}); speed-up (packet / "
            f"flow wall time) median {s.median_speedup:.2f}x, {s.min_speedup:.2f}x to {s.max_speedup:.2f}x")


def draw_figures(runs, topology_dir: Path, stream=None, clock=time.perf_counter) -> int:
    """Draw each run study's figures beside its results, saying on stderr (``stream``) when each study's drawing
    starts and ends (drawing takes seconds and prints nothing itself); returns the number of figure files."""
    from kernbench.studies.figures import render_study
    from kernbench.studies.results import load

    total = 0
    for r in runs:
        folder = r.results.parent / "figures"
        announce(f"{r.study}: drawing figures into {folder}", stream)
        t0 = clock()
        files = len(render_study(load(r.results), folder, topology_dir=topology_dir))
        announce(f"{r.study}: {files} figure files in {clock() - t0:.1f} s", stream)
        total += files
    return total


def run_report_command(args: argparse.Namespace) -> int:
    """``kernbench report``: generated LaTeX and figures from the results, then latexmk (unless --no-pdf)."""
    from kernbench.studies.report.build import no_empty_folders_on_failure

    with no_empty_folders_on_failure(args.out):  # a failed run leaves no empty out/report behind
        return _report(args)


def _report(args: argparse.Namespace) -> int:
    from kernbench.cli.paths import output_dir
    from kernbench.studies.report.build import build_pdf, generate, latexmk, pdf_stats

    output_dir(args.out, "--out")
    t0 = time.perf_counter()
    if not args.no_pdf:
        latexmk()  # fail before generating anything when TeX is missing
    from kernbench.studies.results import RESULTS_JSON, load

    for name in study_names():  # a missing or malformed results file: one error line, before the progress lines
        load(Path(args.studies) / name / RESULTS_JSON)
    from kernbench.studies.report.build import source_dir
    from kernbench.studies.report.grounding import require_grounded

    require_grounded(source_dir(args.source))  # a hand-typed number in the sources: one error line, file and line
    announce(f"report: drawing figures and writing the generated LaTeX into {Path(args.out) / 'tex'}")
    gen = generate(Path(args.studies), args.source, Path(args.out), topology_dir(args.topologies))
    if args.no_pdf:
        print(f"report sources: {gen.main} ({len(gen.numbers.items)} numbers), {time.perf_counter() - t0:.1f} s")
        return 0
    announce(f"report: running latexmk into {Path(args.out) / 'build'}")
    pdf = build_pdf(gen, Path(args.out))
    st = pdf_stats(Path(args.out))
    print(f"report: {pdf} ({st.pages} pages, {st.figures} figures, {st.tables} tables, {len(gen.numbers.items)} "
          f"numbers), {time.perf_counter() - t0:.1f} s")
    return 0
