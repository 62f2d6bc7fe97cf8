"""`kernbench study` and `kernbench report` end to end: a small run, its dry run, and every bad input the issue lists
(one line on stderr, exit status 2)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _kb(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KERNBENCH_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)


def _one_line_error(proc: subprocess.CompletedProcess, text: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernbench: error: "), proc.stderr
    assert text in lines[0], lines[0]


def test_a_small_study_run_then_its_dry_run(tmp_path):
    out = tmp_path / "gemm"
    where = ("--where", "series=tiles", "--where", "variant=load_load", "--where", "k_tiles=1,2")
    proc = _kb("study", "gemm", *where, "--jobs", "1", "--out", str(out), cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("1 study: 2 points run, 0 cached")
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema_version"] == 1 and [p["params"]["k_tiles"] for p in doc["points"]] == [1, 2]
    assert doc["provenance"]["run"]["argv"][:3] == ["kernbench", "study", "gemm"]
    assert (out / "results.csv").read_text().count("\n") == 3
    dry = _kb("study", "gemm", *where, "--out", str(out), "--dry-run", cache=tmp_path / "cache")
    assert dry.returncode == 0
    assert dry.stdout.splitlines() == [
        "gemm[120] series=tiles topology=topology.yaml variant=load_load k_tiles=1: cached",
        "gemm[121] series=tiles topology=topology.yaml variant=load_load k_tiles=2: cached",
        "dry run: 2 points, 0 would run, 2 cached"]
    cold = _kb("study", "gemm", *where, "--dry-run", cache=tmp_path / "other-cache")
    assert "runs because it has not run before" in cold.stdout


def test_unknown_study(tmp_path):
    _one_line_error(_kb("study", "nope", cache=tmp_path), "unknown study 'nope'; known studies: gemm, allreduce, gqa")


def test_jobs_zero(tmp_path):
    _one_line_error(_kb("study", "gemm", "--jobs", "0", cache=tmp_path), "--jobs must be a positive integer, got 0")


def test_unwritable_out(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    _one_line_error(_kb("study", "gemm", "--out", str(blocker / "x"), cache=tmp_path / "c"),
                    f"cannot write results to {blocker / 'x'}")


def test_unreachable_scheduler_within_ten_seconds(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    proc = _kb("study", "gemm", "--scheduler", f"tcp://127.0.0.1:{port}", "--out", str(tmp_path / "o"),
               cache=tmp_path / "c")
    assert time.perf_counter() - t0 < 10
    _one_line_error(proc, f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}")


def test_figure_step_rejects_a_wrong_schema_version(tmp_path):
    studies = tmp_path / "studies"
    for name in ("gemm", "allreduce"):
        (studies / name).mkdir(parents=True)
        (studies / name / "results.json").write_text(json.dumps(
            {"schema": "kernbench.study-results", "schema_version": 7, "study": name}))
    proc = _kb("report", "--no-pdf", "--studies", str(studies), "--out", str(tmp_path / "r"), cache=tmp_path / "c")
    _one_line_error(proc, "has schema version 7; this kernbench reads version 1")
