"""The SIP topology strategies and their registry (kernbench.topology.sip_topologies)."""

from __future__ import annotations

import pytest

from kernbench.topology import SpecError, spec_from_dict
from kernbench.topology.sip_topologies import (
    DEFAULT_SIP_TOPOLOGY,
    MESH_2D_NO_WRAP,
    RING_1D,
    SHIPPED,
    TORUS_2D,
    SipTopology,
    SipTopologyError,
    get_sip_topology,
    register_sip_topology,
    sip_topology_names,
    unregister_sip_topology,
)


def test_the_shipped_families_are_registered_in_order():
    assert sip_topology_names()[:3] == tuple(t.name for t in SHIPPED)
    assert [get_sip_topology(t.name) for t in SHIPPED] == list(SHIPPED)
    assert [t.label for t in SHIPPED] == ["ring", "torus", "mesh"] and RING_1D.name == DEFAULT_SIP_TOPOLOGY


def test_an_unknown_name_lists_the_registered_ones():
    with pytest.raises(SipTopologyError, match="unknown SIP topology 'hypercube'; registered: " +
                       ", ".join(sip_topology_names())):
        get_sip_topology("hypercube")


def test_grids_layouts_and_neighbours():
    assert RING_1D.grid(6, (2, 3)) == (1, 6) and TORUS_2D.grid(6, (2, 3)) == (2, 3)
    assert RING_1D.layout(4, 6, (2, 3)) == (0, 4) and MESH_2D_NO_WRAP.layout(4, 6, (2, 3)) == (1, 1)
    assert [TORUS_2D.neighbour(r, "W", 2, 3) for r in range(6)] == [2, 0, 1, 5, 3, 4]
    assert [MESH_2D_NO_WRAP.neighbour(r, "W", 2, 3) for r in range(6)] == [None, 0, 1, None, 3, 4]
    assert [TORUS_2D.neighbour(r, "N", 2, 3) for r in range(6)] == [3, 4, 5, 0, 1, 2]
    assert RING_1D.neighbour(0, "S", 1, 6) is None and RING_1D.neighbour(5, "E", 1, 6) == 0
    assert RING_1D.exchange_lines(1, 6) == ((6, True), (1, True))
    assert MESH_2D_NO_WRAP.exchange_lines(2, 3) == ((3, False), (2, False))
    with pytest.raises(SipTopologyError, match="direction 'up'"):
        TORUS_2D.neighbour(0, "up", 2, 3)


def test_grid_problems_come_from_the_family():
    assert TORUS_2D.grid_problem(6, (2, 3)) is None and "rows*cols" in TORUS_2D.grid_problem(6, (2, 2))
    assert RING_1D.grid_problem(5, (1, 2)) is None  # the default grid fits any ring
    assert "ring_1d does not use the grid" in RING_1D.grid_problem(2, (3, 5))
    with pytest.raises(SpecError, match=r"holds 4 SIPs but system.sips.count = 6; make rows\*cols"):
        spec_from_dict({"system": {"sips": {"count": 6, "topology": "torus_2d", "grid": [2, 2]}}})


def test_registration_rules():
    line = SipTopology("line_1d_test", "line", 99, wrap_rows=False, wrap_cols=False)
    try:
        assert register_sip_topology(line) is line and register_sip_topology(line) is line  # idempotent
        with pytest.raises(SipTopologyError, match="already registered"):
            register_sip_topology(SipTopology("line_1d_test", "line", 98, wrap_rows=True, wrap_cols=False))
        with pytest.raises(SipTopologyError, match="kind 99 of 'other_test' is taken by 'line_1d_test'"):
            register_sip_topology(SipTopology("other_test", "other", 99, wrap_rows=True, wrap_cols=False))
        assert spec_from_dict({"system": {"sips": {"count": 3, "topology": "line_1d_test",
                                                   "grid": [1, 3]}}}).system.sips.topology == "line_1d_test"
    finally:
        unregister_sip_topology("line_1d_test")
    assert "line_1d_test" not in sip_topology_names()
    with pytest.raises(SipTopologyError, match="not an identifier"):
        register_sip_topology(SipTopology("no name", "x", 97, wrap_rows=False, wrap_cols=False))
    with pytest.raises(SipTopologyError, match="expected a SipTopology"):
        register_sip_topology("torus_2d")
