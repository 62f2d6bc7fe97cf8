"""Bench registration, discovery and the runner behind ``kernbench run``.

A bench is a function decorated with ``@bench(name="kebab-case",
description="...", params=(Param(...), ...))``: ``run(torch)`` when it
declares no parameters, ``run(torch, p)`` when it does (``p`` holds the
resolved values, see :mod:`kernbench.runtime.params`). A bench may also say
what its reported metrics mean (``metrics={"latency_ns": "..."}``, printed
beside them by ``kernbench run``) and, when it reports the same metrics for
several parts named ``PART.metric`` (panels, say), ``metric_rows="panel"``
to have them printed as a table with one row per part.

Benches are found through the entry-point group ``kernbench.benches``: each
entry names a module (its benches) or a package (the benches of its
``__init__`` and of every module of it whose name does not start with ``_``;
sub-packages are libraries and are skipped). ``kernbench-benches`` registers
``kernbench.benches`` there; any installed distribution can add its own. An
entry that fails to import or registers nothing is reported by name (and
``kernbench list`` prints it as a warning) and skipped; it never breaks the
others.
:func:`discover` with an explicit package skips entry points (tests,
embedding). Benches are listed alphabetically with 1-based indices and
resolved by name or index.

:func:`run_bench` checks the parameters, gives the bench a fresh
:class:`RuntimeContext`, runs it, waits for every launch, and summarises the
op log (see :class:`BenchResult`).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata

from kernbench.runtime.context import RuntimeContext
from kernbench.runtime.params import Param, resolve
from kernbench.sim.collector import RunCollector
from kernbench.sim.limits import Limits
from kernbench.topology import TopologyGraph
from kernbench.topology import naming as nm
from kernbench.topology.errors import KernbenchError

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MARK = "__kernbench_bench__"
ENTRY_POINT_GROUP = "kernbench.benches"
BUILTIN_PACKAGE = "kernbench.benches"


class BenchError(KernbenchError):
    """A bench is missing, misnamed, unregistered, or submitted nothing."""


@dataclass(frozen=True)
class BenchInfo:
    """A registered bench: its name, description, function, module, declared parameters and module docstring;
    ``metric_notes`` (metric name, what it measures) and ``metric_rows`` (the word for the parts of a bench whose
    metrics are named ``PART.metric``, "" when they are not) say how ``kernbench run`` presents its metrics."""

    name: str
    description: str
    fn: Callable = field(repr=False)
    module: str
    params: tuple[Param, ...] = ()
    doc: str = ""
    metric_notes: tuple[tuple[str, str], ...] = ()
    metric_rows: str = ""
    host: str = "kernbench"


#: The host surfaces a bench's ``run`` may be written against: ours, or the earlier simulator's
#: (:func:`kernbench.runtime.compat.earlier`: ``torch.empty(..., dp=...)``, ``"f16"``, ``torch.spec[...]``).
HOSTS = ("kernbench", "earlier")


def bench(name: str, description: str, params: tuple[Param, ...] = (), *, metrics: Mapping[str, str] | None = None,
          metric_rows: str = "", host: str = "kernbench") -> Callable[[Callable], Callable]:
    """Mark ``run(torch)`` (or ``run(torch, p)`` with ``params``) as a bench called ``name`` (kebab-case) with a
    one-line description.

    ``metrics`` maps a reported metric's name (without the ``PART.`` prefix when ``metric_rows`` is given) to a
    short note on what it measures; ``metric_rows`` names the parts when the bench reports its metrics as
    ``PART.metric`` for several parts (``kernbench run`` then prints one table row per part). ``host="earlier"``
    hands ``run`` the earlier simulator's host surface (:func:`kernbench.runtime.compat.earlier`), so a bench
    script written for it runs unmodified; the simulation is the same.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise BenchError(f"bench name {name!r} must be kebab-case (lowercase words joined by '-')")
    if not isinstance(description, str) or not description.strip():
        raise BenchError(f"bench {name!r} needs a non-empty description")
    params = tuple(params)
    if not all(isinstance(p, Param) for p in params) or len({p.name for p in params}) != len(params):
        raise BenchError(f"bench {name!r}: params must be Param objects with distinct names")
    notes = tuple(dict(metrics or {}).items())
    if not all(isinstance(k, str) and k and isinstance(v, str) and v.strip() for k, v in notes):
        raise BenchError(f"bench {name!r}: metrics must map metric names to non-empty notes")
    if not isinstance(metric_rows, str):
        raise BenchError(f"bench {name!r}: metric_rows must be text (the word for one row, e.g. 'panel')")
    if host not in HOSTS:
        raise BenchError(f"bench {name!r}: host {host!r} is not one of {', '.join(HOSTS)}")

    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, (name, description, params, notes, metric_rows, host))
        return fn

    return mark


