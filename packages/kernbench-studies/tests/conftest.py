"""Shared fixtures of the kernbench-studies tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def synthetic() -> ModuleType:
    """The ``studies_synthetic`` helper module (made-up study results for the figure and report tests), loaded by
    path because the tests are imported with ``--import-mode=importlib``."""
    spec = importlib.util.spec_from_file_location("studies_synthetic", Path(__file__).with_name("studies_synthetic.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
