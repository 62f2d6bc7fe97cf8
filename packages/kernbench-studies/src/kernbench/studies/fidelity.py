"""The fidelity panel: flow fidelity beside packet fidelity, point by point, read from a study's results.

Every built-in study registers a :class:`~kernbench.studies.base.FidelityPanel`: a few of its points are in its
grid twice, once as the study runs them (packet fidelity) and once more with the param ``fidelity: flow`` (labels
``{panel: "fidelity", "fidelity_of": <the point's panel>}``). The flow copy is a simulation of its own (its cache
key holds the fidelity); the packet side is the study's own point, so a warm cache runs only the flow copies.

:func:`rows` pairs each flow copy with its packet point in one results document and reads, for each pair, the
latency field the study names (``FidelityPanel.latency``) in both fidelities, and the wall time the runner
recorded for each simulation (``provenance.run.point_wall_s``; a cached point keeps the wall time of the run that
computed it). From those:

* ``error = (flow_ns - packet_ns) / packet_ns`` (signed; the figure and the bounds use its magnitude);
* ``speedup = packet_wall_s / flow_wall_s`` (above 1: flow fidelity ran faster).

Issue 24 bounds the error at :data:`ERROR_MEDIAN_BOUND` (median over all points) and :data:`ERROR_MAX_BOUND`
(largest), and sets a speed-up target of :data:`SPEEDUP_TARGET`. Nothing here runs a simulation.

A document of a ``--fidelity flow`` run has no fidelity panel (its points are all flow); :func:`rows` gives none.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from kernbench.studies.base import FIDELITY, FIDELITY_OF, SchemaError, simulation_params
from kernbench.studies.registry import get_study, is_registered
from kernbench.studies.results import fidelity_of

#: Issue 24's bounds on flow fidelity's latency error against packet fidelity, over every fidelity-panel point:
#: the median of |error| and its largest value.
ERROR_MEDIAN_BOUND = 0.05
ERROR_MAX_BOUND = 0.15
#: Issue 24's speed-up target: packet wall time over flow wall time.
SPEEDUP_TARGET = 20.0


@dataclass(frozen=True)
class FidelityRow:
    """One point of a fidelity panel: the study, the panel of the point (``panel``), its short name, the latency
    field compared, the latency (ns), wall time (s) and engine events of each fidelity, and the indices of the
    two points in the results document."""

    study: str
    panel: str
    point: str
    field: str
    packet_ns: float
    flow_ns: float
    packet_wall_s: float
    flow_wall_s: float
    packet_events: int
    flow_events: int
    packet_index: int
    flow_index: int

    @property
    def error(self) -> float:
        """Flow fidelity's relative latency error against packet fidelity (signed)."""
        return (self.flow_ns - self.packet_ns) / self.packet_ns

    @property
    def speedup(self) -> float:
        """Packet wall time over flow wall time (above 1: flow fidelity ran faster)."""
        return self.packet_wall_s / self.flow_wall_s if self.flow_wall_s > 0 else float("inf")

    @property
    def events_ratio(self) -> float:
        """Packet fidelity's engine events over flow fidelity's."""
        return self.packet_events / self.flow_events if self.flow_events else float("inf")


def _walls(doc: dict) -> list[float] | None:
    run = doc.get("provenance", {}).get("run")
    walls = run.get("point_wall_s") if isinstance(run, dict) else None
    if not isinstance(walls, list) or len(walls) != len(doc["points"]):
        return None
    return walls


def rows(doc: dict) -> list[FidelityRow]:
    """The fidelity panel of a (validated) results document: one row per flow copy whose packet point is in the
    document, in grid order. No row for a document of a flow run, of a study without a panel, or without per-point
    wall times; :class:`SchemaError` when a point lacks the latency field compared."""
    study = get_study(doc["study"]) if is_registered(doc["study"]) else None
    panel = study.fidelity if study is not None else None
    walls = _walls(doc)
    if panel is None or walls is None or fidelity_of(doc) != "packet":
        return []
    points = doc["points"]
    base: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        if FIDELITY not in p["params"]:
            base.setdefault(_key(p["params"]), []).append(i)
    out = []
    for i, p in enumerate(points):
        if p["params"].get(FIDELITY) != "flow":
            continue
        params = simulation_params(p["params"])
        found = base.get(_key(params), [])
        if not found:
            continue  # e.g. a --where run that selected the copy alone
        of = p["labels"].get(FIDELITY_OF)
        j = next((k for k in found if points[k]["labels"].get(panel.label) == of), found[0])
        field = panel.latency(params)
        try:
            packet_ns, flow_ns = float(points[j]["values"][field]), float(p["values"][field])
        except KeyError:
            raise SchemaError(f"study {doc['study']}: fidelity-panel point {i} or its packet point {j} lacks "
                              f"{field!r}; regenerate the results with `kernbench study {doc['study']}`") from None
        out.append(FidelityRow(doc["study"], str(of), panel.describe(params), field, packet_ns, flow_ns,
                               float(walls[j]), float(walls[i]), int(points[j]["values"].get("events", 0)),
                               int(p["values"].get("events", 0)), j, i))
    return out


