"""What a study is: a named grid of points, a point function and the units of every field it reports.

A *point* is one configuration: a flat mapping of JSON scalars (``params``)
that fully determines one simulation, plus ``labels`` that only say which
panel of the study it belongs to (two panels may share a simulation; the
runner then runs it once). The point function builds a fresh runtime, runs
the configuration in timing mode and returns a flat record of JSON scalars.

**Fidelity.** A point runs in the network fidelity its :class:`PointContext` names (``packet`` or ``flow``,
ADR 0039): ``kernbench study --fidelity`` sets it for the whole run. A point whose params hold
``fidelity`` runs in that fidelity whatever the run's: those are the *fidelity panel* of a study
(:class:`FidelityPanel`), copies of some of its points rerun in flow fidelity so that the results set both
fidelities side by side. The runner takes the ``fidelity`` param out of the params before the point function
sees them; the cache keys the point by the fidelity it runs in (:mod:`kernbench.studies.cache`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kernbench.sim.flow import FIDELITIES  # the engine's: packet (every packet on every link) or flow
from kernbench.topology.errors import KernbenchError

Scalar = str | int | float | bool | None


class StudyError(KernbenchError):
    """A study name, a runner option, an output directory or a results file is invalid."""


class SchemaError(StudyError):
    """A results file is not a ``kernbench.study-results`` document of the supported schema version."""


class SchedulerError(StudyError):
    """The Dask scheduler given with ``--scheduler`` cannot be reached or used."""


@dataclass(frozen=True)
class Field:
    """One column of a study's results: its name, unit (``ns``, ``B``, ``1`` for ratios, ``""`` for labels) and
    meaning. ``csv`` False keeps a long field (a JSON document held as text) out of ``results.csv``; it stays in
    ``results.json``."""

    name: str
    unit: str
    description: str
    csv: bool = True


@dataclass(frozen=True)
class Point:
    """One grid point: ``labels`` (panel membership, not part of the simulation) and ``params`` (the simulation's
    whole input besides the topology files). Both hold JSON scalars only."""

    labels: Mapping[str, Scalar]
    params: Mapping[str, Scalar]

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        for where, values in (("labels", self.labels), ("params", self.params)):
            for k, v in values.items():
                if not isinstance(v, str | int | float | bool) and v is not None:
                    raise StudyError(f"point {where}[{k!r}] = {v!r} is not a JSON scalar")
                if isinstance(v, float) and not math.isfinite(v):
                    raise StudyError(f"point {where}[{k!r}] = {v!r} is not finite")


#: The param that makes a point of the fidelity panel run in another fidelity than the run's; also the name of
#: the panel, and the column of ``results.csv`` that says which fidelity each point ran in.
FIDELITY = "fidelity"
#: The label of a fidelity-panel point that names the panel of the point it reruns.
FIDELITY_OF = "fidelity_of"
#: What the fidelity fields mean, added to every results document (:func:`kernbench.studies.results.document`).
FIDELITY_FIELDS: tuple[Field, ...] = (
    Field(FIDELITY, "", "network fidelity the point ran in: packet (every packet on every link) or flow (every "
                        "transfer one flow sharing its links max-min fairly; ADR 0039)"),
    Field(FIDELITY_OF, "", "fidelity panel: the panel of the point this one reruns in the other fidelity"),
)


def check_fidelity(fidelity: object, flag: str = "--fidelity") -> str:
    """``fidelity`` when it is one of :data:`FIDELITIES`, else :class:`StudyError` naming ``flag`` and the valid
    values (worded as ``kernbench run --fidelity`` words it)."""
    if not isinstance(fidelity, str) or fidelity not in FIDELITIES:
        raise StudyError(f"{flag} {str(fidelity)[:40]!r} is invalid; use packet (every packet on every link) or "
                         f"flow (every transfer one flow sharing its links max-min fairly)")
    return fidelity


def point_fidelity(params: Mapping[str, Scalar], run: str = "packet") -> str:
    """The fidelity a point runs in: its ``fidelity`` param (a fidelity-panel point), else the run's."""
    return check_fidelity(params.get(FIDELITY, run), f"point param {FIDELITY}")