class BenchRegistry:
    """The benches found, sorted by name (index = position + 1), and the plugins that could not be loaded."""

    def __init__(self, benches: list[BenchInfo], problems: list[str] | None = None) -> None:
        names = [b.name for b in benches]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise BenchError(f"bench name(s) registered twice: {', '.join(dupes)}")
        self.benches = sorted(benches, key=lambda b: b.name)
        self.problems = list(problems or [])

    def resolve(self, key: str | int) -> BenchInfo:
        """A bench by name or by 1-based index (as listed by ``kernbench list``)."""
        text = str(key)
        if text.isascii() and text.isdigit():
            i = int(text)
            if 1 <= i <= len(self.benches):
                return self.benches[i - 1]
        for b in self.benches:
            if b.name == text:
                return b
        valid = ", ".join(f"{i}:{b.name}" for i, b in enumerate(self.benches, 1))
        raise BenchError(f"unknown bench {key!r}; valid benches: {valid}")


def _benches_of(module) -> list[BenchInfo]:
    marked = [(getattr(obj, _MARK), obj) for obj in vars(module).values()
              if callable(obj) and hasattr(obj, _MARK) and obj.__module__ == module.__name__]
    doc = (module.__doc__ or "").strip()
    return [BenchInfo(n, d, fn, module.__name__, p, doc, notes, rows, host)
            for (n, d, p, notes, rows, host), fn in marked]


def _collect(target: str) -> list[BenchInfo]:
    """The benches of a module, or of a package: those of its ``__init__`` and of every bench module in it.

    A bench module (a public module of a package) without a bench fails the audit; a target that registers
    nothing at all returns an empty list (the caller decides how to report it).
    """
    try:
        root = importlib.import_module(target)
    except ImportError as exc:
        raise BenchError(f"bench package {target!r} cannot be imported: {exc}") from None
    found = _benches_of(root)
    if not hasattr(root, "__path__"):  # a single module
        return found
    for mod_info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        if mod_info.name.startswith("_") or mod_info.ispkg:  # sub-packages are libraries a bench imports, not benches
            continue
        module = importlib.import_module(f"{target}.{mod_info.name}")
        benches = _benches_of(module)
        if not benches:
            raise BenchError(f"bench module {module.__name__} registers no bench; decorate its run(torch) with "
                             f"@bench or rename the module with a leading '_' if it is a helper")
        found += benches
    return found


def _registers_nothing(target: str) -> str:
    """What to do about a bench module or package (already imported) that registers no bench."""
    where = f"{target}'s __init__.py or one of its modules" if hasattr(sys.modules.get(target), "__path__") else target
    return f"decorate a run(torch) in {where} with @bench from kernbench.runtime.bench"


def discover(package: str | None = None) -> BenchRegistry:
    """Every installed bench (entry points of ``kernbench.benches``), or only those of ``package``.

    With entry points, a plugin that fails to load or registers no bench is
    recorded in :attr:`BenchRegistry.problems` (one line naming the entry
    point, the reason and the fix) and skipped. When no entry point is
    installed at all (a source tree on ``sys.path``), the built-in
    ``kernbench.benches`` package is used. An explicit ``package`` that
    registers no bench is a :class:`BenchError`.
    """
    if package is not None:
        own = _collect(package)
        if not own:
            raise BenchError(f"{package} registers no bench; {_registers_nothing(package)}")
        return BenchRegistry(own)
    found: list[BenchInfo] = []
    problems: list[str] = []
    entries = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    targets = [(e.name, e.value) for e in entries] or [("builtin", BUILTIN_PACKAGE)]
    seen: set[str] = set()
    for name, target in targets:
        if target in seen:  # the same distribution visible twice (e.g. an editable and a regular install)
            continue
        seen.add(target)
        where = f"bench plugin {name!r} (entry point {name} = {target} in group {ENTRY_POINT_GROUP})"
        try:
            benches = _collect(target)
        except Exception as exc:  # a broken plugin must not break the CLI
            problems.append(f"{where} was skipped: {type(exc).__name__}: {exc}")
            continue
        if not benches:
            problems.append(f"{where} registers no bench and was skipped; {_registers_nothing(target)}")
        found += benches
    try:
        return BenchRegistry(found, problems)
    except BenchError as exc:
        raise BenchError(f"{exc}; two installed bench plugins use the same name") from None


