"""Shared fixtures for the end-to-end tests: run the real `kernbench` command."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = ROOT / "topologies" / "topology.yaml"


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``python -m kernbench.cli.main ARGS`` and capture its output."""
    return subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def topo_copy(tmp_path: Path) -> Path:
    """A private copy of the default topology that a test may edit. Nothing is written beside it: the cube mesh
    it compiles to is cached in the user cache (``cube-mesh`` under ``kernbench.topology.files.cache_root``)."""
    dst = tmp_path / "topology.yaml"
    shutil.copy(DEFAULT_TOPOLOGY, dst)
    return dst


@pytest.fixture(scope="session")
def cli():
    """The :func:`run_cli` helper, as a fixture."""
    return run_cli


@pytest.fixture(scope="session")
def synthetic():
    """The studies package's made-up study results (``studies_synthetic.py``: ``write_synthetic(folder)``), loaded
    from its file because that test folder is not a package."""
    spec = importlib.util.spec_from_file_location(
        "studies_synthetic", ROOT / "packages" / "kernbench-studies" / "tests" / "studies_synthetic.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