def simulation_params(params: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """``params`` without the ``fidelity`` param: what the point function receives (its fidelity comes in the
    :class:`PointContext`)."""
    return {k: v for k, v in params.items() if k != FIDELITY}


@dataclass(frozen=True)
class PointContext:
    """What a point function may read besides its params: the folder holding the topology files, and the network
    fidelity to simulate in (``packet`` or ``flow``; give it to the point's ``RuntimeContext``)."""

    topology_dir: Path
    fidelity: str = "packet"


PointFn = Callable[[Mapping[str, Scalar], PointContext], dict[str, Scalar]]


@dataclass(frozen=True)
class ReportSection:
    """A study's part of the report.

    ``generate`` is a ``"module:function"`` reference to ``function(doc, nums) -> (claims, files)``: it adds the
    study's numbers to ``nums`` (a :class:`~kernbench.studies.report.numbers.Numbers`) from its results document
    and returns its claims (macro name -> LaTeX) and its generated files (file name under ``generated/`` ->
    text). ``tex`` is the section the report inputs, in registry order: a file of the report sources
    (``sections/03-gemm``) or one that ``generate`` writes (``generated/NAME``, for a study whose prose is not
    part of the packaged sources). ``tables``, when given, is a ``"module:function"`` reference to
    ``function(doc) -> list[TableData]``: the study's tables, which its page on the documentation site shows."""

    generate: str
    tex: str
    tables: str | None = None


@dataclass(frozen=True)
class FidelityPanel:
    """A study's fidelity panel: some of its points rerun in flow fidelity, each beside the packet point it
    copies (:mod:`kernbench.studies.fidelity` pairs them and compares their latencies and wall times).

    ``label`` is the label that names a study's panels (``panel``; the GEMM study's ``series``); ``latency(params)``
    names the value field holding a point's end-to-end latency, ns (the field the panel compares);
    ``describe(params)`` is a short name of the point for tables (``512×512×512 ref_ref``)."""

    latency: Callable[[Mapping[str, Scalar]], str]
    describe: Callable[[Mapping[str, Scalar]], str]
    label: str = "panel"

    def twins(self, points: Iterable[Point], fidelity: str = "flow") -> list[Point]:
        """The fidelity-panel copies of ``points``: labels ``{label: "fidelity", "fidelity_of": <the point's
        panel>}``, params the point's plus ``fidelity``."""
        return [Point({self.label: FIDELITY, FIDELITY_OF: p.labels[self.label]}, {**p.params, FIDELITY: fidelity})
                for p in points]


@dataclass(frozen=True)
class Study:
    """A named study.

    ``grid()`` lists the points in the order results are reported; ``point``
    runs one of them. ``files(params)`` names the files under the topology
    folder that the point reads, the topology file first (they key the
    cache); ``overrides(params)``
    the spec fields it changes in memory (dotted path to value; they key the
    cache too). ``modules`` are the modules whose kernbench import closure
    keys the cache: a change to any source file they import reruns the
    study's points. ``fields`` give units to every label, param and result.
    ``cost(params)`` is a rough relative run time (seconds on one core); the
    runner starts the costliest points first so parallel workers finish
    together.

    ``optional(params)`` is True for the points of the grid that exist only where the user supplies an input
    (the GQA study's earlier-kernel points, with ``KERNBENCH_EARLIER_KERNELS`` set): a results file is valid with
    or without them, so a report can be built on a machine that could not have run them.

    ``fidelity`` is the study's :class:`FidelityPanel` (None: it has none); its points are part of ``grid()``.

    ``figures`` are ``"module:ATTRIBUTE"`` references to tuples of
    :class:`~kernbench.studies.figures.common.FigureSpec`, drawn in this
    order; ``report`` is the study's :class:`ReportSection` (None: the study
    is not in the report). They are references, not objects, so a point
    worker that imports the study never imports matplotlib or the report.
    """

    name: str
    title: str
    description: str
    grid: Callable[[], tuple[Point, ...]]
    point: PointFn
    files: Callable[[Mapping[str, Scalar]], tuple[str, ...]]
    overrides: Callable[[Mapping[str, Scalar]], dict[str, Scalar]]
    modules: tuple[str, ...]
    fields: tuple[Field, ...] = field(default=())
    cost: Callable[[Mapping[str, Scalar]], float] = field(default=lambda params: 1.0)
    optional: Callable[[Mapping[str, Scalar]], bool] = field(default=lambda params: False)
    figures: tuple[str, ...] = ()
    report: ReportSection | None = None
    fidelity: FidelityPanel | None = None

    @property
    def command(self) -> str:
        """The command line that regenerates this study's results."""
        return f"kernbench study {self.name}"

    def points(self, fidelity: str = "packet") -> tuple[Point, ...]:
        """The points a run in ``fidelity`` runs, in grid order: the whole grid in packet fidelity; in flow
        fidelity every point but the fidelity panel's (each would repeat the flow run of the point it copies)."""
        grid = self.grid()
        if check_fidelity(fidelity) == "packet":
            return grid
        return tuple(p for p in grid if FIDELITY not in p.params)

    def command_for(self, fidelity: str = "packet") -> str:
        """The command line that regenerates this study's results in ``fidelity``."""
        return self.command if fidelity == "packet" else f"{self.command} --fidelity {fidelity}"

    def units(self) -> dict[str, str]:
        """Field name -> unit."""
        return {f.name: f.unit for f in self.fields}
