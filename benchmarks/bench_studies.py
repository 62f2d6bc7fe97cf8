"""Study and report speed: cold runs with --jobs 2 and --jobs 1, and a warm rebuild of the whole report.

Each figure is the wall time of the real commands, run as subprocesses from the repository root with a
private cache (``KERNBENCH_CACHE_DIR``) and output folder under a temporary directory:

- ``cold_all_jobs2_s``: ``kernbench study all --jobs 2`` from an empty cache (every point of every study);
- ``cold_jobs2_s`` / ``cold_jobs1_s``: ``kernbench study gemm,allreduce`` with ``--jobs 2`` and ``--jobs 1`` (one
  worker process), each from an empty cache;
- ``speedup_jobs2_vs_jobs1``: their ratio;
- ``report_first_s``: ``kernbench report`` right after the cold run (figures, generated LaTeX, latexmk);
- ``warm_rebuild_s``: ``kernbench study all --jobs 2`` then ``kernbench report`` again with nothing changed.

Writes ``out/benchmarks/studies.json`` (``--out FILE``; ``--update-committed`` rewrites the committed
``benchmarks/results/studies.json`` the README quotes). Run: ``python benchmarks/bench_studies.py``
(``--skip-jobs1`` leaves out the single-worker run, ``--speedup-only`` runs only the two gemm+allreduce runs and
writes nothing). The
machine's other load shows in these numbers: the JSON records the load average before each cold run and the CPU
seconds the command and its workers used (a parallel run on free cores uses about as much CPU as the serial one in
half the wall time).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _output import add_output_options, output_path, write_result

ROOT = Path(__file__).resolve().parents[1]


CPU = {}  # args -> CPU seconds (user + system) the command and its worker processes used


def _kb(args: list[str], cache: Path) -> tuple[float, str]:
    env = {**os.environ, "KERNBENCH_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[tuple(args)] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    if proc.returncode != 0:
        raise SystemExit(f"kernbench {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, proc.stdout.strip().splitlines()[-1]


def _load() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-jobs1", action="store_true", help="skip the cold --jobs 1 run")
    ap.add_argument("--speedup-only", action="store_true",
                    help="only the two cold gemm+allreduce runs (--jobs 2, --jobs 1); print, write nothing")
    add_output_options(ap, "studies.json")
    opts = ap.parse_args(argv)
    path = output_path(opts, "studies.json")
    out: dict = {"command": "python benchmarks/bench_studies.py", "cpu_count": os.cpu_count(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="kb-bench-studies-") as tmp:
        tmp = Path(tmp)
        studies, report = tmp / "studies", tmp / "report"
        for jobs in ((2,) if opts.skip_jobs1 else (2, 1)):
            cache = tmp / f"cache-jobs{jobs}"
            load = _load()
            wall, summary = _kb(["study", "gemm,allreduce", "--jobs", str(jobs), "--out",
                                 str(tmp / f"studies-{jobs}"), "--no-figures"], cache)
            cpu = CPU[("study", "gemm,allreduce", "--jobs", str(jobs), "--out", str(tmp / f"studies-{jobs}"),
                       "--no-figures")]
            out["runs"][f"cold_jobs{jobs}"] = {"wall_s": round(wall, 2), "cpu_s": cpu,
                                               "load_avg_1min_before": load, "summary": summary}
            print(f"cold gemm+allreduce, --jobs {jobs}: {wall:.1f} s ({summary})", flush=True)
        if opts.speedup_only:
            r1, r2 = out["runs"]["cold_jobs1"], out["runs"]["cold_jobs2"]
            print(f"speed-up --jobs 2 vs --jobs 1: {r1['wall_s'] / r2['wall_s']:.2f}x (CPU s: {r1['cpu_s']} vs "
                  f"{r2['cpu_s']})")
            return 0
        cache = tmp / "cache-all"
        load = _load()
        wall, summary = _kb(["study", "all", "--jobs", "2", "--out", str(studies), "--no-figures"], cache)
        out["runs"]["cold_all_jobs2"] = {"wall_s": round(wall, 2), "load_avg_1min_before": load, "summary": summary}
        print(f"cold all studies, --jobs 2: {wall:.1f} s ({summary})", flush=True)
        _kb(["study", "all", "--jobs", "2", "--out", str(studies)], cache)  # warm: results and figures
        wall, summary = _kb(["report", "--studies", str(studies), "--out", str(report)], cache)
        out["runs"]["report_first"] = {"wall_s": round(wall, 2), "summary": summary}
        print(f"first report build: {wall:.1f} s", flush=True)
        t0 = time.perf_counter()
        _kb(["study", "all", "--jobs", "2", "--out", str(studies)], cache)
        _, summary = _kb(["report", "--studies", str(studies), "--out", str(report)], cache)
        wall = time.perf_counter() - t0
        out["runs"]["warm_rebuild"] = {"wall_s": round(wall, 2), "summary": summary}
        print(f"warm rebuild (study all + report, nothing changed): {wall:.1f} s", flush=True)
    runs = out["runs"]
    out["cold_all_jobs2_s"] = runs["cold_all_jobs2"]["wall_s"]
    out["cold_jobs2_s"] = runs["cold_jobs2"]["wall_s"]
    if "cold_jobs1" in runs:
        out["cold_jobs1_s"] = runs["cold_jobs1"]["wall_s"]
        out["speedup_jobs2_vs_jobs1"] = round(runs["cold_jobs1"]["wall_s"] / runs["cold_jobs2"]["wall_s"], 2)
        print(f"speed-up --jobs 2 vs --jobs 1: {out['speedup_jobs2_vs_jobs1']:.2f}x")
    out["report_first_s"] = runs["report_first"]["wall_s"]
    out["warm_rebuild_s"] = runs["warm_rebuild"]["wall_s"]
    write_result(path, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
