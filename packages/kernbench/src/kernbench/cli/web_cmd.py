"""``kernbench web``: serve the topology and run viewer on loopback, or export it as static files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

LEVELS = ("system", "sip", "cube", "pe")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``web`` on the ``kernbench`` subcommand parser; returns it."""
    p = sub.add_parser("web", help="interactive topology and run viewer in the browser (loopback only)",
                       description="Serve the viewer on 127.0.0.1 (or write it as static files with --export).")
    p.add_argument("--topology", metavar="YAML",
                   help="topology YAML or builtin name to show (default: the one the links file names, else the "
                        "builtin default)")
    p.add_argument("--run", metavar="RUN.json", help="a run summary from `kernbench run --json`")
    p.add_argument("--links", metavar="LINKS.json", help="a links file from `kernbench run --links`")
    p.add_argument("--host", default=None,
                   help="address to listen on (default 127.0.0.1; anything else is reachable from other machines "
                        "and is allowed only when given here)")
    p.add_argument("--port", type=int, default=8765, help="port (default: %(default)s; 0 picks a free one)")
    p.add_argument("--view", default="system", help="first view: system, sip, cube or pe (default: %(default)s)")
    p.add_argument("--no-runs", action="store_true", help="do not let the page start bench runs")
    p.add_argument("--export", metavar="DIR", help="write the viewer as static files into DIR instead of serving")
    return p


def run_web(args: argparse.Namespace) -> int:
    """Check the inputs, then export the viewer or serve it until Ctrl-C."""
    from kernbench.cli.topology_loader import load_graph
    from kernbench.cli.web import ViewerInputError, ViewerServer, ViewerState, export_viewer, is_loopback
    from kernbench.cli.web.model import load_links, read_run
    from kernbench.sim.links import read_links
    from kernbench.topology.safe_yaml import printable

    if args.view not in LEVELS:
        raise ViewerInputError(f"unknown view {args.view!r} for --view; use one of {', '.join(LEVELS)}")
    if not 0 <= args.port <= 65535:
        raise ViewerInputError(f"--port {args.port} is not a port number; use 0..65535 (0 picks a free one)")
    if args.export:
        from kernbench.cli.paths import output_dir

        output_dir(args.export, "--export")
    topology = args.topology
    if topology is None and args.links:
        named = read_links(args.links).run.get("topology_file")
        topology = str(named) if named and (str(named).startswith("builtin:") or Path(str(named)).exists()) else None
    print(f"kernbench web: compiling {printable(topology or 'the builtin default topology')} …", file=sys.stderr,
          flush=True)
    graph = load_graph(topology)
    initial = {"view": args.view}
    if args.export:
        run = read_run(args.run) if args.run else None
        links = load_links(args.links, graph) if args.links else None
        written = export_viewer(graph, args.export, run=run, links=links, initial=initial)
        print(printable(f"viewer written to {written[0].parent} (open {written[0]} in a browser)"))
        return 0
    host = "127.0.0.1" if args.host is None else args.host
    if not is_loopback(host):
        print(f"kernbench web: warning: listening on {printable(host)}, which other machines may reach; the viewer "
              f"has no authentication{'' if args.no_runs else ' and can start simulations (--no-runs disables that)'}",
              file=sys.stderr)
    state = ViewerState(graph, args.run, args.links, allow_runs=not args.no_runs, initial=initial,
                        debug=getattr(args, "debug", False))
    server = ViewerServer(state, host, args.port)
    print(f"kernbench web: serving {printable(graph.spec.name)} at {printable(server.url)}", flush=True)
    print("kernbench web: press Ctrl-C to stop", file=sys.stderr, flush=True)
    server.serve()
    return 0
