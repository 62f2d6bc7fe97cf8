"""SIP topology families as strategies: one module per family, registered on import.

``system.sips.topology`` names a registered :class:`SipTopology`. The
compiler, the spec checks, the collectives' neighbour tables and the studies
ask it for the SIP grid, where a SIP is placed, which SIP lies in each
direction and the lines a collective exchanges along. To add a family,
write one module that builds a strategy (subclass :class:`SipTopology` when
the default row-major grid does not fit) and calls
:func:`register_sip_topology`; import it before loading a topology that
names it. Shipped: ``ring_1d``, ``torus_2d``, ``mesh_2d_no_wrap``.
"""

from __future__ import annotations

from kernbench.topology.sip_topologies.base import (
    RegisteredNames,
    SipTopology,
    SipTopologyError,
    get_sip_topology,
    register_sip_topology,
    sip_topology_names,
    unregister_sip_topology,
)
from kernbench.topology.sip_topologies.mesh_2d_no_wrap import MESH_2D_NO_WRAP
from kernbench.topology.sip_topologies.ring_1d import RING_1D
from kernbench.topology.sip_topologies.torus_2d import TORUS_2D

#: the shipped families, in the order studies and reports compare them
SHIPPED = (RING_1D, TORUS_2D, MESH_2D_NO_WRAP)
#: the family of a topology file that names none
DEFAULT_SIP_TOPOLOGY = RING_1D.name
#: every registered name, live (the spec field's choices)
SIP_TOPOLOGY_NAMES = RegisteredNames()

__all__ = [
    "DEFAULT_SIP_TOPOLOGY", "MESH_2D_NO_WRAP", "RING_1D", "SHIPPED", "SIP_TOPOLOGY_NAMES", "TORUS_2D",
    "RegisteredNames", "SipTopology", "SipTopologyError", "get_sip_topology", "register_sip_topology",
    "sip_topology_names", "unregister_sip_topology",
]
