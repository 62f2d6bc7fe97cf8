"""Golden digests of every bench run: the regression net under every model or structure change.

Each *case* is one bench, with fixed parameters, on one topology, in timing or
data mode. Running a case hashes everything the simulator produced:

- ``oplog``: every op record (times as ``float.hex``, component, kind, name, parameters);
- ``events`` and ``clock``: SimPy events processed and the final simulated time;
- ``links``: per-wire counters of every wire that carried traffic;
- ``pages`` and ``tensors``: in data mode, the addresses of every page of device memory the run touched, and
  every tensor's dtype, shape, shard addresses and count of non-finite values, exactly;
- ``values``: in data mode, a numeric sketch of every tensor's values (``numeric_fingerprint.py``), compared
  within a tolerance of a few units in the last place of the tensor's dtype, because numpy's BLAS and SIMD
  kernels differ between CPUs in the last bits (ADR 0029);
- ``summary``: the ``kernbench run --json`` object, metrics included;
- ``commands``: every launched kernel re-run on every target PE in command-list mode
  (``tl.record``), its PE commands in order, without their events and callables.

The committed digests live beside this file in ``digests.json``. Usage::

    python tests/golden/oplog_digest.py            # compare, exit 1 on any difference
    python tests/golden/oplog_digest.py --update   # rewrite digests.json (name the model change in the commit)
    nox -s golden [-- --update]                    # the same, in a fresh environment

``--fidelity flow`` runs the flow-fidelity set instead (:data:`FLOW_CASES`, a handful of cases in
:mod:`kernbench.sim.flow`'s model, ADR 0039) against ``digests_flow.json``; ``digests.json`` is packet
fidelity only and is never read or written then.

Every other field is exact on every machine. A digest that moves must come with a commit message (or ADR
line) naming the model change that moved it; a pure refactor moves none.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import os
import re
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numeric_fingerprint as fingerprint  # a sibling file, not an installed module

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = Path(__file__).with_name("digests.json")
DIGESTS_FLOW = Path(__file__).with_name("digests_flow.json")
SCHEMA = 2
DEFAULT = "topologies/topology.yaml"
SIX_SIP = "topologies/6sip_2x3_torus_2d.yaml"


@dataclass(frozen=True)
class Case:
    """One golden run: a bench with fixed parameters on a topology, with or without data."""

    topology: str
    bench: str
    data: bool
    params: tuple[tuple[str, str], ...] = field(default=())
    fidelity: str = "packet"

    @property
    def id(self) -> str:
        """A stable, readable key: ``topology/bench[params]/mode`` (``.../mode/flow`` in flow fidelity)."""
        knobs = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{Path(self.topology).stem}/{self.bench}{f'[{knobs}]' if knobs else ''}/" \
               f"{'data' if self.data else 'timing'}" + ("" if self.fidelity == "packet" else f"/{self.fidelity}")


#: Parameter variants beyond each bench's defaults (environment variables of the bench module).
VARIANTS: dict[str, list[dict[str, str]]] = {
    "matmul-composite": [{"MATMUL_VARIANT": "load_ref"}, {"MATMUL_VARIANT": "load_load"}],
    "gqa-decode-single-pe": [{"GQA_VARIANT": "opt1"}, {"GQA_VARIANT": "opt2"}],
    "ccl-allreduce": [{"CCL_BUFFER": "sram", "CCL_BYTES": "4096"}, {"CCL_BUFFER": "hbm", "CCL_BYTES": "4096"}],
    "gqa-decode": [{"GQA_PARTITION": "cube_repl_pe_sp", "GQA_VARIANT": "opt1"},
                   {"GQA_PARTITION": "short", "GQA_HKV": "2", "GQA_VARIANT": "opt3"}],
    "gqa-prefill": [{"GQA_MODE": "short", "GQA_PES": "4"}],
    "all-to-all": [{"CCL_A2A_ALGORITHM": "grid_all_to_all_hierarchical"}],
    "moe": [{"MOE_DISTRIBUTION": "zipf", "MOE_CAPACITY": "1.0", "MOE_SHARED": "yes", "MOE_PES": "4"}],
}


def cases(bench_names: Iterable[str]) -> list[Case]:
    """Every bench at its defaults and its variants, on the default and the 6-SIP torus, in both modes."""
    out = []
    for topology in (DEFAULT, SIX_SIP):
        for name in sorted(bench_names):
            for params in [{}, *VARIANTS.get(name, [])]:
                for data in (False, True):
                    out.append(Case(topology, name, data, tuple(sorted(params.items()))))
    return out


#: Benches whose behaviour depends on the topology beyond one SIP (they spawn a rank per SIP).
MULTI_SIP = frozenset({"ccl-allreduce", "tp-mlp"})


#: The flow-fidelity set (``--fidelity flow``, ``digests_flow.json``): a few seconds in all.
FLOW_CASES: tuple[Case, ...] = (
    Case(DEFAULT, "gemm-single-pe", False, fidelity="flow"),
    Case(DEFAULT, "gemm-single-pe", True, fidelity="flow"),
    Case(DEFAULT, "matmul-composite", False, (("MATMUL_VARIANT", "load_load"),), fidelity="flow"),
    Case(DEFAULT, "gqa-decode", False, fidelity="flow"),
    Case(SIX_SIP, "ccl-allreduce", False, fidelity="flow"),
    Case(SIX_SIP, "ccl-allreduce", False, (("CCL_BUFFER", "hbm"), ("CCL_BYTES", "4096")), fidelity="flow"),
    Case(SIX_SIP, "ccl-allreduce", True, (("CCL_BUFFER", "sram"), ("CCL_BYTES", "4096")), fidelity="flow"),
)


def quick_cases(bench_names: Iterable[str]) -> list[Case]:
    """The default test session's share: every case on the default topology, and on the 6-SIP torus only the
    benches that use more than one SIP (the others run on SIP 0 exactly as on the default). ``nox -s golden``
    and the slow session check every case."""
    return [c for c in cases(bench_names) if c.topology == DEFAULT or c.bench in MULTI_SIP]


# ---------------------------------------------------------------------------------------------- canonical form
def _canon(value) -> object:
    """A JSON-able, exact form: floats as hex (a 1-ulp change shows), containers recursively, keys sorted."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return float(value).hex()
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if hasattr(value, "item"):  # numpy scalar
        return _canon(value.item())
    raise TypeError(f"no canonical form for {type(value).__name__}: {value!r}")


