"""Shared fixtures of the kernbench-studies tests."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest


def _helper(name: str) -> ModuleType:
    """A helper module of this folder, loaded by path because the tests are imported with
    ``--import-mode=importlib``."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def synthetic() -> ModuleType:
    """The ``studies_synthetic`` helper module: made-up study results for the figure and report tests."""
    return _helper("studies_synthetic")


@pytest.fixture(scope="session")
def fc() -> ModuleType:
    """The ``figure_checks`` helper module: the layout checks every report figure must pass."""
    return _helper("figure_checks")


@pytest.fixture(scope="session")
def drawn_figures(synthetic, tmp_path_factory) -> Path:
    """The report's figures of the synthetic results of every study (``write_synthetic``'s), the fidelity figure
    of all of them included, drawn once for the whole test run as ``kernbench report`` draws them (PDF, beside
    their input stamps): the folder holding them.

    Drawing them is most of the time a report generation takes, and five test modules generate the report from
    these same results. Under pytest-xdist the workers share one drawing: the first worker to get here draws
    while the others wait for it (a lock file in the run's common temporary folder)."""
    from kernbench.studies.figures import render_fidelity, render_study, render_topology

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    folder, done = root / "synthetic-figures", root / "synthetic-figures.done"
    topologies = Path(__file__).resolve().parents[3] / "topologies"
    with open(root / "synthetic-figures.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed half-way
            docs = synthetic.write_synthetic(root / "synthetic-figures-studies")
            for doc in docs.values():
                render_study(doc, folder, ("pdf",), topologies)
            render_topology(topologies, folder, ("pdf",))
            render_fidelity(docs, folder, ("pdf",))
            done.touch()
    return folder


@pytest.fixture(scope="session")
def seed_figures(drawn_figures):
    """``seed_figures(out)`` copies :func:`drawn_figures` into ``out/tex/figures`` (where ``build.generate(...,
    out, ...)`` draws): the build then keeps every figure whose stamp matches, as a second ``kernbench report``
    run does, and draws only those of results that differ. Call it before the first generation into ``out``."""

    def seed(out: Path) -> None:
        shutil.copytree(drawn_figures, Path(out) / "tex" / "figures", dirs_exist_ok=True)

    return seed
