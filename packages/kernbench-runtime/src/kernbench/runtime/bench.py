"""Bench registration, discovery and the runner behind ``kernbench run``.

A bench is a function ``run(torch)`` decorated with
``@bench(name="kebab-case", description="...")`` in a module of a bench
package (by default ``kernbench.benches``). :func:`discover` imports every
module of the package whose name does not start with ``_`` and audits that
each registered at least one bench (sub-packages are libraries benches use,
not benches, and are skipped); benches are listed alphabetically with
1-based indices and resolved by name or index. Parameters come from
environment variables that the module docstring lists.

:func:`run_bench` gives the bench a fresh :class:`RuntimeContext`, runs it,
waits for every launch, and summarises the op log (see :class:`BenchResult`).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from kernbench.runtime.context import RuntimeContext
from kernbench.topology import TopologyGraph
from kernbench.topology import naming as nm
from kernbench.topology.errors import KernbenchError

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MARK = "__kernbench_bench__"


class BenchError(KernbenchError):
    """A bench is missing, misnamed, unregistered, or submitted nothing."""


@dataclass(frozen=True)
class BenchInfo:
    """A registered bench: its name, description, function and module."""

    name: str
    description: str
    fn: Callable = field(repr=False)
    module: str
    params: str = ""


def bench(name: str, description: str) -> Callable[[Callable], Callable]:
    """Mark ``run(torch)`` as a bench called ``name`` (kebab-case) with a one-line description."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise BenchError(f"bench name {name!r} must be kebab-case (lowercase words joined by '-')")
    if not isinstance(description, str) or not description.strip():
        raise BenchError(f"bench {name!r} needs a non-empty description")

    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, (name, description))
        return fn

    return mark


class BenchRegistry:
    """The benches of one package, sorted by name (index = position + 1)."""

    def __init__(self, benches: list[BenchInfo]) -> None:
        names = [b.name for b in benches]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise BenchError(f"bench name(s) registered twice: {', '.join(dupes)}")
        self.benches = sorted(benches, key=lambda b: b.name)

    def resolve(self, key: str | int) -> BenchInfo:
        """A bench by name or by 1-based index (as listed by ``kernbench list``)."""
        text = str(key)
        if text.isdigit():
            i = int(text)
            if 1 <= i <= len(self.benches):
                return self.benches[i - 1]
        for b in self.benches:
            if b.name == text:
                return b
        valid = ", ".join(f"{i}:{b.name}" for i, b in enumerate(self.benches, 1))
        raise BenchError(f"unknown bench {key!r}; valid benches: {valid}")


def discover(package: str = "kernbench.benches") -> BenchRegistry:
    """Import every non-``_`` module of ``package`` and collect its benches (each module must have one; sub-packages
    are libraries and are skipped)."""
    try:
        pkg = importlib.import_module(package)
    except ImportError as exc:
        raise BenchError(f"bench package {package!r} cannot be imported: {exc}") from None
    found: list[BenchInfo] = []
    for mod_info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if mod_info.name.startswith("_") or mod_info.ispkg:  # sub-packages are libraries (attention, studies)
            continue
        module = importlib.import_module(f"{package}.{mod_info.name}")
        marked = [(getattr(obj, _MARK), obj) for obj in vars(module).values()
                  if callable(obj) and hasattr(obj, _MARK) and obj.__module__ == module.__name__]
        if not marked:
            raise BenchError(f"bench module {module.__name__} registers no bench; decorate its run(torch) with "
                             f"@bench or rename the module with a leading '_' if it is a helper")
        found += [BenchInfo(n, d, fn, module.__name__, (module.__doc__ or "").strip()) for (n, d), fn in marked]
    return BenchRegistry(found)


STAGE_OPS = {
    "DMA_READ": ("pe_dma", ("dma_read",)),
    "FETCH": ("pe_fetch_store", ("fetch",)),
    "GEMM": ("pe_gemm", None),
    "MATH": ("pe_math", None),
    "STORE": ("pe_fetch_store", ("store",)),
    "DMA_WRITE": ("pe_dma", ("dma_write",)),
}
ENGINES = ("pe_dma", "pe_fetch_store", "pe_gemm", "pe_math", "pe_cpu")


def _usage(records) -> dict:
    if not records:
        return {"occupancy_ns": 0.0, "wall_ns": 0.0, "count": 0}
    return {"occupancy_ns": sum(r.t_end - r.t_start for r in records),
            "wall_ns": max(r.t_end for r in records) - min(r.t_start for r in records), "count": len(records)}


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
    records: list = field(default_factory=list, repr=False)
    engine: object = field(default=None, repr=False, compare=False)  # the run's GraphEngine, for inspection

    def to_json(self) -> dict:
        """The documented JSON object."""
        return {"bench": self.bench, "ok": self.ok, "error_code": self.error_code, "device": self.device,
                "latency_ns": self.latency_ns, "op_counts": self.op_counts, "engines": self.engines,
                "stages": self.stages, "pe_exec_start_ns": self.pe_exec_start_ns, "error": self.error,
                "events": self.events, "metrics": self.metrics}


def summarize(name: str, device: int, records: list) -> BenchResult:
    """Turn an op log into the bench summary (latency = last op end − first op start)."""
    by_engine = {e: [r for r in records if nm.unit_of(r.component_id) == e and (e != "pe_cpu" or r.op_name == "kernel")]
                 for e in ENGINES}
    stages = {}
    for stage, (engine, names) in STAGE_OPS.items():
        stages[stage] = _usage([r for r in by_engine[engine] if names is None or r.op_name in names])
    op_counts = {"gemm": len(by_engine["pe_gemm"]), "math": len(by_engine["pe_math"]),
                 "dma_read": stages["DMA_READ"]["count"], "dma_write": stages["DMA_WRITE"]["count"],
                 "ipcq_copy": sum(1 for r in records if r.op_name == "ipcq_copy")}
    starts = {nm.pe_of(r.component_id): r.t_start for r in by_engine["pe_cpu"]}
    latency = max(r.t_end for r in records) - min(r.t_start for r in records) if records else 0.0
    return BenchResult(name, True, None, device, latency, op_counts,
                       {e: _usage(v) for e, v in by_engine.items()}, stages, dict(sorted(starts.items())),
                       records=records)


def run_bench(info: BenchInfo, graph: TopologyGraph, device: int = 0, *, data: bool = False) -> BenchResult:
    """Run one bench on one device in a fresh runtime and summarise it (``events`` = SimPy events processed)."""
    torch = RuntimeContext(graph, device=device, data=data)
    error: KernbenchError | None = None
    try:
        info.fn(torch)
        torch.wait_all()
    except KernbenchError as exc:
        error = exc
    result = summarize(info.name, device, list(torch.oplog.records))
    result.events = torch.engine.events
    result.engine = torch.engine
    result.metrics = dict(torch.metrics)
    if error is not None:
        result.ok, result.error_code, result.error = False, type(error).__name__, str(error)
    elif torch.engine.submitted == 0:
        result.ok, result.error_code = False, "NO_REQUESTS"
        result.error = f"bench {info.name!r} submitted no request to the device"
    return result
