"""kernbench.topology — YAML topology spec to compiled hardware graph, views, routing and diagrams.

Typical use::

    from kernbench.topology import builtin, load_topology, PathRouter
    graph = builtin("default")                      # or load_topology("my_topology.yaml")
    path = PathRouter(graph).memory_path("tray.host_cpu", "sip0.cube0.hbm_ctrl.pe0")
"""

from importlib import metadata as _metadata

from kernbench.topology.address import PhysAddr, decode
from kernbench.topology.block_params import BlockParam
from kernbench.topology.builtins import builtin, resolve
from kernbench.topology.builtins import names as builtin_names
from kernbench.topology.compiler import compile_spec, load_topology
from kernbench.topology.diagrams import emit_diagrams
from kernbench.topology.errors import AddressError, KernbenchError, RoutingError, SpecError, TopologyError
from kernbench.topology.graph import Edge, Node, TopologyGraph, View, ViewEdge, ViewNode
from kernbench.topology.resolver import AddressResolver
from kernbench.topology.routing import PathRouter, path_edges
from kernbench.topology.sip_topologies import SipTopology, get_sip_topology, register_sip_topology, sip_topology_names
from kernbench.topology.spec import TopologySpec
from kernbench.topology.spec_loader import load_spec, spec_from_dict

__all__ = [
    "AddressError",
    "AddressResolver",
    "BlockParam",
    "Edge",
    "KernbenchError",
    "Node",
    "PathRouter",
    "PhysAddr",
    "RoutingError",
    "SipTopology",
    "SpecError",
    "TopologyError",
    "TopologyGraph",
    "TopologySpec",
    "View",
    "ViewEdge",
    "ViewNode",
    "__version__",
    "builtin",
    "builtin_names",
    "compile_spec",
    "decode",
    "emit_diagrams",
    "get_sip_topology",
    "load_spec",
    "load_topology",
    "path_edges",
    "register_sip_topology",
    "resolve",
    "sip_topology_names",
    "spec_from_dict",
]

__version__ = _metadata.version("kernbench-topology")