STAGE_OPS = {
    "DMA_READ": ("pe_dma", ("dma_read",)),
    "FETCH": ("pe_fetch_store", ("fetch",)),
    "GEMM": ("pe_gemm", None),
    "MATH": ("pe_math", None),
    "STORE": ("pe_fetch_store", ("store",)),
    "DMA_WRITE": ("pe_dma", ("dma_write",)),
}
ENGINES = ("pe_dma", "pe_fetch_store", "pe_gemm", "pe_math", "pe_cpu")


class _Usage:
    """Running busy time, first start, last end and count of a set of op records (one pass, nothing kept)."""

    __slots__ = ("count", "hi", "lo", "occupancy")

    def __init__(self) -> None:
        self.occupancy, self.lo, self.hi, self.count = 0, math.inf, -math.inf, 0

    def add(self, t_start: float, t_end: float) -> None:
        """Count one record running from ``t_start`` to ``t_end`` (ns)."""
        self.occupancy += t_end - t_start
        if t_start < self.lo:
            self.lo = t_start
        if t_end > self.hi:
            self.hi = t_end
        self.count += 1

    def to_json(self) -> dict:
        if not self.count:
            return {"occupancy_ns": 0.0, "wall_ns": 0.0, "count": 0}
        return {"occupancy_ns": self.occupancy, "wall_ns": self.hi - self.lo, "count": self.count}


@dataclass
class BenchResult:
    """The outcome of one bench run (the ``kernbench run --json`` contract)."""

    bench: str
    ok: bool
    error_code: str | None
    device: int
    latency_ns: float
    op_counts: dict
    engines: dict
    stages: dict
    pe_exec_start_ns: dict
    error: str | None = None
    events: int = 0
    metrics: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    records: Sequence = field(default_factory=list, repr=False)  # the run's op records (an OpLog view)
    engine: object = field(default=None, repr=False, compare=False)  # the run's GraphEngine, for inspection
    exception: BaseException | None = field(default=None, repr=False, compare=False)  # the error, for --debug

    def to_json(self) -> dict:
        """The documented JSON object."""
        return {"bench": self.bench, "ok": self.ok, "error_code": self.error_code, "device": self.device,
                "latency_ns": self.latency_ns, "op_counts": self.op_counts, "engines": self.engines,
                "stages": self.stages, "pe_exec_start_ns": self.pe_exec_start_ns, "error": self.error,
                "events": self.events, "metrics": self.metrics, "params": self.params}


def _plan(site: tuple[str, str, str], engines: dict[str, _Usage],
          stages_of: dict[str, list[tuple[tuple[str, ...] | None, _Usage]]]
          ) -> tuple[bool, _Usage | None, tuple[_Usage, ...], str | None]:
    """What one op-log site counts towards in :func:`summarize`: whether it is an IPCQ copy, its engine's usage
    (None when it counts towards none: another block, or a PE_CPU op other than ``kernel``), the stages it feeds
    and, for a kernel, its PE."""
    component, _, op = site
    copy = op == "ipcq_copy"
    unit = nm.unit_of(component)
    usage = engines.get(unit)
    if usage is None or (unit == "pe_cpu" and op != "kernel"):
        return copy, None, (), None
    counted = tuple(stage for names, stage in stages_of[unit] if names is None or op in names)
    return copy, usage, counted, nm.pe_of(component) if unit == "pe_cpu" else None


