"""The tutorial's script is executed and its printed output compared with the page, so the docs cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_kernels_tutorial_prints_what_the_page_shows(tmp_path):
    blocks = _blocks((ROOT / "docs" / "kernels.md").read_text())
    script = next(body for lang, body in blocks if lang == "python" and "session(" in body)
    shown = next(body for lang, body in blocks if lang == "text" and body.startswith("deployed:"))
    path = tmp_path / "mm_example.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, "docs/kernels.md shows stale output: rerun the script and paste what it prints"


def test_the_bench_list_on_the_page_is_what_kernbench_list_prints():
    blocks = _blocks((ROOT / "docs" / "kernels.md").read_text())
    shown = next(body for lang, body in blocks if lang == "text" and body.startswith("$ kernbench list\n"))
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "$ kernbench list\n" + proc.stdout == shown, "docs/kernels.md lists stale benches: paste `kernbench list`"
