"""CONTRIBUTING.md cannot go stale: each walkthrough is built in an empty folder and run, and what it prints must
be what the guide shows.

Within one ``## Add ...`` section, every fenced block whose first line is ``# file: NAME`` is written to ``NAME``,
and every block whose first line is ``# run: NAME`` is written to ``NAME`` and run with ``python NAME`` from that
folder; its standard output must equal the ``text`` block that follows it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "CONTRIBUTING.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def _sections() -> dict[str, str]:
    parts = re.split(r"^## ", GUIDE.read_text(), flags=re.M)[1:]
    return {part.splitlines()[0].strip(): part for part in parts}


def _blocks(section: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(section)]


WALKTHROUGHS = [title for title, body in _sections().items()
                if any(code.startswith("# run: ") for _, code in _blocks(body))]


def test_the_guide_covers_every_seam():
    assert set(_sections()) >= {"Add a bench", "Add a component block", "Add a collective algorithm",
                                "Add a SIP topology family", "Add a study"}
    assert set(WALKTHROUGHS) >= {"Add a bench", "Add a component block", "Add a SIP topology family", "Add a study"}


@pytest.mark.parametrize("title", WALKTHROUGHS)
def test_walkthrough_runs_and_prints_what_the_guide_shows(title, tmp_path):
    blocks = _blocks(_sections()[title])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    ran = 0
    for i, (_lang, code) in enumerate(blocks):
        head = code.splitlines()[0]
        if head.startswith("# file: "):
            (tmp_path / head.removeprefix("# file: ").strip()).write_text(code)
        elif head.startswith("# run: "):
            script = tmp_path / head.removeprefix("# run: ").strip()
            script.write_text(code)
            lang, shown = blocks[i + 1]
            assert lang == "text", f"{title}: the block after {script.name} must show its output"
            proc = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == shown, f"{title}: {script.name} printed\n{proc.stdout}"
            ran += 1
    assert ran


def test_the_entry_point_groups_the_guide_names_exist():
    """The groups the guide tells plugin authors to use are the ones KernBench reads."""
    from kernbench.ccl import config as ccl_config
    from kernbench.components import registry
    from kernbench.runtime import bench
    from kernbench.studies import registry as studies

    text = GUIDE.read_text()
    for group in (bench.ENTRY_POINT_GROUP, registry.ENTRY_POINT_GROUP, ccl_config.ENTRY_POINT_GROUP,
                  studies.ENTRY_POINT_GROUP):
        assert f"`{group}`" in text or f'"{group}"' in text, group
