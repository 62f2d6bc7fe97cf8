"""Op-log memory benchmark: bytes per record, and whether 10 million records fit in 2 GB (issue 12).

A real bench run (``matmul-composite`` and ``ccl-allreduce`` on the default
topology, timing mode) gives the mix of records: their components, op names
and parameters. The benchmark then logs ``--records`` records by replaying
that mix round-robin into a fresh log, re-creating every number as a new
object on the way (as a simulation does; small ints stay shared, as they do
in CPython), and measures the memory the log holds with ``tracemalloc`` (or, with
``--method rss``, as the growth of the resident set):

- ``columnar``: :class:`kernbench.sim.oplog.OpLog` (times in ``array('d')``,
  site and parameter names as 4-byte indices, values in one tuple a record);
- ``objects``: the layout before issue 12, one slotted ``OpRecord`` dataclass
  holding a params dict per record, in a list (``--baseline``).

Usage::

    python benchmarks/bench_oplog.py                      # 1,000,000 records, columnar and objects
    python benchmarks/bench_oplog.py --records 10000000 --method rss --out out/benchmarks/oplog_10m.json
                                                          # the 10-million-record target, resident memory

The result is written to ``out/benchmarks/oplog.json`` (``--out FILE``; ``--update-committed`` rewrites the
committed ``benchmarks/results/oplog.json``; the committed 10-million-record figure is
``--out benchmarks/results/oplog_10m.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path

from _output import add_output_options, output_path, write_result

from kernbench.runtime.bench import discover, run_bench
from kernbench.sim.oplog import OpLog, OpRecord
from kernbench.topology import builtin

ROOT = Path(__file__).resolve().parents[1]
TARGET_BYTES = 2 << 30
TARGET_RECORDS = 10_000_000


def sample_records() -> list[tuple]:
    """The records of two real bench runs as plain tuples (times, site, params)."""
    graph = builtin()
    registry = discover()
    rows = []
    for name in ("matmul-composite", "ccl-allreduce"):
        result = run_bench(registry.resolve(name), graph, 0)
        rows += [(r.t_start, r.t_end, r.component_id, r.op_kind, r.op_name, tuple(r.params.items()))
                 for r in result.records]
    return rows


def _fresh(value):
    """A new object equal to ``value`` for numbers (what arithmetic in a simulation produces)."""
    if isinstance(value, float):
        return value + 0.0
    if isinstance(value, int) and not isinstance(value, bool):
        return value + 0
    return value


def fill(n: int, rows: list[tuple], layout: str):
    """A log of ``n`` records replaying ``rows``; times shifted so they keep increasing."""
    span = max(r[1] for r in rows) + 1.0
    if layout == "columnar":
        log = OpLog()
        for i in range(n):
            t0, t1, comp, kind, name, params = rows[i % len(rows)]
            shift = (i // len(rows)) * span
            log.record(t0 + shift, t1 + shift, comp, kind, name, {k: _fresh(v) for k, v in params})
        return log
    out = []
    for i in range(n):
        t0, t1, comp, kind, name, params = rows[i % len(rows)]
        shift = (i // len(rows)) * span
        out.append(OpRecord(t0 + shift, t1 + shift, comp, kind, name, {k: _fresh(v) for k, v in params}))
    return out


def _rss() -> int:
    """This process's resident memory now, bytes (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def measure(n: int, rows: list[tuple], layout: str, method: str) -> dict:
    """Bytes the log of ``n`` records holds, by ``tracemalloc`` (exact Python allocations, slow) or by the growth
    of the resident set (``rss``: what the machine sees, fast), and the wall time to fill it."""
    gc.collect()
    if method == "tracemalloc":
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    else:
        base = _rss()
    t = time.perf_counter()
    log = fill(n, rows, layout)
    wall = time.perf_counter() - t
    if method == "tracemalloc":
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
    else:
        held = _rss() - base
    assert len(log) == n
    del log
    return {"records": n, "method": method, "bytes": held, "bytes_per_record": round(held / n, 1),
            "fill_wall_s": round(wall, 2), "projected_10M_records_gib": round(held / n * TARGET_RECORDS / (1 << 30), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=None,
                    help="also measure the one-object-per-record layout (default: when --records <= 2,000,000)")
    ap.add_argument("--method", choices=("tracemalloc", "rss"), default="tracemalloc",
                    help="how memory is measured (default: %(default)s; rss is faster for 10 million records)")
    add_output_options(ap, "oplog.json")
    args = ap.parse_args(argv)
    path = output_path(args, "oplog.json")
    baseline = args.records <= 2_000_000 if args.baseline is None else args.baseline

    rows = sample_records()
    result = {"command": "python benchmarks/bench_oplog.py " + " ".join(sys.argv[1:]),
              "sample": f"{len(rows)} records of matmul-composite and ccl-allreduce (default topology), replayed",
              "columnar": measure(args.records, rows, "columnar", args.method)}
    if baseline:
        result["objects"] = measure(args.records, rows, "objects", args.method)
    result["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    col = result["columnar"]
    result["target"] = {"records": TARGET_RECORDS, "bytes": TARGET_BYTES,
                        "met": col["bytes_per_record"] * TARGET_RECORDS < TARGET_BYTES}
    print(json.dumps(result, indent=2))
    write_result(path, result)
    return 0 if result["target"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
