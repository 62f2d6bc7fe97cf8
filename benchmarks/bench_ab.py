"""A/B of the simulator's speed: a base commit against the working tree, alternating runs on the same machine.

The base commit is exported with ``git archive`` (read only: nothing in the
repository changes) into a temporary folder. Each workload then runs in a
fresh ``python3`` process, base and head alternately, ``--repeats`` times
each, so both see the same load; the process imports the simulator from its
own tree only (the editable installs of this checkout are taken off
``sys.path`` for the base run). Printed and written to
``out/benchmarks/ab.json`` (``--out FILE``): the median wall time of the
workload itself (timed inside the process, imports excluded), the median
wall time of the whole process, the median CPU time of the workload (its
own process; it moves less than wall time when other work shares the
machine), and the ratios base / head (above 1: head is faster). Every run
must report the same simulated result (the bench's latency and event count,
or the study's exit status) in both trees, else the script says so.

Workloads (``--workloads``, comma separated):

- ``allreduce16``: ``ccl-allreduce`` (64 KiB per PE) on the 16-SIP 4x4 torus
  (``topologies/16sip_4x4_torus_2d.yaml``; each tree reads its own ``topologies`` folder, and a base tree
  older than a topology file gets this checkout's copy beside its own ``ccl.yaml``);
- ``allreduce6``: the same on the 6-SIP 2x3 torus;
- ``gemm``: the 2048-tile composite GEMM of ``bench_kernels.py`` (512x512x512,
  ``load_load``);
- ``fabric``: ``bench_fabric.py``'s workload (every PE of SIP 0 writes 64 KiB
  across the SIP);
- ``studies`` (also ``--studies``): ``kernbench study all --jobs 2 --force
  --no-figures`` into a temporary folder, cold; minutes per run. The study
  grids grow between commits, so this workload also prints the points both
  trees ran and the sum of those points' own wall times (as each runner
  measured them) in each tree, and their ratio.

An exported tree builds its compiled add-ons in place first (kernbench-accel's
calendar, ADR 0046), as this checkout's editable install has them; a tree
whose add-on does not build runs on its pure-Python fallback, and the script
says so. ``--pure-python`` runs both trees with ``KERNBENCH_ACCEL=0``.

Run: ``python benchmarks/bench_ab.py --base de8ada4 [--repeats 5] [--workloads allreduce16,gemm] [--studies]
[--head COMMIT] [--pure-python]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from _output import add_output_options, output_path, write_result

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "topologies"

#: Put the tree named by KB_TREE first and drop every other kernbench source folder (the editable installs).
PRELUDE = """
import os, sys, time
tree = os.environ["KB_TREE"]
srcs = sorted(os.path.join(tree, "packages", d, "src") for d in os.listdir(os.path.join(tree, "packages"))
              if os.path.isdir(os.path.join(tree, "packages", d, "src")))
sys.path[:] = srcs + [p for p in sys.path if "/packages/kernbench" not in p]
"""

BENCH = PRELUDE + """
import json
from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import load_topology
os.environ.update(json.loads(os.environ["KB_ENV"]))
graph = load_topology(os.environ["KB_TOPOLOGY"])
info = discover().resolve(os.environ["KB_BENCH"])
t, c = time.perf_counter(), time.process_time()
r = run_bench(info, graph)
wall, cpu = time.perf_counter() - t, time.process_time() - c
if not r.ok:
    raise SystemExit(f"{info.name} failed: {r.error_code}: {r.error}")
print(json.dumps({"wall_s": wall, "cpu_s": cpu,
                  "result": [round(r.latency_ns, 6), r.events, sorted(r.metrics.items())]}))
"""

FABRIC = PRELUDE + """
import json
from kernbench.components import default_registry
from kernbench.sim import GraphEngine, PeDmaWriteMsg
from kernbench.topology import AddressResolver, load_topology
graph = load_topology(os.environ["KB_TOPOLOGY"])
spec, res = graph.spec, AddressResolver(graph)
try:
    eng = GraphEngine(graph, default_registry(), record_hops=False)
