"""The topology every command works on: resolved, compiled, and its component bindings checked.

``kernbench topology`` and ``kernbench web`` never build an engine, so without
this check a binding to an unknown implementation (``router: warp_drive``)
would pass them silently and fail only later in ``run`` or ``probe``.
"""

from __future__ import annotations

from pathlib import Path

from kernbench.components import default_registry
from kernbench.topology import TopologyGraph, resolve


def load_graph(arg: str | Path | None) -> TopologyGraph:
    """The compiled topology ``arg`` names (a file, a builtin name, or None for the default), with every
    ``components:`` binding checked against the installed implementations."""
    graph = resolve(arg)
    default_registry().check(graph.spec)
    return graph
