"""``kernbench topology``: compile a topology, summarise it, optionally write diagrams."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kernbench.cli.topology_loader import load_graph
from kernbench.topology import TopologyGraph, builtin_names
from kernbench.topology.builtins import export as export_builtin
from kernbench.topology.errors import KernbenchError
from kernbench.topology.safe_yaml import printable


class TopologyUsageError(KernbenchError):
    """Options of ``kernbench topology`` that do not go together."""


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


def _check_modes(path: str | None, *, diagrams: str | None, list_: bool, export: tuple[str, str] | None,
                 verbose: bool) -> None:
    """:class:`TopologyUsageError` for options that ``--list`` or ``--export`` would ignore."""
    mode = "--list" if list_ else "--export" if export else None
    if mode is None:
        return
    if list_ and export:
        raise TopologyUsageError("--list and --export do different things; give one of them")
    ignored = [f"the topology {path!r}" if path is not None else "", f"--diagrams {diagrams}" if diagrams else "",
               "--verbose" if verbose else ""]
    ignored = [x for x in ignored if x]
    if ignored:
        what = "lists the builtin topologies" if list_ else "writes a builtin topology"
        raise TopologyUsageError(f"{mode} only {what}, so {' and '.join(ignored)} would be ignored; run "
                                 f"`kernbench topology` again for {'it' if len(ignored) == 1 else 'them'}")


def export_target(name: str, path: str) -> Path:
    """The file ``--export NAME PATH`` would write (``PATH``, or ``PATH/NAME.yaml`` for a folder); refuses a
    dangling symbolic link, which writing would follow to create its target somewhere else."""
    from kernbench.cli.paths import OutputPathError
    from kernbench.topology.spec_loader import expand_user

    dest = expand_user(path)
    if dest.is_dir():
        dest = dest / f"{name}.yaml"
    if dest.is_symlink() and not dest.exists():
        raise OutputPathError(f"--export {printable(str(dest))}: is a symbolic link to "
                              f"{printable(os.readlink(dest))}, which does not exist; writing through it would "
                              f"create that file, so remove the link or choose another path")
    return dest


def run_topology(path: str | None, *, as_json: bool, diagrams: str | None, list_: bool = False,
                 export: tuple[str, str] | None = None, verbose: bool = False) -> int:
    """Print the summary (text or JSON) and write the view diagrams if asked; or list / export the builtins.

    ``--list`` and ``--export`` do not read a topology, so a topology, ``--diagrams`` or ``--verbose`` given with
    them (ignored silently before) is refused, as is giving both."""
    _check_modes(path, diagrams=diagrams, list_=list_, export=export, verbose=verbose)
    if list_:
        names = builtin_names()
        print(json.dumps(names) if as_json else "\n".join(names))
        return 0
    if export:
        export_target(*export)
        print(f"wrote {printable(str(export_builtin(*export)))}")
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
    print(f"topology {spec.name!r} ({printable(str(spec.source))})")
    print(f"  SIPs: {info['sips']} ({spec.system.sips.topology})   cubes per SIP: {info['cubes_per_sip']} "
          f"({spec.sip.cube_mesh.w}x{spec.sip.cube_mesh.h})   PEs per cube: {info['pes_per_cube']}")
    print(f"  nodes: {info['nodes']}   edges: {info['edges']} of {len(info['edge_kinds'])} kinds"
          f"{'' if verbose else ' (--verbose lists them)'}")
    if verbose:
        for kind, n in info["edge_kinds"].items():
            print(f"    {kind:22s} {n:6d}")
        print(f"  cube-mesh cache: {printable(info['mesh_file']) or '(none)'}")
    if written:
        print(f"  wrote {len(written)} diagrams to {printable(str(written[0].parent))}: "
              f"{', '.join(p.name for p in written)}")
    return 0
