"""docs/attention.md cannot rot: its scripts run and print what the page shows, its headline table is what
``kernbench run --bench gqa-headline --json`` reports, and its long-context table is the benchmark's JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "attention.md"

#: The page's runnable scripts: (file name the page gives it, a line only that script has).
SCRIPTS = [
    ("decode_example.py", 'partition="cube_sp_pe_sp", cubes=4, pes=8'),
    ("errors_example.py", "for call in (lambda:"),
]


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def _env() -> dict[str, str]:
    """This environment without bench parameters, with PYTHONPATH made absolute (scripts run elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GQA_")}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep)
                                            if p)
    return env


@pytest.mark.parametrize(("name", "marker"), SCRIPTS, ids=[n for n, _ in SCRIPTS])
def test_attention_scripts_print_what_the_page_shows(tmp_path, name, marker):
    text = PAGE.read_text()
    assert f"`{name}`" in text, f"docs/attention.md no longer names {name}"
    blocks = _blocks(text)
    i = next(i for i, (lang, body) in enumerate(blocks) if lang == "python" and marker in body)
    lang, shown = blocks[i + 1]
    assert lang == "text", f"the block after {name} on the page should be its printed output"
    (tmp_path / "topologies").symlink_to(ROOT / "topologies", target_is_directory=True)
    (tmp_path / name).write_text(blocks[i][1])
    proc = subprocess.run([sys.executable, name], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, f"docs/attention.md shows stale output of {name}: rerun it and paste what it prints"


def test_headline_table_is_what_kernbench_run_reports():
    text = PAGE.read_text()
    assert "`kernbench run --bench gqa-headline --json` reported:" in " ".join(text.split())
    num = r" \| ([\d.]+)"
    rows = re.findall(r"^\| `(\w+)` \| [^|]+" + num * 8 + r" \|$", text, re.M)
    assert [r[0] for r in rows] == ["prefill_c1", "prefill_c4_ring", "decode_c1_p8", "decode_c4_p8"], rows
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "run", "--bench", "gqa-headline", "--json"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)["metrics"]
    for panel, lat, gemm, math_, dma_read, ipcq, dma_busy, gemm_busy, math_busy in rows:
        got = (f"{m[f'{panel}.latency_ns']:.1f}", *(str(int(m[f"{panel}.op.{k}"])) for k in
                                                   ("gemm", "math", "dma_read", "ipcq_copy")),
               *(f"{m[f'{panel}.occupancy_ns.{e}']:.1f}" for e in ("pe_dma", "pe_gemm", "pe_math")))
        assert got == (lat, gemm, math_, dma_read, ipcq, dma_busy, gemm_busy, math_busy), \
            f"docs/attention.md: panel {panel} now reports {got}"


def test_long_context_table_is_the_benchmark_json():
    """The page's partition table and wall time are benchmarks/results/attention.json (bench_attention.py)."""
    text = PAGE.read_text()
    results = json.loads((ROOT / "benchmarks" / "results" / "attention.json").read_text())
    parts = results["partitions"]["results"]
    rows = re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    want = [(s, *(f"{parts[s][p]['latency_ns']:.1f}" for p in ("cube_sp_pe_tp", "cube_repl_pe_tp", "cube_repl_pe_sp",
                                                             "cube_sp_pe_sp"))) for s in parts]
    assert rows == want, "docs/attention.md: the partition table differs from benchmarks/results/attention.json"
    wall = results["long_context"]["results"]["cube_sp_pe_sp"]["wall_s"]
    assert f"`cube_sp_pe_sp` at {wall:.1f} s of wall time" in " ".join(text.split())
