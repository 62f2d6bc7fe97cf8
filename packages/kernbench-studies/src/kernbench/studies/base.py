"""What a study is: a named grid of points, a point function and the units of every field it reports.

A *point* is one configuration: a flat mapping of JSON scalars (``params``)
that fully determines one simulation, plus ``labels`` that only say which
panel of the study it belongs to (two panels may share a simulation; the
runner then runs it once). The point function builds a fresh runtime, runs
the configuration in timing mode and returns a flat record of JSON scalars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

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


@dataclass(frozen=True)
class PointContext:
    """What a point function may read besides its params: the folder holding the topology files."""

    topology_dir: Path


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

    @property
    def command(self) -> str:
        """The command line that regenerates this study's results."""
        return f"kernbench study {self.name}"

    def units(self) -> dict[str, str]:
        """Field name -> unit."""
        return {f.name: f.unit for f in self.fields}
