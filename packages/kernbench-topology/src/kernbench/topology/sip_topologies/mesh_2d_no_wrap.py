"""``mesh_2d_no_wrap``: the SIPs on ``system.sips.grid``, without wrap-around."""

from __future__ import annotations

from kernbench.topology.sip_topologies.base import SipTopology, register_sip_topology

MESH_2D_NO_WRAP = register_sip_topology(SipTopology("mesh_2d_no_wrap", "mesh", 2, wrap_rows=False, wrap_cols=False))