except TypeError:  # before the rename of issue 20, item 8
    eng = GraphEngine(graph, default_registry(), trace=False)
n = spec.cubes_per_sip
for cube in range(n):
    for pe in range(spec.pes_per_cube):
        eng.submit(PeDmaWriteMsg(0, cube, pe, res.hbm_addr(0, n - 1 - cube, pe), 65536))
t, c = time.perf_counter(), time.process_time()
eng.run()
wall, cpu = time.perf_counter() - t, time.process_time() - c
hops = sum(w.packets for w in eng.wires.values())
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "result": [eng.now, eng.events, hops]}))
"""

STUDIES = PRELUDE + """
import json, tempfile
from kernbench.cli.main import main
with tempfile.TemporaryDirectory(prefix="kernbench-ab-") as out:
    t = time.perf_counter()
    try:
        code = main(["study", "all", "--jobs", "2", "--force", "--no-figures", "--out", out])
    except SystemExit as exc:
        code = exc.code
    wall = time.perf_counter() - t
    point_walls = {}  # "study params-json" -> the point's own wall time, as the runner measured it
    for results in __import__("pathlib").Path(out).glob("*/results.json"):
        doc = json.loads(results.read_text())
        walls = doc.get("provenance", {}).get("run", {}).get("point_wall_s", [])
        for point, w in zip(doc.get("points", []), walls):
            point_walls[doc.get("study", results.parent.name) + " " + json.dumps(point["params"], sort_keys=True)] = w
print(json.dumps({"wall_s": wall, "result": [code], "point_walls": point_walls}))
"""


def workloads() -> dict[str, tuple[str, dict[str, str]]]:
    """Workload name -> (script, environment)."""
    def bench(name: str, topology: str, env: dict[str, str]) -> tuple[str, dict[str, str]]:
        return BENCH, {"KB_BENCH": name, "KB_TOPOLOGY": topology, "KB_ENV": json.dumps(env)}

    return {
        "allreduce16": bench("ccl-allreduce", "16sip_4x4_torus_2d.yaml", {"CCL_BYTES": "65536", "CCL_BUFFER": "tcm"}),
        "allreduce6": bench("ccl-allreduce", "6sip_2x3_torus_2d.yaml", {"CCL_BYTES": "65536", "CCL_BUFFER": "tcm"}),
        "gemm": bench("matmul-composite", "topology.yaml", {"MATMUL_M": "512", "MATMUL_K": "512", "MATMUL_N": "512",
                                                            "MATMUL_VARIANT": "load_load"}),
        "fabric": (FABRIC, {"KB_TOPOLOGY": "topology.yaml"}),
        "studies": (STUDIES, {}),
    }


def export_commit(commit: str, dest: Path) -> str:
    """Unpack ``commit``'s tree into ``dest`` with ``git archive`` (read only); returns the full commit id."""
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          check=True, capture_output=True, text=True).stdout.strip()
    archive = dest.parent / "base.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", full], check=True, stdout=fh)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return full


def build_addons(tree: Path) -> list[str]:
    """Build the compiled add-ons of an exported ``tree`` (each ``packages/*`` with a ``setup.py``: kernbench-accel's
    calendar) into a wheel with pip and put its extension modules beside their sources, as an editable install of
    this checkout has them; returns the ones that did not build (that tree then runs on its pure-Python
    fallback)."""
    failed = []
    for setup in sorted(tree.glob("packages/*/setup.py")):
        wheels = setup.parent / "_wheel"
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
                               str(wheels), str(setup.parent)], capture_output=True, text=True)
        built = sorted(wheels.glob("*.whl")) if proc.returncode == 0 else []
        if not built:
            failed.append(setup.parent.name)
            continue
        with zipfile.ZipFile(built[0]) as whl:
            for member in whl.namelist():
                if member.endswith(".so") or member.endswith(".pyd"):
                    (setup.parent / "src" / member).write_bytes(whl.read(member))
        shutil.rmtree(wheels)
    return failed


