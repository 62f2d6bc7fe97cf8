"""``torus_2d``: the SIPs on ``system.sips.grid``, wrapping around along rows and columns."""

from __future__ import annotations

from kernbench.topology.sip_topologies.base import SipTopology, register_sip_topology

TORUS_2D = register_sip_topology(SipTopology("torus_2d", "torus", 1, wrap_rows=True, wrap_cols=True))
