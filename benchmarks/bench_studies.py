"""Study and report speed: cold runs with --jobs 2 and --jobs 1, and a warm rebuild of the whole report.

Each figure is the wall time of the real commands, run as subprocesses from the repository root with a
private cache (``KERNBENCH_CACHE_DIR``) and output folder under a temporary directory:

- ``cold_jobs2_s``: ``kernbench study all --jobs 2`` from an empty cache (every point simulated);
- ``cold_jobs1_s``: the same with ``--jobs 1`` (one worker process), another empty cache;
- ``speedup_jobs2_vs_jobs1``: their ratio (gemm + allreduce);
- ``report_first_s``: ``kernbench report`` right after the cold run (figures, generated LaTeX, latexmk);
- ``warm_rebuild_s``: ``kernbench study all --jobs 2`` then ``kernbench report`` again with nothing changed.

Writes ``benchmarks/results/studies.json``. Run: ``python benchmarks/bench_studies.py`` (add ``--skip-jobs1`` to
leave out the slow single-worker run). The machine's other load shows in these numbers: the JSON records the load
average before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _kb(args: list[str], cache: Path) -> tuple[float, str]:
    env = {**os.environ, "KERNBENCH_CACHE_DIR": str(cache)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kernbench {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, proc.stdout.strip().splitlines()[-1]


def _load() -> float:
    return os.getloadavg()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-jobs1", action="store_true", help="skip the cold --jobs 1 run")
    opts = ap.parse_args()
    out: dict = {"command": "python benchmarks/bench_studies.py", "cpu_count": os.cpu_count(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="kb-bench-studies-") as tmp:
        tmp = Path(tmp)
        studies, report = tmp / "studies", tmp / "report"
        for jobs in ((2,) if opts.skip_jobs1 else (2, 1)):
            cache = tmp / f"cache-jobs{jobs}"
            load = _load()
            wall, summary = _kb(["study", "all", "--jobs", str(jobs), "--out", str(tmp / f"studies-{jobs}"),
                                 "--no-figures"], cache)
            out["runs"][f"cold_jobs{jobs}"] = {"wall_s": round(wall, 2), "load_avg_1min_before": load,
                                               "summary": summary}
            print(f"cold, --jobs {jobs}: {wall:.1f} s ({summary})", flush=True)
        cache = tmp / "cache-jobs2"
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
    out["cold_jobs2_s"] = runs["cold_jobs2"]["wall_s"]
    if "cold_jobs1" in runs:
        out["cold_jobs1_s"] = runs["cold_jobs1"]["wall_s"]
        out["speedup_jobs2_vs_jobs1"] = round(runs["cold_jobs1"]["wall_s"] / runs["cold_jobs2"]["wall_s"], 2)
        print(f"speed-up --jobs 2 vs --jobs 1: {out['speedup_jobs2_vs_jobs1']:.2f}x")
    out["report_first_s"] = runs["report_first"]["wall_s"]
    out["warm_rebuild_s"] = runs["warm_rebuild"]["wall_s"]
    path = ROOT / "benchmarks" / "results" / "studies.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
