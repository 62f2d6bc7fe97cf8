"""Where a benchmark script writes its JSON result.

By default a result goes to ``out/benchmarks/NAME.json`` (``out/`` is ignored by
git), so running a benchmark to see a figure never rewrites the committed
results in ``benchmarks/results/``, which the README and the docs quote and
some tests read. ``--update-committed`` writes the committed file on purpose
(then commit it with the README or docs lines that quote it); ``--out FILE``
writes anywhere else.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Default folder of every result (ignored by git).
SCRATCH = ROOT / "out" / "benchmarks"
#: The committed results the README and the docs quote.
COMMITTED = ROOT / "benchmarks" / "results"


def add_output_options(parser: argparse.ArgumentParser, name: str) -> None:
    """Add ``--out FILE`` and ``--update-committed`` (mutually exclusive) for the result file ``name``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", metavar="FILE", help=f"result file (default: out/benchmarks/{name})")
    group.add_argument("--update-committed", action="store_true",
                       help=f"write benchmarks/results/{name}, the committed result the README and docs quote")


def output_path(args: argparse.Namespace, name: str) -> Path:
    """The result file the options in ``args`` ask for (see :func:`add_output_options`)."""
    if args.out:
        return Path(args.out)
    return (COMMITTED if args.update_committed else SCRATCH) / name


def write_result(path: Path, data: object, indent: int = 2) -> Path:
    """Write ``data`` as indented JSON to ``path`` (folders made as needed), say where, and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")
    full = path.resolve()
    shown = full.relative_to(ROOT) if full.is_relative_to(ROOT) else path
    print(f"wrote {shown}", flush=True)
    return path
