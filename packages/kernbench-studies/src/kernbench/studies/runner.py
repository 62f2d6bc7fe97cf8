"""The study runner behind ``kernbench study``: plan, look up the cache, run what is missing, write results.

:func:`plan` keys every point of every selected study and looks it up in
the cache; :func:`run` runs the missing simulations (each once, even when
several panels share it) on the chosen executor, stores them, and writes
each study's ``results.json`` / ``results.csv`` with points in grid order.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernbench.studies import results as res
from kernbench.studies.base import (
    Point,
    PointContext,
    Study,
    StudyError,
    check_fidelity,
    point_fidelity,
    simulation_params,
)
from kernbench.studies.cache import KeyParts, ResultCache, key_parts, source_digest
from kernbench.studies.executors import EXECUTORS, check_scheduler, connect, run_tasks
from kernbench.studies.graphs import study_graph
from kernbench.studies.progress import Progress
from kernbench.studies.registry import get_study
from kernbench.studies.results import selected
from kernbench.topology.errors import KernbenchError
from kernbench.topology.versions import installed

DEFAULT_OUT = Path("out") / "studies"
#: Where a flow-fidelity run's results go by default (one folder per study), so that they never replace the
#: packet results the report and the docs read from :data:`DEFAULT_OUT`.
DEFAULT_OUT_FLOW = Path("out") / "studies-flow"

@dataclass(frozen=True)
class RunOptions:
    """How to run studies. ``jobs`` None means the CPU count; ``out`` None means ``out/studies/NAME`` per study
    (a given ``out`` is used as is for one study and holds one folder per study for several); ``progress`` None
    means "when stderr is a terminal". ``where`` keeps only the points whose label or param ``key`` is one of the
    given values (compared as text); the results then hold only those points. ``fidelity`` is the network
    fidelity every point runs in (``packet`` or ``flow``, ADR 0039), but the fidelity panel's points, which name
    their own; a flow run leaves those out (:meth:`Study.points`)."""

    jobs: int | None = None
    executor: str = "process"
    scheduler: str | None = None
    out: Path | None = None
    force: bool = False
    topology_dir: Path = Path("topologies")
    argv: tuple[str, ...] = ()
    progress: bool | None = None
    cache_root: Path | None = None
    where: tuple[tuple[str, tuple[str, ...]], ...] = ()
    fidelity: str = "packet"

    def checked(self) -> RunOptions:
        """These options after validation (:class:`StudyError` naming the bad option)."""
        check_fidelity(self.fidelity)
        if self.jobs is not None and (isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1):
            raise StudyError(f"--jobs must be a positive integer, got {self.jobs!r}")
        if self.executor not in EXECUTORS:
            raise StudyError(f"--executor {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.scheduler and self.executor != "dask":
            raise StudyError("--scheduler needs --executor dask")
        if not Path(self.topology_dir).is_dir():
            raise StudyError(f"topology folder {self.topology_dir} does not exist; run from the repository root or "
                             f"pass --topologies DIR")
        return self

    @property
    def workers(self) -> int:
        """Worker count: ``jobs`` or the CPU count."""
        return self.jobs or os.cpu_count() or 1


@dataclass(frozen=True)
class PlannedPoint:
    """One point of a study with its key and whether it is cached (and if not, why it runs)."""

    index: int
    point: Point
    parts: KeyParts
    key: str
    cached: bool
    reason: str
    values: dict | None = field(default=None, repr=False)
    wall_s: float = 0.0


@dataclass(frozen=True)
class StudyPlan:
    """A study's points in grid order and where its results go."""

    study: Study
    out: Path
    points: tuple[PlannedPoint, ...]


@dataclass(frozen=True)
class StudyRun:
    """What one study's run did: points simulated and taken from the cache, wall time (s), results file."""

    study: str
    results: Path
    points: int
    ran: int
    cached: int
    wall_s: float


def out_dir(study: Study, options: RunOptions, several: bool) -> Path:
    """Where a study's results go."""
    if options.out is None:
        return (DEFAULT_OUT if options.fidelity == "packet" else DEFAULT_OUT_FLOW) / study.name
    return Path(options.out) / study.name if several else Path(options.out)


def check_writable(folder: Path) -> None:
    """Create ``folder`` and write a probe file in it, or :class:`StudyError` saying it is not writable."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise StudyError(f"cannot write results to {folder}: {exc.strerror or exc}; choose a writable folder with "
                         f"--out DIR") from None


def parse_where(items: list[str] | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``["variant=load_load", "k_tiles=1,2"]`` -> ``(("variant", ("load_load",)), ("k_tiles", ("1", "2")))``."""
    out = []
    for item in items or ():
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise StudyError(f"--where {item!r}: use KEY=VALUE[,VALUE...], e.g. --where variant=load_load")
        out.append((key, tuple(values.split(","))))
    return tuple(out)


def plan(studies: list[Study], options: RunOptions) -> list[StudyPlan]:
    """Key every point and look it up in the cache (``--force`` marks every point to run)."""
    options = options.checked()
    cache = ResultCache(options.cache_root)
    plans = []
    for study in studies:
        planned = []
        points = [(i, p) for i, p in enumerate(study.points(options.fidelity)) if selected(p, options.where)]
        if not points:
            raise StudyError(f"--where {options.where} selects no point of study {study.name!r}")
        for i, point in points:
            parts = key_parts(study, point.params, options.topology_dir, options.fidelity)
            key = parts.key()
            if options.force:  # every point reruns: an entry, however damaged, is not even read
                planned.append(PlannedPoint(i, point, parts, key, False, "--force"))
                continue
            status, values, wall = cache.get(key, study)  # a corrupt entry warns once and reruns
            if status == "hit":
                planned.append(PlannedPoint(i, point, parts, key, True, "cached", values, wall))
            elif status == "corrupt":
                planned.append(PlannedPoint(i, point, parts, key, False, "its cache entry is corrupt"))
            else:
                planned.append(PlannedPoint(i, point, parts, key, False, cache.why(parts)))
        plans.append(StudyPlan(study, out_dir(study, options, len(studies) > 1), tuple(planned)))
    return plans


