"""docs/moe.md: its script prints what the page shows and its bench figures are what `kernbench run` reports."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "moe.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_the_moe_script_prints_what_the_page_shows(tmp_path):
    text = PAGE.read_text()
    assert "`moe_example.py`" in text
    blocks = _blocks(text)
    i = next(i for i, (lang, body) in enumerate(blocks) if lang == "python" and "MoeLayer(" in body)
    lang, shown = blocks[i + 1]
    assert lang == "text"
    (tmp_path / "topologies").symlink_to(ROOT / "topologies", target_is_directory=True)
    (tmp_path / "moe_example.py").write_text(blocks[i][1])
    proc = subprocess.run([sys.executable, "moe_example.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, "docs/moe.md shows stale output of moe_example.py: rerun it and paste what it prints"
    assert shown.count("matches numpy: True") == 2


def test_the_moe_bench_figures_are_what_kernbench_run_reports():
    rows = re.findall(r"^\| `(kernbench run [^`]*)` \| `(\w+)` \| ([\d.]+) \|$", PAGE.read_text(), re.M)
    assert len(rows) == 4, rows
    for line, metric, shown in rows:
        argv = [sys.executable, "-m", "kernbench.cli.main", *shlex.split(line)[1:]]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)["metrics"][metric]
        assert f"{got:.1f}" == shown, f"docs/moe.md: `{line}` now reports {got:.1f} {metric}, the page {shown}"
