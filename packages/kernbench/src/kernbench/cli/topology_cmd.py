"""``kernbench topology``: compile a topology, summarise it, optionally write diagrams."""

from __future__ import annotations

import json
from pathlib import Path

from kernbench.cli.topo import load_graph
from kernbench.topology import TopologyGraph, builtin_names
from kernbench.topology.builtins import export as export_builtin


def summary(graph: TopologyGraph) -> dict:
    """The documented JSON summary of a compiled topology."""
    spec = graph.spec
    return {
        "sips": spec.system.sips.count,
        "cubes_per_sip": spec.cubes_per_sip,
        "pes_per_cube": spec.pes_per_cube,
        "nodes": len(graph.nodes),
        "edges": len(graph.edges),
        "edge_kinds": graph.edge_kind_counts(),
        "mesh_file": str(graph.mesh_path) if graph.mesh_path else "",
    }


def run_topology(path: str | None, *, as_json: bool, diagrams: str | None, list_: bool = False,
                 export: tuple[str, str] | None = None, verbose: bool = False) -> int:
    """Print the summary (text or JSON) and write the view diagrams if asked; or list / export the builtins."""
    if list_:
        names = builtin_names()
        print(json.dumps(names) if as_json else "\n".join(names))
        return 0
    if export:
        print(f"wrote {export_builtin(*export)}")
        return 0
    if diagrams:
        from kernbench.cli.paths import output_dir

        output_dir(diagrams, "--diagrams")
    graph = load_graph(path)
    info = summary(graph)
    written: list[Path] = []
    if diagrams:
        from kernbench.topology.diagrams import emit_diagrams

        written = emit_diagrams(graph, diagrams)
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    spec = graph.spec
    print(f"topology {spec.name!r} ({spec.source})")
    print(f"  SIPs: {info['sips']} ({spec.system.sips.topology})   cubes per SIP: {info['cubes_per_sip']} "
          f"({spec.sip.cube_mesh.w}x{spec.sip.cube_mesh.h})   PEs per cube: {info['pes_per_cube']}")
    print(f"  nodes: {info['nodes']}   edges: {info['edges']} of {len(info['edge_kinds'])} kinds"
          f"{'' if verbose else ' (--verbose lists them)'}")
    if verbose:
        for kind, n in info["edge_kinds"].items():
            print(f"    {kind:22s} {n:6d}")
        print(f"  cube-mesh cache: {info['mesh_file'] or '(none)'}")
    if written:
        print(f"  wrote {len(written)} diagrams to {written[0].parent}: {', '.join(p.name for p in written)}")
    return 0