def execute_point(study_name: str, params: dict, topology_dir: str, fidelity: str = "packet") -> tuple[dict, float]:
    """Run one point in this process (the task every executor runs) in the fidelity of a run of ``fidelity``
    (its own ``fidelity`` param wins); returns its values and wall time (s). The point function gets the params
    without ``fidelity`` and the fidelity in its context."""
    study = get_study(study_name)
    ctx = PointContext(Path(topology_dir), point_fidelity(params, fidelity))
    t0 = time.perf_counter()
    try:
        values = study.point(simulation_params(params), ctx)
    except KernbenchError as exc:
        raise StudyError(f"study {study_name}, point {params}: {exc}") from None
    return values, time.perf_counter() - t0


def _git_commit(where: Path) -> str | None:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and len(out) == 40 else None


def _packages() -> dict[str, str]:
    return {name: version or "not installed" for name, version in installed().items()}


def _prewarm(points: list[tuple[StudyPlan, PlannedPoint]], options: RunOptions) -> None:
    """Compile the topologies (with their overrides) the points will use, in this process, before a forked
    process pool starts: the workers then inherit the compiled graphs instead of each compiling them again."""
    if options.executor != "process" or multiprocessing.get_start_method(allow_none=False) != "fork":
        return
    seen = set()
    for plan_, pp in points:
        params = simulation_params(pp.point.params)
        files = plan_.study.files(params)
        if not files:
            continue
        key = (files[0], tuple(sorted(plan_.study.overrides(params).items())))
        if key not in seen:
            seen.add(key)
            study_graph(options.topology_dir, files[0], plan_.study.overrides(params))


def run(plans: list[StudyPlan], options: RunOptions) -> list[StudyRun]:
    """Run the points the plans mark to run, store them in the cache, write every study's results."""
    options = options.checked()
    for p in plans:
        check_writable(p.out)
    if options.scheduler:  # even when every point is cached: a bad address is an error, not a silent no-op
        check_scheduler(options.scheduler)
    cache = ResultCache(options.cache_root)
    pending: dict[str, tuple[StudyPlan, PlannedPoint]] = {}
    for p in plans:
        for pp in p.points:
            if not pp.cached and pp.key not in pending:
                pending[pp.key] = (p, pp)
    # costliest first (longest-processing-time order): parallel workers then run out of work at about the same time
    keys = sorted(pending, key=lambda k: -pending[k][0].study.cost(pending[k][1].point.params))
    tasks = [(execute_point, (pending[k][0].study.name, dict(pending[k][1].point.params),
                              str(options.topology_dir), options.fidelity)) for k in keys]
    if options.scheduler and not tasks:
        connect(options.scheduler).close()  # nothing to run, but the address must still name a working scheduler
    _prewarm([pending[k] for k in keys], options)
    done: dict[str, tuple[dict, float]] = {}
    t0 = time.perf_counter()
    bar = Progress(len(tasks), " + ".join(p.study.name for p in plans), options.progress)
    try:
        for i, (values, wall) in run_tasks(tasks, options.executor, options.workers, options.scheduler):
            key = keys[i]
            try:
                cache.put(pending[key][1].parts, values, wall)
            except OSError as exc:
                raise StudyError(f"cannot write the study cache under {cache.root}: {exc.strerror or exc}; set "
                                 f"KERNBENCH_CACHE_DIR to a writable folder") from None
            done[key] = (values, wall)
            bar.step()
    finally:
        bar.close()
    elapsed = time.perf_counter() - t0
    runs = []
    for p in plans:
        points, walls = [], []
        ran = 0
        for pp in p.points:
            if pp.cached:
                values, wall = pp.values, pp.wall_s
            else:
                values, wall = done[pp.key]
                ran += 1
            points.append({"labels": dict(pp.point.labels), "params": dict(pp.point.params), "values": values})
            walls.append(round(wall, 4))
        files = {}
        for pp in p.points:
            files.update(pp.parts.files)
        provenance = {
            "packages": _packages(),
            "python": platform.python_version(),
            "topology_files": dict(sorted(files.items())),
            "source_sha256": source_digest(p.study.modules),
            "git_commit": _git_commit(Path(options.topology_dir)),
            "fidelity": options.fidelity,
            "run": {"argv": list(options.argv) or [sys.argv[0], *sys.argv[1:]], "executor": options.executor,
                    "jobs": options.workers, "wall_s": round(elapsed, 3), "points_run": ran,
                    "points_cached": len(p.points) - ran, "point_wall_s": walls,
                    **({"where": {k: list(v) for k, v in options.where}} if options.where else {})},
        }
        doc = res.document(p.study, points, provenance, options.fidelity)
        path, _ = res.write(p.out, doc)
        runs.append(StudyRun(p.study.name, path, len(p.points), ran, len(p.points) - ran, elapsed))
    return runs


def run_studies(studies: list[Study], options: RunOptions) -> list[StudyRun]:
    """Plan and run ``studies``; returns one :class:`StudyRun` per study."""
    return run(plan(studies, options), options)
