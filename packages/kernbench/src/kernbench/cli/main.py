"""The ``kernbench`` command: argument parsing, dispatch and the one-line error contract.

Every subcommand that takes a topology accepts a YAML file, the name of a
builtin topology (``kernbench topology --list``), or nothing for the builtin
default, so the command works from any folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings

from kernbench.topology.errors import KernbenchError

TOPOLOGY_HELP = "topology YAML file or builtin name (default: the builtin 'default')"


class _Version(argparse.Action):
    """``--version``: one line per installed kernbench distribution (printed as is, not re-wrapped)."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from kernbench.cli.versions import version_text

        print(version_text())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernbench", description="System-level simulator of AHBM chiplet hardware.")
    p.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    p.add_argument("--version", action=_Version, help="print the installed kernbench packages and their versions")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("topology", help="compile a topology, print its summary, write diagrams")
    t.add_argument("path", nargs="?", default=None, help=TOPOLOGY_HELP)
    t.add_argument("--json", action="store_true", help="print the summary as JSON")
    t.add_argument("--diagrams", metavar="DIR", help="write one SVG per view into DIR")
    t.add_argument("--list", action="store_true", help="list the builtin topologies")
    t.add_argument("--export", nargs=2, metavar=("NAME", "PATH"), help="write builtin topology NAME to PATH to edit")
    t.add_argument("--verbose", action="store_true", help="also list the edge kinds and their counts")
    pr = sub.add_parser("probe", help="run the traffic catalog through the fabric")
    pr.add_argument("--topology", default=None, help=TOPOLOGY_HELP)
    pr.add_argument("--case", default="all", help="run one case by name (default: all)")
    pr.add_argument("--json", action="store_true", help="print results as JSON")
    pr.add_argument("--strict", action="store_true", help="exit 1 when an invariant fails")
    pr.add_argument("--verbose", action="store_true", help="also print every case's route, hop by hop")
    ls = sub.add_parser("list", help="list the installed benches")
    ls.add_argument("--params", nargs="?", const="", default=None, metavar="BENCH",
                    help="also list each bench's parameters (or only BENCH's)")
    r = sub.add_parser("run", help="run a bench on a device",
                       epilog="Parameters: `kernbench list --params BENCH`; -p wins over environment variables.")
    r.add_argument("--topology", default=None, help=TOPOLOGY_HELP)
    r.add_argument("--bench", required=True, help="bench name or index from `kernbench list`")
    r.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", dest="params",
                   help="set a bench parameter (repeatable)")
    r.add_argument("--device", default="0", help="SIP index to run on, or 'all' (default: 0)")
    r.add_argument("--data", action="store_true", help="compute real numerics (slower)")
    r.add_argument("--fidelity", default="packet", metavar="packet|flow",
                   help="network model: 'packet' simulates every packet on every link (default); 'flow' every "
                        "transfer as one flow sharing its links max-min fairly (faster, approximate; ADR 0039)")
    r.add_argument("--json", action="store_true", help="print results as JSON")
    r.add_argument("--trace", metavar="PATH", help="write the op log as Chrome Trace Event JSON to a file, or to "
                                                   "<folder>/<bench>.trace.json")
    r.add_argument("--links", metavar="FILE", help="write per-link bytes, packets, busy time and utilisation (JSON)")
    r.add_argument("--links-top", type=int, default=0, metavar="N", help="print the N busiest links")
    from kernbench.cli.run_cmd import add_budget_options

    add_budget_options(r)
    from kernbench.cli.links_cmd import add_parser as add_links
    from kernbench.cli.study_cmd import add_parsers
    from kernbench.cli.web_cmd import add_parser as add_web

    studies = add_parsers(sub)
    extra = (add_links(sub), add_web(sub))
    for sp in (t, pr, ls, r, *studies, *extra):
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def _one_line_warnings() -> None:
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"kernbench: warning: {message}", file=sys.stderr)

    warnings.showwarning = show


def _dispatch(args) -> int:
    if args.command == "topology":
        from kernbench.cli.topology_cmd import run_topology

        return run_topology(args.path, as_json=args.json, diagrams=args.diagrams, list_=args.list,
                            export=args.export, verbose=args.verbose)
    if args.command in ("list", "run"):
        from kernbench.cli.run_cmd import limits_from, run_list, run_run

        if args.command == "list":
            return run_list(args.params)
        limits = limits_from(max_events=args.max_events, max_sim_ns=args.max_sim_ns, timeout=args.timeout,
                             max_records=args.max_records)
        return run_run(args.topology, args.bench, args.device, data=args.data, as_json=args.json,
                       trace=args.trace, params=args.params, links=args.links, links_top=args.links_top,
                       limits=limits, debug=args.debug, fidelity=args.fidelity)
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
    from kernbench.cli.probe_tables import print_probe
    from kernbench.cli.topology_loader import load_graph

    result = run_probe(load_graph(args.topology), args.case)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print_probe(result, verbose=args.verbose)
    return 1 if args.strict and not result.all_pass else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (2 on bad input)."""
    args = _parser().parse_args(argv)
    _one_line_warnings()
    try:
        status = _dispatch(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # the reader went away (`kernbench list | head -1`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KernbenchError as exc:
        if args.debug:
            traceback.print_exc()
        from kernbench.topology.safe_yaml import printable  # messages quote user text, which may hold escapes

        print(f"kernbench: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernbench: interrupted", file=sys.stderr)
        return 130
    except (OSError, MemoryError) as exc:  # the machine, not the input: a full disk, no memory left
        if args.debug:
            traceback.print_exc()
        print(f"kernbench: error: {_environment_error(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: say so on one line; --debug shows where
        if args.debug:
            traceback.print_exc()
        text = " ".join(str(exc).split())[:160]
        print(f"kernbench: internal error: {type(exc).__name__}: {text}; this is a bug in kernbench, please report "
              f"it with the output of the same command with --debug", file=sys.stderr)
        return 1


def _environment_error(exc: BaseException) -> str:
    """One line for an OS-level failure (the file involved and the reason) or for running out of memory."""
    if isinstance(exc, MemoryError):
        return "out of memory; reduce the problem size (bench parameters, topology) or free memory"
    assert isinstance(exc, OSError)
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or type(exc).__name__}; check the path, its permissions and the free disk space"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
