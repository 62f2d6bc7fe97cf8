"""Fixtures of the component tests: the default topology (2 SIPs of 4 x 4 cubes) and fresh engines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernbench.components import default_registry
from kernbench.sim import GraphEngine
from kernbench.topology import AddressResolver, compile_spec, spec_from_dict

# Let the test modules import the shared helpers in components_testkit.py (pytest runs in importlib mode).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def graph():
    return compile_spec(spec_from_dict({}))


@pytest.fixture(scope="session")
def resolver(graph):
    return AddressResolver(graph)


@pytest.fixture
def make_engine(graph):
    """Factory of fresh engines with the built-in components on the default topology."""

    def make(reg=None, *, record_hops=True):
        return GraphEngine(graph, reg or default_registry(), record_hops=record_hops)

    return make
