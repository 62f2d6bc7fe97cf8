"""Shared fixtures of the kernbench-ccl tests: compiled topologies, cached per session."""

from __future__ import annotations

from pathlib import Path

import pytest

import kernbench.ccl  # noqa: F401  (registers torch.distributed / multiprocessing / ahbm on every context)
from kernbench.topology import compile_spec, load_topology, spec_from_dict
from kernbench.topology.builtins import topologies_folder

TOPOLOGIES = topologies_folder(Path(__file__))

_GRAPHS: dict = {}


def _graph(name: str):
    """``name``: a file stem under ``topologies/`` (e.g. ``topology``, ``6sip_2x3_torus_2d``), or ``big_slots``:
    the default topology with 4 MiB IPCQ slots (one 8 MiB ring fills the 15 MiB of allocatable TCM)."""
    if name not in _GRAPHS:
        if name == "big_slots":
            _GRAPHS[name] = compile_spec(spec_from_dict({"pe": {"ipcq": {"slot_kib": 4096}}}))
        else:
            _GRAPHS[name] = load_topology(TOPOLOGIES / f"{name}.yaml")
    return _GRAPHS[name]


@pytest.fixture(scope="session")
def load_graph():
    """Factory of compiled topologies by name (see :func:`_graph`), compiled once per session."""
    return _graph


@pytest.fixture(scope="session")
def default_graph():
    """``topologies/topology.yaml``: 2 SIPs (ring_1d, grid 1x2) of 4x4 cubes, 8 PEs per cube."""
    return _graph("topology")

