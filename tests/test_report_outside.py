"""`kernbench report` run from a folder outside the repository, as after `pip install kernbench`: it finds the
report sources installed with kernbench-studies, builds the PDF when TeX is there, says where the results came
from on the title page, writes nothing where it runs, and leaves no kernbench-topologies-* temporary folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HAVE_TEX = all(shutil.which(c) for c in ("latexmk", "pdflatex", "pdftotext"))


@pytest.mark.slow  # draws every figure and runs latexmk: about 45 s on two cores
def test_report_from_outside_the_repository(tmp_path, synthetic):
    studies = tmp_path / "studies"
    synthetic.write_synthetic(studies)  # made-up results, no git commit: as a run outside a clone records
    elsewhere, temp, out = tmp_path / "elsewhere", tmp_path / "temp", tmp_path / "out"
    elsewhere.mkdir()
    temp.mkdir()
    env = {**os.environ, "KERNBENCH_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}
    args = ["report", "--studies", str(studies), "--out", str(out), *(() if HAVE_TEX else ("--no-pdf",))]
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p in temp.iterdir() if p.name.startswith("kernbench")] == []
    assert (out / "tex" / "main.tex").read_text() == (
        ROOT / "packages" / "kernbench-studies" / "src" / "kernbench" / "studies" / "report" / "tex" /
        "main.tex").read_text()
    if HAVE_TEX:
        pdf = out / "build" / "kernbench-codesign-report.pdf"
        text = subprocess.run(["pdftotext", "-l", "1", str(pdf), "-"], capture_output=True, text=True,
                              check=True).stdout
        text = re.sub(r"\s+", " ", text)
        assert "Results of kernbench study all from the installed kernbench-studies test (not a git clone)" in text
        assert "commit none" not in text
