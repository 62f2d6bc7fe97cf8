"""`kernbench study` and `kernbench report` end to end: a small run, its dry run, every bad input the issue lists
(one line on stderr, exit status 2), and the all-reduce study's links panel and heatmaps."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from kernbench.studies import allreduce_links

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


def test_the_links_panel_from_the_command_line(tmp_path):
    """One links point through `kernbench study`: the record holds the links, the CSV leaves them out."""
    out = tmp_path / "allreduce"
    where = ("--where", "panel=links", "--where", "topology=6sip_2x3_torus_2d.yaml")
    proc = _kb("study", "allreduce", *where, "--jobs", "1", "--out", str(out), cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("1 study: 1 points run, 0 cached, 0 figure files")
    doc = json.loads((out / "results.json").read_text())
    (point,) = doc["points"]
    rows = json.loads(point["values"]["links"])
    assert point["values"]["links_used"] == len(rows) and doc["fields"]["links"]["csv"] is False
    assert point["values"]["link_bytes"] == sum(r[3] for r in rows)
    header, row = (out / "results.csv").read_text().splitlines()
    assert "links" not in header.split(",") and "window_ns" in header.split(",") and "→" in row


def test_report_draws_the_heatmaps_from_results_and_refuses_another_topology(tmp_path, synthetic):
    studies = tmp_path / "studies"
    docs = synthetic.write_synthetic(studies)
    proc = _kb("report", "--no-pdf", "--studies", str(studies), "--out", str(tmp_path / "r"), cache=tmp_path / "c")
    assert proc.returncode == 0, proc.stderr
    figures = tmp_path / "r" / "tex" / "figures"
    for tag in ("ring", "torus", "mesh"):
        assert (figures / f"allreduce_links_{tag}.pdf").stat().st_size > 10_000
    macros = (tmp_path / "r" / "tex" / "generated" / "figures.tex").read_text()
    assert r"\newcommand{\kbFigAllreduceLinks}" in macros and r"\kbArLinksTorusWindow" in macros
    assert all(f"figures/allreduce_links_{tag}}}" in macros for tag in ("ring", "torus", "mesh"))  # one figure
    numbers = json.loads((tmp_path / "r" / "tex" / "generated" / "numbers.json").read_text())
    (torus,) = [p["values"] for p in docs["allreduce"]["points"]
                if p["labels"]["panel"] == "links" and p["values"]["sip_topology"] == "torus_2d"]
    assert numbers["kbArLinksTorusWindow"]["source"].endswith("window_ns, links panel, torus_2d")
    rows = allreduce_links.decode(torus["links"])
    top = allreduce_links.busiest(rows, torus["window_ns"], drawn_only=True)
    assert numbers["kbArLinksTorusBusiest"]["text"] == f"{100 * top.busy_ns / torus['window_ns']:.1f}"
    # the same results against an edited copy of the topology they were recorded on: one line, no figure
    topo = tmp_path / "topologies"
    shutil.copytree(ROOT / "topologies", topo, ignore=shutil.ignore_patterns("*.cube_mesh.yaml"))
    ring = topo / "6sip_2x3_ring_1d.yaml"
    ring.write_text(ring.read_text() + "\n# edited\n")
    proc = _kb("report", "--no-pdf", "--studies", str(studies), "--out", str(tmp_path / "r2"), "--topologies",
               str(topo), cache=tmp_path / "c")
    # found while drawing, so the stage line announcing the drawing precedes the one error line
    stage, error = proc.stderr.strip().splitlines()
    assert stage == f"report: drawing figures and writing the generated LaTeX into {tmp_path / 'r2' / 'tex'}"
    assert proc.returncode == 2 and error.startswith("kernbench: error: cannot draw the all-reduce heatmap of ring_1d")
    assert not (tmp_path / "r2" / "tex" / "figures" / "allreduce_links_ring.pdf").exists()


def test_report_refuses_a_hand_typed_number_in_one_line(tmp_path, synthetic):
    """The grounding check runs inside `kernbench report`: a number word typed into a section is one error line
    naming the file and the line, before anything is drawn (exit status 2)."""
    studies = tmp_path / "studies"
    synthetic.write_synthetic(studies)
    source = tmp_path / "tex"
    shutil.copytree(ROOT / "packages" / "kernbench-studies" / "src" / "kernbench" / "studies" / "report" / "tex",
                    source)
    target = source / "sections" / "06-discussion.tex"
    lines = target.read_text().splitlines()
    lines[3] = "Over eight shapes, " + lines[3]
    target.write_text("\n".join(lines) + "\n")
    proc = _kb("report", "--no-pdf", "--studies", str(studies), "--source", str(source), "--out",
               str(tmp_path / "r"), cache=tmp_path / "c")
    _one_line_error(proc, f"{target}:4: hand-typed number word 'eight' in 'Over eight shapes, ")
    assert not (tmp_path / "r").exists()