def _sha(rows: Iterable[object]) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, separators=(",", ":"), sort_keys=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def digest_records(records) -> str:
    """SHA-256 over every op record in log order (times exact)."""
    return _sha([float(r.t_start).hex(), float(r.t_end).hex(), r.component_id, r.op_kind, r.op_name,
                 _canon(r.params)] for r in records)


def digest_links(stats) -> str:
    """SHA-256 over the per-wire counters."""
    return _sha([s.src, s.dst, s.kind, s.bytes, float(s.busy_ns).hex(), s.packets, s.messages,
                 float(s.max_wait_ns).hex()] for s in stats)


def digest_pages(memory) -> str | None:
    """SHA-256 over the base addresses of the pages of device memory the run touched (None in timing mode)."""
    if memory is None:
        return None
    return _sha([base for base, _ in memory.pages()])


@dataclass(frozen=True)
class TensorValues:
    """One tensor's final values as a golden case keeps them: exact identity, and the numeric sketch."""

    label: str
    addresses: tuple[int, ...]
    sketch: dict

    def exact(self) -> list:
        """Everything exact about the tensor: label, shard addresses and the sketch's exact facts."""
        return [self.label, list(self.addresses), {k: v for k, v in sorted(self.sketch.items()) if k != "f"}]


def _tensor_values(ctx, t) -> TensorValues:
    return TensorValues(t.label, tuple(addr.encode() for _, addr in t.shards), fingerprint.sketch(ctx.peek(t)))


_RUNTIME_ONLY = ("done", "delivered", "compute")  # command fields that hold events and data-mode callables


