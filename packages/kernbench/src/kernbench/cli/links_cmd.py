"""``kernbench links FILE``: the busiest links of a run's links file, and its heatmap.

The links file comes from ``kernbench run … --links FILE`` (see
:mod:`kernbench.sim.links`). ``--heatmap out.svg`` draws it on the topology
the run used (read from the file, or ``--topology``) with
:mod:`kernbench.topology.heatmap`: the links that carried traffic
(:func:`~kernbench.sim.links.carried_traffic`, the rule the links file and
the web viewer count with) are coloured by utilisation, every other link is
idle grey.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from kernbench.cli.paths import check_distinct, plan_outputs, replace_atomically
from kernbench.cli.topology_loader import load_graph
from kernbench.sim.links import LinksFileError, LinksReport, check_topology, format_top, read_links
from kernbench.topology import TopologyGraph
from kernbench.topology.heatmap import SCOPES, HeatmapInfo, write_heatmap
from kernbench.topology.safe_yaml import printable


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``links`` on the ``kernbench`` subcommand parser; returns it."""
    p = sub.add_parser("links", help="show the busiest links of a links file; draw its heatmap",
                       description="Read a links file written by `kernbench run --links FILE`.")
    p.add_argument("file", help="links file (JSON) from `kernbench run --links`")
    p.add_argument("--top", type=int, default=10, metavar="N", help="list the N busiest links (default: %(default)s)")
    p.add_argument("--heatmap", metavar="OUT", help="draw the links coloured by utilisation into OUT (.svg/.png/.pdf)")
    p.add_argument("--scope", default="auto", choices=SCOPES,
                   help="what the heatmap shows: the SIP of the busiest link or the tray (auto, default), the whole "
                        "tray (system), one SIP (sip) or one cube (cube)")
    p.add_argument("--sip", type=int, help="SIP index for --scope sip/cube (default: where the busiest link is)")
    p.add_argument("--cube", type=int, help="cube index for --scope cube (default: where the busiest link is)")
    p.add_argument("--topology", metavar="YAML", help="topology the run used (default: the file named in the links "
                                                      "file)")
    return p


def topology_of(report: LinksReport, topology: str | None, where: str) -> TopologyGraph:
    """The graph a links report was recorded on: ``topology`` if given, else the file the report names."""
    path = topology or report.run.get("topology_file")
    if not path:
        raise LinksFileError(f"{where} does not name its topology file; pass --topology YAML")
    if topology is None and not str(path).startswith("builtin:") and not Path(str(path)).exists():
        raise LinksFileError(f"{where} was recorded on {path}, which does not exist here; pass --topology YAML")
    graph = load_graph(str(path))
    check_topology(report, graph, where)
    return graph


def draw(report: LinksReport, graph: TopologyGraph, out: str, scope: str = "auto", sip: int | None = None,
         cube: int | None = None) -> HeatmapInfo:
    """Write the heatmap of ``report`` on ``graph`` to ``out``: one value (utilisation) per link that carried
    traffic, so ``HeatmapInfo.traffic`` is the same count as the links file's and the viewer's."""
    used = report.traffic()
    values = {(r.src, r.dst): r.utilisation for r in used}
    details = {(r.src, r.dst): f"{r.bytes:,} B in {r.packets:,} packets ({r.kind})" for r in used}
    sub = f"run window {report.window_ns / 1000:.2f} µs"
    return write_heatmap(graph, values, out, title=report.title, scope=scope, sip=sip, cube=cube, details=details,
                         subtitle=sub)


def run_links(args: argparse.Namespace) -> int:
    """Print the busiest links; draw the heatmap when asked."""
    heatmap = None
    if args.heatmap:
        inputs = {"the links file": Path(args.file)}
        if args.topology and not str(args.topology).startswith("builtin:"):
            inputs["the topology file"] = Path(args.topology)
        heatmap = plan_outputs({"--heatmap": (args.heatmap, None)}, inputs)["--heatmap"]
    report = read_links(args.file)
    if args.top < 0:
        raise LinksFileError(f"--top {args.top} must be 0 or more")
    if args.top:
        # the title, link names and kinds come from the file: escape what a terminal would act on
        print(printable(format_top(report.busiest(args.top), report.title, report.window_ns), keep="\n"))
    if args.heatmap:
        print(f"kernbench links: drawing the heatmap into {printable(args.heatmap)} …", file=sys.stderr, flush=True)
        graph = topology_of(report, args.topology, f"links file {args.file}")
        recorded = report.run.get("topology_file")
        if args.topology is None and recorded and not str(recorded).startswith("builtin:"):
            check_distinct({"--heatmap": heatmap}, {"the topology file the links file names": Path(str(recorded))})
        with replace_atomically(heatmap) as part:
            info = replace(draw(report, graph, str(part), args.scope, args.sip, args.cube), path=heatmap)
        where = {"system": "the whole tray", "sip": f"SIP {info.sip}",
                 "cube": f"SIP {info.sip} cube {info.cube}"}[info.scope]
        busiest = (f"; busiest link shown: {info.busiest_drawn[0]} → {info.busiest_drawn[1]} "
                   f"({100 * info.busiest_drawn[2]:.1f} %)") if info.busiest_drawn else "; no link carried traffic"
        print(printable(f"heatmap of {where} ({info.drawn} links drawn; {info.traffic_drawn} of the {info.traffic} "
                        f"links that carried traffic) written to {info.path}{busiest}"))
    return 0
