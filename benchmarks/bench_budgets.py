"""The largest runs we ship, measured against the simulation budgets (issue 12, ADR 0027).

Runs every registered bench at its defaults (timing mode, default topology) and every point of every study,
with the budgets switched off, and records for each the SimPy events, the simulated time and the op-log
records of its largest engine. The defaults of :mod:`kernbench.sim.limits` must stay far above the maxima.

Usage::

    python benchmarks/bench_budgets.py            # all benches and studies (about 10 minutes on 2 cores)
    python benchmarks/bench_budgets.py --no-studies

The result is written to ``out/benchmarks/budgets.json`` (``--out FILE``; ``--update-committed`` rewrites the
committed ``benchmarks/results/budgets.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _output import add_output_options, output_path, write_result

from kernbench.sim.engine import GraphEngine
from kernbench.sim.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_RECORDS, DEFAULT_MAX_SIM_NS, Limits

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("events", "sim_ns", "records")


class _Engines:
    """Collects every engine created while it is installed, each with the budgets off."""

    def __init__(self) -> None:
        self.created: list[GraphEngine] = []
        self._init = GraphEngine.__init__

    def __enter__(self) -> _Engines:
        created, init = self.created, self._init

        def unlimited(engine, *args, **kwargs):
            kwargs["limits"] = Limits(None, None, None, None)
            init(engine, *args, **kwargs)
            created.append(engine)

        GraphEngine.__init__ = unlimited
        return self

    def __exit__(self, *exc) -> None:
        GraphEngine.__init__ = self._init

    def largest(self) -> dict:
        e = max(self.created, key=lambda e: e.events)
        return {"events": e.events, "sim_ns": e.now, "records": len(e.oplog)}


def run_benches() -> list[dict]:
    from kernbench.runtime.bench import discover, run_bench
    from kernbench.topology import builtin

    rows = []
    for info in discover().benches:
        with _Engines() as engines:
            t = time.perf_counter()
            result = run_bench(info, builtin(), 0, limits=Limits(None, None, None, None))
            rows.append({"run": f"bench {info.name}", "ok": result.ok, **engines.largest(),
                         "wall_s": round(time.perf_counter() - t, 1)})
    return rows


def run_studies() -> list[dict]:
    from kernbench.studies.base import PointContext, point_fidelity, simulation_params
    from kernbench.studies.registry import get_study, study_names

    rows = []
    for name in study_names():
        study = get_study(name)
        for point in study.grid():  # a fidelity-panel copy runs in its own fidelity, as the study runner runs it
            ctx = PointContext(ROOT / "topologies", point_fidelity(point.params))
            with _Engines() as engines:
                t = time.perf_counter()
                study.point(simulation_params(point.params), ctx)
                rows.append({"run": f"study {name} {json.dumps(dict(point.params), sort_keys=True)}",
                             **engines.largest(), "wall_s": round(time.perf_counter() - t, 1)})
            print(f"{rows[-1]['run']}: {rows[-1]['events']:,} events", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-studies", action="store_true", help="benches only")
    add_output_options(ap, "budgets.json")
    args = ap.parse_args(argv)
    path = output_path(args, "budgets.json")
    rows = run_benches() + ([] if args.no_studies else run_studies())
    largest = {k: max(rows, key=lambda r: r[k]) for k in KEYS}
    budgets = {"events": DEFAULT_MAX_EVENTS, "sim_ns": DEFAULT_MAX_SIM_NS, "records": DEFAULT_MAX_RECORDS}
    result = {"command": "python benchmarks/bench_budgets.py " + " ".join(sys.argv[1:]),
              "largest": {k: {"value": largest[k][k], "run": largest[k]["run"],
                              "share_of_default_budget": round(largest[k][k] / budgets[k], 4)} for k in KEYS},
              "default_budgets": budgets, "runs": rows}
    write_result(path, result, indent=1)
    print(json.dumps(result["largest"], indent=1))
    ok = all(v["share_of_default_budget"] < 0.25 for v in result["largest"].values())
    print("every shipped run is below a quarter of each default budget" if ok else "A RUN COMES NEAR A BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