def _canon_command(value) -> object:
    """A command (or a part of one) without its events and callables, exactly."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: _canon_command(getattr(value, f.name))
                                       for f in dataclasses.fields(value) if f.name not in _RUNTIME_ONLY}]
    if isinstance(value, (list, tuple)):
        return [_canon_command(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon_command(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return _canon(value)


def command_rows(msg, spec) -> list:
    """The command lists ``tl.record`` gives for every target PE of one launch, in order, as digest rows. Taken
    when the launch is submitted, while its tensor arguments are alive (a kernel refuses a freed tensor)."""
    from kernbench.components.launch import program_grid
    from kernbench.tl import record

    rows = []
    grid = program_grid(msg.targets)
    for pe, args in msg.targets:
        pid, nprog = grid[pe]
        cmds = record(msg.fn, *args, spec=spec, kernel=msg.kernel, pe=pe, program_id=pid, num_programs=nprog)
        rows.append([msg.kernel, list(pe), [_canon_command(c) for c in cmds]])
    return rows


def run_case(case: Case) -> dict:
    """Run one case in this process and return its digests."""
    from kernbench.runtime.bench import discover, run_bench
    from kernbench.runtime.context import RuntimeContext
    from kernbench.sim.engine import GraphEngine
    from kernbench.topology import load_topology

    launches, commands = [], []
    contexts: list = []
    tensors: list[TensorValues] = []  # in the order they were freed, then those alive at the end
    submit, init, free = GraphEngine.submit, RuntimeContext.__init__, RuntimeContext.free

    def capture(engine, msg):
        if type(msg).__name__ == "KernelLaunchMsg":
            launches.append(msg)
            commands.extend(command_rows(msg, engine.graph.spec))
        return submit(engine, msg)

    def capture_init(ctx, *args, **kwargs):
        init(ctx, *args, **kwargs)
        contexts.append(ctx)

    def capture_free(ctx, t):
        if ctx.data and t in ctx._tensors:
            tensors.append(_tensor_values(ctx, t))
        free(ctx, t)

    saved = {k: os.environ.get(k) for k, _ in case.params}
    os.environ.update(dict(case.params))
    GraphEngine.submit, RuntimeContext.__init__, RuntimeContext.free = capture, capture_init, capture_free
    try:
        graph = load_topology(ROOT / case.topology)
        result = run_bench(discover().resolve(case.bench), graph, 0, data=case.data, fidelity=case.fidelity)
        tensors.extend(_tensor_values(ctx, t) for ctx in contexts if ctx.data and not ctx.closed
                       for t in ctx._tensors)
    finally:
        GraphEngine.submit, RuntimeContext.__init__, RuntimeContext.free = submit, init, free
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    engine = result.engine
    data = engine.memory is not None
    return {
        "ok": result.ok,
        "latency_ns": result.latency_ns,
        "records": len(result.records),
        "oplog": digest_records(result.records),
        "events": engine.events,
        "clock": float(engine.now).hex(),
        "links": digest_links(engine.link_stats()),
        "pages": digest_pages(engine.memory),
        "tensors": _sha(t.exact() for t in tensors) if data else None,
        "values": [t.sketch for t in tensors] if data else None,
        "summary": _sha([_canon(result.to_json())]),
        "launches": len(launches),
        "commands": _sha(commands),
    }


def compute(selected: list[Case], jobs: int) -> dict[str, dict]:
    """Digests of ``selected`` cases, in a process pool of ``jobs`` workers (1 = in this process)."""
    if jobs <= 1:
        return {c.id: run_case(c) for c in selected}
    # fork: workers inherit this module even when it was loaded from a path (the test imports it so)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        return {c.id: d for c, d in zip(selected, pool.map(run_case, selected), strict=True)}


def registered_benches() -> list[str]:
    """Names of every bench ``kernbench list`` shows."""
    from kernbench.runtime.bench import discover

    return [b.name for b in discover().benches]


def load(path: Path = DIGESTS) -> dict[str, dict]:
    """The committed digests (empty when none are committed yet); ``path`` :data:`DIGESTS_FLOW` for the flow set."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    if doc.get("schema") != SCHEMA:
        raise SystemExit(f"{path}: schema {doc.get('schema')!r}, this tool writes {SCHEMA}; run with --update")
    return doc["cases"]


_TOLERANT = ("values",)  # fields compared within a tolerance (numeric_fingerprint.compare), not by equality