def topology_in(tree: Path, name: str) -> Path:
    """The topology file ``name`` as ``tree`` sees it: its own copy, or this checkout's copied into its
    ``topologies`` folder (a topology added after the base commit), so each tree reads the ``ccl.yaml`` and
    ``mesh`` files of its own folder (a newer ``ccl.yaml`` may name collectives an older tree refuses)."""
    own = tree / "topologies" / name
    if not own.exists() and tree != ROOT:
        own.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TOPOLOGIES / name, own)
    return own


#: Set by --pure-python: both trees run on the pure-Python calendar (KERNBENCH_ACCEL=0).
PURE_PYTHON = False


def run_once(tree: Path, script: str, env: dict[str, str]) -> tuple[float, float, object, dict | None, float | None]:
    """Run ``script`` in a fresh process on ``tree``: (workload wall s, process wall s, result, for the studies
    each point's own wall time by study and params, and the workload's CPU time of its own process, s)."""
    full_env = {**os.environ, **env, "KB_TREE": str(tree), "PYTHONHASHSEED": "0"}
    if "KB_TOPOLOGY" in env:
        full_env["KB_TOPOLOGY"] = str(topology_in(tree, env["KB_TOPOLOGY"]))
    full_env.pop("PYTHONPATH", None)
    if PURE_PYTHON:
        full_env["KERNBENCH_ACCEL"] = "0"
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", script], env=full_env, cwd=tree, capture_output=True, text=True)
    process_wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"workload failed on {tree}:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["wall_s"], process_wall, data["result"], data.get("point_walls"), data.get("cpu_s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="de8ada4", help="the commit to compare against (default: de8ada4)")
    ap.add_argument("--head", default=None, help="a commit for the B side (default: the working tree)")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each side per workload (default 5)")
    ap.add_argument("--workloads", default="allreduce16,gemm",
                    help=f"comma-separated, from {', '.join(workloads())} (default: allreduce16,gemm)")
    ap.add_argument("--studies", action="store_true", help="also time `kernbench study all --jobs 2` cold (minutes)")
    ap.add_argument("--pure-python", action="store_true",
                    help="run both trees on the pure-Python calendar (KERNBENCH_ACCEL=0): the fallback's speed")
    add_output_options(ap, "ab.json")
    args = ap.parse_args(argv)
    global PURE_PYTHON
    PURE_PYTHON = args.pure_python
    path = output_path(args, "ab.json")
    table = workloads()
    names = [w for w in args.workloads.split(",") if w]
    if args.studies and "studies" not in names:
        names.append("studies")
    unknown = [w for w in names if w not in table]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(table)}")

    with tempfile.TemporaryDirectory(prefix="kernbench-ab-") as tmp:
        base_tree = Path(tmp) / "base"
        base_id = export_commit(args.base, base_tree)
        if args.head:
            head_tree = Path(tmp) / "head"
            head_id = export_commit(args.head, head_tree)
        else:
            head_tree, head_id = ROOT, "working tree"
        trees = {"base": base_tree, "head": head_tree}
        for side, tree in trees.items():
            if tree != ROOT:
                for name in build_addons(tree):
                    print(f"{side}: {name} did not build; that tree runs on its pure-Python fallback", flush=True)
        out: dict[str, object] = {"command": "python benchmarks/bench_ab.py " + " ".join(sys.argv[1:]),
                                  "base": base_id, "head": head_id, "repeats": args.repeats,
                                  "calendar": "pure Python" if PURE_PYTHON else "compiled where built",
                                  "workloads": {}}
        print(f"base {base_id[:12]}  head {head_id if not args.head else head_id[:12]}  repeats {args.repeats}",
              flush=True)
        for name in names:
            script, env = table[name]
            walls: dict[str, list[float]] = {"base": [], "head": []}
            procs: dict[str, list[float]] = {"base": [], "head": []}
            results: dict[str, set[str]] = {"base": set(), "head": set()}
            points: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
            cpus: dict[str, list[float]] = {"base": [], "head": []}
            for i in range(args.repeats):
                for side in (("base", "head") if i % 2 == 0 else ("head", "base")):  # alternate who goes first
                    wall, proc, result, point_walls, cpu = run_once(trees[side], script, env)
                    walls[side].append(wall)
                    if cpu is not None:
                        cpus[side].append(cpu)
                    procs[side].append(proc)
                    results[side].add(json.dumps(result))
                    for key, w in (point_walls or {}).items():
                        points[side].setdefault(key, []).append(w)
            med = {s: statistics.median(walls[s]) for s in walls}
            pmed = {s: statistics.median(procs[s]) for s in procs}
            same = results["base"] == results["head"] and len(results["head"]) == 1
            row = {"base_wall_s": med["base"], "head_wall_s": med["head"], "ratio": med["base"] / med["head"],
                   "base_process_s": pmed["base"], "head_process_s": pmed["head"],
                   "process_ratio": pmed["base"] / pmed["head"], "walls_s": walls, "same_result": same,
                   "result": sorted(results["head"])}
            if cpus["base"] and cpus["head"]:  # CPU time moves less than wall time on a shared machine
                cb, ch = statistics.median(cpus["base"]), statistics.median(cpus["head"])
                row.update({"base_cpu_s": cb, "head_cpu_s": ch, "cpu_ratio": cb / ch, "cpus_s": cpus})
            common = sorted(set(points["base"]) & set(points["head"]))
            if common:  # the studies: the points both trees ran, each timed by its runner (grids grow over time)
                b = sum(statistics.median(points["base"][k]) for k in common)
                h = sum(statistics.median(points["head"][k]) for k in common)
                by_study: dict[str, list] = {}  # study -> [points, base s, head s, ratio]
                for k in common:
                    acc = by_study.setdefault(k.split(" ", 1)[0], [0, 0.0, 0.0, 0.0])
                    acc[0] += 1
                    acc[1] += statistics.median(points["base"][k])
                    acc[2] += statistics.median(points["head"][k])
                for acc in by_study.values():
                    acc[3] = acc[1] / acc[2] if acc[2] else float("nan")
                row.update({"points": {s: len(points[s]) for s in points}, "common_points": len(common),
                            "common_base_s": b, "common_head_s": h, "common_ratio": b / h,
                            "common_by_study": by_study})
            out["workloads"][name] = row
            if common:
                print(f"{name:12s} {len(common)} points in both trees (base ran {len(points['base'])}, head "
                      f"{len(points['head'])}): their own times sum to {b:.1f} s vs {h:.1f} s, ratio {b / h:.2f}x",
                      flush=True)
                for study, (n, sb, sh, ratio) in sorted(by_study.items()):
                    print(f"{'':12s}   {study}: {n} points, {sb:.1f} s vs {sh:.1f} s, ratio {ratio:.2f}x", flush=True)
            print(f"{name:12s} base {med['base']:8.3f} s  head {med['head']:8.3f} s  ratio {row['ratio']:5.2f}x   "
                  f"(whole process: {pmed['base']:.2f} s vs {pmed['head']:.2f} s, {row['process_ratio']:.2f}x)"
                  + (f"  cpu {row['base_cpu_s']:.3f} s vs {row['head_cpu_s']:.3f} s, {row['cpu_ratio']:.2f}x"
                     if "cpu_ratio" in row else "")
                  + f"{'' if same else '  RESULTS DIFFER'}", flush=True)
    write_result(path, out)
    return 0 if all(r["same_result"] for r in out["workloads"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