def _key(params: dict) -> str:
    return repr(sorted(params.items(), key=lambda kv: kv[0]))


@dataclass(frozen=True)
class Summary:
    """What the fidelity panels say together: the points, the median and largest |error| (and the row of the
    largest), and the median, smallest and largest speed-up."""

    rows: tuple[FidelityRow, ...]
    median_error: float
    max_error: float
    worst: FidelityRow
    median_speedup: float
    min_speedup: float
    max_speedup: float

    @property
    def error_median_met(self) -> bool:
        """Whether the median |error| is within :data:`ERROR_MEDIAN_BOUND`."""
        return self.median_error <= ERROR_MEDIAN_BOUND

    @property
    def error_max_met(self) -> bool:
        """Whether the largest |error| is within :data:`ERROR_MAX_BOUND`."""
        return self.max_error <= ERROR_MAX_BOUND

    @property
    def reaching(self) -> tuple[FidelityRow, ...]:
        """The rows whose speed-up reaches :data:`SPEEDUP_TARGET`."""
        return tuple(r for r in self.rows if r.speedup >= SPEEDUP_TARGET)

    @property
    def slower(self) -> tuple[FidelityRow, ...]:
        """The rows on which flow fidelity ran slower than packet fidelity."""
        return tuple(r for r in self.rows if r.speedup < 1.0)


def summary(rows_: Iterable[FidelityRow]) -> Summary | None:
    """The :class:`Summary` of ``rows_`` (None when there is none)."""
    rs = tuple(rows_)
    if not rs:
        return None
    errors = [abs(r.error) for r in rs]
    speedups = [r.speedup for r in rs]
    worst = max(rs, key=lambda r: abs(r.error))
    return Summary(rs, statistics.median(errors), max(errors), worst, statistics.median(speedups), min(speedups),
                   max(speedups))


@dataclass(frozen=True)
class PointClass:
    """The fidelity-panel points of one panel of one study (a class of points: ``gqa`` ``long_context``), with the
    median and largest |error| and the median, smallest and largest speed-up."""

    study: str
    panel: str
    rows: tuple[FidelityRow, ...]

    @property
    def median_error(self) -> float:
        """Median |error| of the class."""
        return statistics.median(abs(r.error) for r in self.rows)

    @property
    def max_error(self) -> float:
        """Largest |error| of the class."""
        return max(abs(r.error) for r in self.rows)

    @property
    def median_speedup(self) -> float:
        """Median speed-up of the class."""
        return statistics.median(r.speedup for r in self.rows)

    @property
    def min_speedup(self) -> float:
        """Smallest speed-up of the class."""
        return min(r.speedup for r in self.rows)

    @property
    def max_speedup(self) -> float:
        """Largest speed-up of the class."""
        return max(r.speedup for r in self.rows)

    @property
    def reaches_target(self) -> bool:
        """Whether every point of the class reaches :data:`SPEEDUP_TARGET`."""
        return self.min_speedup >= SPEEDUP_TARGET


def classes(rows_: Iterable[FidelityRow]) -> list[PointClass]:
    """The rows grouped by (study, panel), in the order first seen."""
    groups: dict[tuple[str, str], list[FidelityRow]] = {}
    for r in rows_:
        groups.setdefault((r.study, r.panel), []).append(r)
    return [PointClass(s, p, tuple(rs)) for (s, p), rs in groups.items()]


def all_rows(docs: dict[str, dict]) -> list[FidelityRow]:
    """The fidelity-panel rows of every document of ``docs`` (study name -> results), in the order given."""
    return [r for doc in docs.values() for r in rows(doc)]