def values_differ(want: list | None, got: list | None) -> str | None:
    """None when two cases' tensor sketches agree within tolerance, else which tensor differs and how."""
    if want is None or got is None:
        return None if want is got else f"{'none' if want is None else len(want)} -> " \
                                        f"{'none' if got is None else len(got)} tensors"
    if len(want) != len(got):
        return f"{len(want)} -> {len(got)} tensors"
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        why = fingerprint.compare(w, g)
        if why:
            return f"tensor {i}: {why}"
    return None


def numeric_spread(want: dict[str, dict], got: dict[str, dict]) -> dict[str, float]:
    """Per dtype, the largest relative move of a sketch functional between committed and fresh cases (ADR 0029
    quotes these for other CPUs' BLAS kernels)."""
    worst: dict[str, float] = {}
    for cid, case in got.items():
        for w, g in zip(want.get(cid, {}).get("values") or [], case.get("values") or [], strict=False):
            if "f" in w and "f" in g and len(w["f"]) == len(g["f"]):
                worst[w["dtype"]] = max(worst.get(w["dtype"], 0.0), fingerprint.spread(w, g))
    return worst


_SHOWN = ("ok", "latency_ns", "records", "events", "clock", "launches")  # fields shown by value in a difference


def differences(want: dict[str, dict], got: dict[str, dict]) -> list[str]:
    """One line per case that is missing, extra, or whose digests differ (naming the fields)."""
    lines = []
    for cid in sorted(set(want) | set(got)):
        if cid not in got:
            lines.append(f"{cid}: committed but no longer produced (bench or variant removed?)")
        elif cid not in want:
            lines.append(f"{cid}: new case with no committed digest (run with --update)")
        else:
            fields = [k for k in sorted(set(want[cid]) | set(got[cid])) if k not in _TOLERANT
                      and want[cid].get(k) != got[cid].get(k)]
            fields += [f"values ({why})" for why in [values_differ(want[cid].get("values"), got[cid].get("values"))]
                       if why]
            if fields:
                detail = ", ".join(f"{k}: {want[cid].get(k)!r} -> {got[cid].get(k)!r}" if k in _SHOWN else k
                                   for k in fields)
                lines.append(f"{cid}: {detail}")
    return lines


_NUMBERS = re.compile(r"\[\s*(-?[0-9][-+0-9.e]*(?:,\s*-?[0-9][-+0-9.e]*)*)\s*\]")


def dumps(doc: dict) -> str:
    """``doc`` as indented JSON with every list of numbers on one line (the sketches stay readable)."""
    text = json.dumps(doc, indent=1)
    return _NUMBERS.sub(lambda m: "[" + ",".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Compare (default) or rewrite the committed digests."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help="rewrite digests.json from this tree")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    ap.add_argument("--case", default="", help="only cases whose id contains this text")
    ap.add_argument("--fidelity", choices=("packet", "flow"), default="packet",
                    help="packet: every bench against digests.json (default); flow: the flow-fidelity set against "
                         "digests_flow.json")
    args = ap.parse_args(argv)
    flow = args.fidelity == "flow"
    path = DIGESTS_FLOW if flow else DIGESTS
    pool = list(FLOW_CASES) if flow else cases(registered_benches())
    selected = [c for c in pool if args.case in c.id]
    got = compute(selected, args.jobs)
    if args.update:
        kept = {} if not args.case else {k: v for k, v in load(path).items() if args.case not in k}
        merged = dict(sorted({**kept, **got}.items()))
        path.write_text(dumps({"schema": SCHEMA, "cases": merged}))
        print(f"wrote {len(got)} case digest(s) to {path.relative_to(ROOT)}")
        return 0
    want = load(path)
    if args.case:
        want = {k: v for k, v in want.items() if args.case in k}
    diff = differences(want, got)
    for line in diff:
        print(line)
    spread = numeric_spread(want, got)
    if spread:
        print("numeric spread against the committed sketches (largest |change| / magnitude, per dtype): " +
              ", ".join(f"{dt} {v:.2g} = {v / fingerprint.RTOL[dt]:.2g} of its tolerance"
                        for dt, v in sorted(spread.items())))
    print(f"{len(got)} case(s): {'all digests match' if not diff else f'{len(diff)} differ'}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