def summarize(name: str, device: int, records: Sequence) -> BenchResult:
    """Turn an op log into the bench summary (latency = last op end − first op start), in one pass that keeps
    no record (an op log of millions of records is summarised in constant memory)."""
    engines = {e: _Usage() for e in ENGINES}
    stages = {stage: _Usage() for stage in STAGE_OPS}
    stages_of: dict[str, list[tuple[tuple[str, ...] | None, _Usage]]] = {e: [] for e in ENGINES}
    for stage, (engine, names) in STAGE_OPS.items():
        stages_of[engine].append((names, stages[stage]))
    everything = _Usage()
    ipcq_copies = 0
    starts: dict[str, float] = {}
    # site (component id, op kind, op name) -> what a record there counts towards (_plan): a log names few sites,
    # many times each
    plans: dict[tuple[str, str, str], tuple[bool, _Usage | None, tuple[_Usage, ...], str | None]] = {}
    timings = getattr(records, "timings", None)
    rows = timings() if timings is not None else ((r.t_start, r.t_end, (r.component_id, r.op_kind, r.op_name))
                                                  for r in records)
    for t0, t1, site in rows:
        everything.add(t0, t1)
        plan = plans.get(site)
        if plan is None:
            plan = plans[site] = _plan(site, engines, stages_of)
        copy, usage, counted, pe = plan
        if copy:
            ipcq_copies += 1
        if usage is None:
            continue
        usage.add(t0, t1)
        if pe is not None:
            starts[pe] = t0
        for stage in counted:
            stage.add(t0, t1)
    stage_json = {k: u.to_json() for k, u in stages.items()}
    op_counts = {"gemm": engines["pe_gemm"].count, "math": engines["pe_math"].count,
                 "dma_read": stage_json["DMA_READ"]["count"], "dma_write": stage_json["DMA_WRITE"]["count"],
                 "ipcq_copy": ipcq_copies}
    latency = everything.hi - everything.lo if everything.count else 0.0
    return BenchResult(name, True, None, device, latency, op_counts, {e: u.to_json() for e, u in engines.items()},
                       stage_json, dict(sorted(starts.items())), records=records)


def run_bench(info: BenchInfo, graph: TopologyGraph, device: int = 0, *, data: bool = False,
              params: Mapping[str, str] | None = None, observe: Callable | None = None,
              limits: Limits | None = None, fidelity: str = "packet") -> BenchResult:
    """Run one bench on one device in a fresh runtime and summarise it (``events`` = SimPy events processed).

    ``params`` (``NAME -> text``, as ``-p`` gives them) are checked before
    anything runs; ``observe(engine)`` is called with the run's engine before
    the bench starts (progress displays read its clock and event count).
    ``limits`` bound the run (default :class:`~kernbench.sim.limits.Limits`);
    the run's engine enforces them, the wall clock from ``limits.started`` (or
    from now); a run past one fails with error code ``SimulationLimitError``. ``fidelity`` is the engine's
    network model: ``"packet"`` or ``"flow"`` (:mod:`kernbench.sim.flow`).
    """
    values = resolve(info.name, info.params, params)
    with RunCollector():
        return _run(info, graph, device, values, data, observe, limits, fidelity)


def _run(info: BenchInfo, graph: TopologyGraph, device: int, values: Mapping[str, object], data: bool,
         observe: Callable | None, limits: Limits | None, fidelity: str) -> BenchResult:
    torch = RuntimeContext(graph, device=device, data=data, limits=limits, fidelity=fidelity)
    if observe is not None:
        observe(torch.engine)
    error: KernbenchError | None = None
    host = torch
    if info.host == "earlier":
        from kernbench.runtime.compat import earlier

        host = earlier(torch)
    try:
        if info.params:
            info.fn(host, values)
        else:
            info.fn(host)
        torch.wait_all()
    except KernbenchError as exc:
        error = exc
    result = summarize(info.name, device, torch.oplog.records)
    result.params = dict(values)
    result.events = torch.engine.events
    result.engine = torch.engine
    result.metrics = dict(torch.metrics)
    if error is not None:
        result.ok, result.error_code, result.error = False, type(error).__name__, str(error)
        result.exception = error
    elif torch.engine.submitted == 0:
        result.ok, result.error_code = False, "NO_REQUESTS"
        result.error = f"bench {info.name!r} submitted no request to the device"
    return result
