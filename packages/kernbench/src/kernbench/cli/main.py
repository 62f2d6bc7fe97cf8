"""The ``kernbench`` command: argument parsing, dispatch and the one-line error contract."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from kernbench.topology.errors import KernbenchError

DEFAULT_TOPOLOGY = Path("topologies/topology.yaml")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernbench", description="System-level simulator of AHBM chiplet hardware.")
    p.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("topology", help="compile a topology, print its summary, write diagrams")
    t.add_argument("path", nargs="?", default=str(DEFAULT_TOPOLOGY), help="topology YAML (default: %(default)s)")
    t.add_argument("--json", action="store_true", help="print the summary as JSON")
    t.add_argument("--diagrams", metavar="DIR", help="write one SVG per view into DIR")
    pr = sub.add_parser("probe", help="run the traffic catalog through the fabric")
    pr.add_argument("--topology", default=str(DEFAULT_TOPOLOGY), help="topology YAML (default: %(default)s)")
    pr.add_argument("--case", default="all", help="run one case by name (default: all)")
    pr.add_argument("--json", action="store_true", help="print results as JSON")
    pr.add_argument("--strict", action="store_true", help="exit 1 when an invariant fails")
    sub.add_parser("list", help="list the registered benches")
    r = sub.add_parser("run", help="run a bench on a device")
    r.add_argument("--topology", default=str(DEFAULT_TOPOLOGY), help="topology YAML (default: %(default)s)")
    r.add_argument("--bench", required=True, help="bench name or index from `kernbench list`")
    r.add_argument("--device", default="0", help="SIP index to run on, or 'all' (default: 0)")
    r.add_argument("--data", action="store_true", help="compute real numerics (slower)")
    r.add_argument("--json", action="store_true", help="print results as JSON")
    r.add_argument("--trace", metavar="FILE", help="write the op log as Chrome Trace Event JSON")
    r.add_argument("--links", metavar="FILE", help="write per-link bytes, packets, busy time and utilisation (JSON)")
    r.add_argument("--links-top", type=int, default=0, metavar="N", help="print the N busiest links")
    from kernbench.cli.links_cmd import add_parser as add_links
    from kernbench.cli.study_cmd import add_parsers
    from kernbench.cli.web_cmd import add_parser as add_web

    studies = add_parsers(sub)
    extra = (add_links(sub), add_web(sub))
    for sp in (t, pr, r, *studies, *extra):
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (2 on bad input)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "topology":
            from kernbench.cli.topology_cmd import run_topology

            return run_topology(args.path, as_json=args.json, diagrams=args.diagrams)
        if args.command in ("list", "run"):
            from kernbench.cli.run_cmd import run_list, run_run

            if args.command == "list":
                return run_list()
            return run_run(args.topology, args.bench, args.device, data=args.data, as_json=args.json,
                           trace=args.trace, links=args.links, links_top=args.links_top)
        if args.command == "links":
            from kernbench.cli.links_cmd import run_links

            return run_links(args)
        if args.command == "web":
            from kernbench.cli.web_cmd import run_web

            return run_web(args)
        if args.command in ("study", "report"):
            from kernbench.cli.study_cmd import run_report_command, run_study_command

            return run_study_command(args) if args.command == "study" else run_report_command(args)
        from kernbench.cli.probe import run_probe
        from kernbench.cli.report import print_probe

        result = run_probe(args.topology, args.case)
        if args.json:
            print(json.dumps(result.to_json(), indent=2))
        else:
            print_probe(result)
        return 1 if args.strict and not result.all_pass else 0
    except KernbenchError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"kernbench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
