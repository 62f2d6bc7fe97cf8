"""Per-link results of a run: the link counters, the links file (``kernbench run --links FILE``), its reader and
the top table.

A directed edge of the graph is described by a :class:`LinkRecord`, the one
type for a link's counters (``GraphEngine.link_stats()``,
``RuntimeContext.link_stats()``, the links file and the web viewer all give
it), with the counters its :class:`~kernbench.sim.fabric.Wire` kept: bytes and packets of
payload that crossed it, messages (transfers, control messages included)
that entered it, ``busy_ns`` (first flit start to last flit end, summed over
packets), the worst queueing delay a packet saw before it could start
(``max_wait_ns``), and ``utilisation = busy_ns / window_ns``.

**Which links carried traffic** is decided here, once, by
:func:`carried_traffic`: a link carried traffic when bytes crossed it
(``bytes > 0``). In the fabric model that is the same as ``packets > 0`` and
as ``busy_ns > 0``; a link that saw only control messages counts them in
``messages`` but carried no bytes and was never busy, so it did not carry
traffic. The links file, :func:`link_records`, :meth:`LinksReport.busiest`,
the web viewer's count and the heatmap's count all use this one rule.

The run window is the whole simulated run, from time 0 to the engine's
clock when the report is taken (deployment included), so every busy
interval lies inside it and utilisation is in ``[0, 1]``. What crosses a
link is what the fabric model sends (:mod:`kernbench.sim.fabric`): a write
or a read reply carries its payload, cut into packets of at most
``packet_bytes``; a read command carries ``control_bytes``; control messages
(launches, commands, acks, credits) are a sideband and carry 0 bytes, so
they count in ``messages`` only. There are no separate header bytes.

The file is JSON (schema ``kernbench.links/2``)::

    {"schema": "kernbench.links/2",
     "run": {"bench": ..., "device": ..., "topology": ..., "topology_file": ...},
     "window_ns": 34543.5,
     "fabric": {"flit_bytes": 256, "packet_bytes": 4096, "control_bytes": 64},
     "edges": 10334,
     "units": {...},
     "links": [{"src": ..., "dst": ..., "kind": ..., "bw_gbs": ..., "latency_ns": ..., "bytes": ...,
                "packets": ..., "messages": ..., "busy_ns": ..., "utilisation": ..., "max_wait_ns": ...}, ...]}

``links`` holds the links that carried traffic, in graph edge order, one per
line; every other edge of the topology was idle or saw control messages
only. ``edges`` is the topology's number of directed edges, so a reader can
say "N of M links" and check the file against a topology. The reader also
accepts ``kernbench.links/1`` files, which list every edge (idle ones with
zeros) and have no ``edges`` field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path
from typing import Protocol

from kernbench.topology.errors import KernbenchError

SCHEMA = "kernbench.links/2"
#: Schemas the reader accepts: ``/1`` listed every edge of the topology, ``/2`` only the links with traffic.
READABLE_SCHEMAS = ("kernbench.links/1", SCHEMA)
UNITS = {"bw_gbs": "GB/s", "latency_ns": "ns", "bytes": "B", "packets": "1", "messages": "1", "busy_ns": "ns",
         "utilisation": "busy_ns / window_ns", "max_wait_ns": "ns", "window_ns": "ns"}
REGENERATE = "regenerate it with `kernbench run --bench NAME --links FILE`"


class LinksFileError(KernbenchError):
    """A links file is unreadable, not JSON, or does not follow the ``kernbench.links`` schema."""


class _Counted(Protocol):
    bytes: int


def carried_traffic(link: _Counted) -> bool:
    """Whether a link carried traffic: bytes crossed it. The one rule every count of "links that carried traffic"
    uses (links file, ``link_stats()``, the busiest-links table, the web viewer, the heatmap).

    ``link`` is anything with a ``bytes`` counter: a :class:`LinkRecord` or a
    :class:`~kernbench.sim.fabric.Wire`. A link that saw only control messages (a sideband of 0 bytes that
    occupies no bandwidth) did not carry traffic."""
    return link.bytes > 0


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """One directed edge after a run: its parameters and traffic (bytes, ns, GB/s)."""

    src: str
    dst: str
    kind: str
    bw_gbs: float
    latency_ns: float
    bytes: int
    packets: int
    messages: int
    busy_ns: float
    utilisation: float
    max_wait_ns: float

    @property
    def label(self) -> str:
        """``src → dst``."""
        return f"{self.src} → {self.dst}"


@dataclass(frozen=True)
class LinksReport:
    """The links of one run, the run window (ns) and what the run was.

    ``run`` holds free-form provenance (bench, device, topology name and
    file); ``fabric`` the packet geometry the counts follow; ``edges`` the
    number of directed edges of the topology (left out, it is the number of
    ``links``: a report that lists every edge). ``links`` holds the links
    that carried traffic when the report comes from :func:`link_report` or a
    ``/2`` file, and every edge when it comes from a ``/1`` file; use
    :meth:`traffic` for the links that carried traffic either way.
    """

    run: Mapping[str, object]
    window_ns: float
    fabric: Mapping[str, int]
    links: tuple[LinkRecord, ...] = field(repr=False)
    edges: int | None = None

    def __post_init__(self) -> None:
        if self.edges is None:
            object.__setattr__(self, "edges", len(self.links))

    @property
    def title(self) -> str:
        """A one-line name of the run, e.g. ``ccl-allreduce on ahbm-6sip-torus-2d (device 0)``."""
        bench = self.run.get("bench") or "run"
        topo = self.run.get("topology")
        device = self.run.get("device")
        text = str(bench) + (f" on {topo}" if topo else "")
        return text + (f" (device {device})" if device is not None else "")

    def traffic(self) -> tuple[LinkRecord, ...]:
        """The links that carried traffic (:func:`carried_traffic`), in edge order."""
        return tuple(r for r in self.links if carried_traffic(r))

    def busiest(self, n: int | None = None) -> list[LinkRecord]:
        """Links that carried traffic, busiest first: utilisation, then bytes, then messages (ties keep edge
        order); at most ``n``."""
        used = list(self.traffic())
        order = {(r.src, r.dst): i for i, r in enumerate(used)}
        used.sort(key=lambda r: (-r.utilisation, -r.bytes, -r.messages, order[(r.src, r.dst)]))
        return used if n is None else used[:n]

    def by_edge(self) -> dict[tuple[str, str], LinkRecord]:
        """Records keyed by ``(src, dst)``."""
        return {(r.src, r.dst): r for r in self.links}

    def to_json(self) -> dict:
        """The documented JSON object (schema ``kernbench.links/2``) with the links that carried traffic."""
        return {"schema": SCHEMA, "run": dict(self.run), "window_ns": self.window_ns, "fabric": dict(self.fabric),
                "edges": self.edges, "units": UNITS, "links": [asdict(r) for r in self.traffic()]}


def link_records(engine, include_idle: bool = False) -> list[LinkRecord]:
    """The engine's per-wire counters as :class:`LinkRecord`, utilisation over ``[0, engine.now]``.

    Only links that carried traffic (:func:`carried_traffic`) by default;
    every graph edge with ``include_idle`` (an edge no packet or message ever
    entered has zeros); graph edge order either way.
    """
    window = float(engine.now)
    graph = engine.graph
    wires = engine.wires
    if include_idle:
        rows = [(e, wires.get((e.src, e.dst))) for e in graph.edges]
    else:
        order = graph.edge_index
        used = sorted((w for w in wires.values() if carried_traffic(w)), key=lambda w: order(w.edge.src, w.edge.dst))
        rows = [(w.edge, w) for w in used]
    out = []
    for e, w in rows:
        if w is None:
            out.append(LinkRecord(e.src, e.dst, e.kind, e.bw_gbs, e.latency_ns, 0, 0, 0, 0.0, 0.0, 0.0))
        else:
            out.append(LinkRecord(e.src, e.dst, e.kind, e.bw_gbs, e.latency_ns, w.bytes, w.packets, w.messages,
                                  w.busy_ns, w.busy_ns / window if window > 0 else 0.0, w.max_wait_ns))
    return out


def link_report(engine, run: Mapping[str, object] | None = None) -> LinksReport:
    """A :class:`LinksReport` of the links of the engine's graph that carried traffic, as the run stands now."""
    spec = engine.spec
    info = {"topology": spec.name, "topology_file": str(spec.source) if spec.source else None, **(run or {})}
    fabric = {"flit_bytes": engine.flit_bytes, "packet_bytes": engine.packet_bytes,
              "control_bytes": engine.control_bytes}
    return LinksReport(info, float(engine.now), fabric, tuple(link_records(engine)), len(engine.graph.edges))


def write_links(report: LinksReport, path: str | PathLike[str]) -> Path:
    """Write ``report`` as JSON to ``path`` (parents created): the links that carried traffic, one per line;
    returns the path."""
    out = Path(path)
    data = report.to_json()
    links = data.pop("links")
    head = json.dumps(data, allow_nan=False)[:-1]
    body = "".join(f"\n{json.dumps(r, allow_nan=False)}," for r in links)[:-1]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f'{head}, "links": [{body}\n]}}\n', encoding="utf-8")
    except OSError as exc:
        raise LinksFileError(f"cannot write the links file {out}: {exc.strerror or exc}; choose a writable path "
                             f"for --links") from None
    return out


# --------------------------------------------------------------------------- reading

_INT_FIELDS = ("bytes", "packets", "messages")
_FLOAT_FIELDS = ("bw_gbs", "latency_ns", "busy_ns", "utilisation", "max_wait_ns")


#: The longest integer a results file may hold (a count of bytes fits in 20 digits); Python refuses past 4,300.
MAX_JSON_DIGITS = 40
#: The deepest nesting of lists and objects a results file may hold (a links or run file has 4 levels).
MAX_JSON_DEPTH = 64


class _JsonTooBig(ValueError):
    """An integer with more digits than :data:`MAX_JSON_DIGITS` (raised from ``json``'s ``parse_int`` hook)."""


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_DIGITS:
        raise _JsonTooBig(f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_JSON_DIGITS} are read)")
    return int(text)


def _depth(value: object) -> int:
    """How deeply ``value`` nests lists and objects (iterative: a deep value must not overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > MAX_JSON_DEPTH:
                return deepest
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def load_json(text: str, where: str, error: type[KernbenchError], hint: str) -> object:
    """Decode a results file's JSON ``text`` (a links or run file) with bounded work: at most
    :data:`MAX_JSON_DEPTH` levels of nesting and :data:`MAX_JSON_DIGITS`-digit integers. Anything else, or text
    that is not JSON, raises ``error`` naming ``where`` and ending in ``hint`` (how to get a good file)."""
    try:
        data = json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise error(f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {hint}") from None
    except _JsonTooBig as exc:
        raise error(f"{where} holds {exc}; {hint}") from None
    except RecursionError:  # nested past the interpreter's stack before the depth check could run
        raise error(f"{where} nests lists or objects more than {MAX_JSON_DEPTH} levels deep; {hint}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise error(f"{where} nests lists or objects more than {MAX_JSON_DEPTH} levels deep; {hint}")
    return data


def _number(value: object, integer: bool) -> bool:
    if isinstance(value, bool):
        return False
    if integer:
        return isinstance(value, int) and value >= 0
    return isinstance(value, int | float) and math.isfinite(value) and value >= 0


def parse_links(data: object, where: str = "links data") -> LinksReport:
    """Validate a decoded links JSON object and build its :class:`LinksReport` (:class:`LinksFileError` naming
    the first bad field)."""
    def bad(what: str) -> LinksFileError:
        return LinksFileError(f"{where}: {what}; {REGENERATE}")

    if not isinstance(data, dict):
        raise bad(f"expected a JSON object with \"schema\": \"{SCHEMA}\", got {type(data).__name__}")
    if data.get("schema") not in READABLE_SCHEMAS:
        raise bad(f"schema is {data.get('schema')!r}, expected {SCHEMA!r} (is this a links file?)")
    window = data.get("window_ns")
    if not _number(window, False):
        raise bad(f"window_ns is {window!r}; expected a non-negative number of ns")
    run = data.get("run", {})
    if not isinstance(run, dict):
        raise bad(f"run is {type(run).__name__}; expected an object")
    fabric = data.get("fabric", {})
    if not isinstance(fabric, dict) or not all(_number(v, True) for v in fabric.values()):
        raise bad("fabric must be an object of non-negative integers (flit_bytes, packet_bytes, control_bytes)")
    links = data.get("links")
    if not isinstance(links, list):
        raise bad(f"links is {type(links).__name__}; expected a list of link records")
    records = []
    for i, rec in enumerate(links):
        if not isinstance(rec, dict):
            raise bad(f"links[{i}] is {type(rec).__name__}; expected an object")
        for name in ("src", "dst", "kind"):
            if not isinstance(rec.get(name), str) or not rec[name]:
                raise bad(f"links[{i}].{name} is {rec.get(name)!r}; expected a non-empty string")
        for name in _INT_FIELDS + _FLOAT_FIELDS:
            if not _number(rec.get(name), name in _INT_FIELDS):
                kind = "a non-negative integer" if name in _INT_FIELDS else "a non-negative number"
                raise bad(f"links[{i}].{name} is {rec.get(name)!r} ({rec['src']} → {rec['dst']}); expected {kind}")
        if rec["utilisation"] > 1 + 1e-9:  # busy_ns / window_ns: a link cannot be busy longer than the run
            raise bad(f"links[{i}].utilisation is {rec['utilisation']!r} ({rec['src']} → {rec['dst']}); expected a "
                      f"fraction from 0 to 1 (busy_ns / window_ns: a link is busy at most the whole run)")
        records.append(LinkRecord(rec["src"], rec["dst"], rec["kind"], float(rec["bw_gbs"]),
                                  float(rec["latency_ns"]), rec["bytes"], rec["packets"], rec["messages"],
                                  float(rec["busy_ns"]), float(rec["utilisation"]), float(rec["max_wait_ns"])))
    seen = set()
    for r in records:
        if (r.src, r.dst) in seen:
            raise bad(f"the link {r.label} is listed twice")
        seen.add((r.src, r.dst))
    if data["schema"] == SCHEMA:
        edges = data.get("edges")
        if not _number(edges, True) or edges < len(records):
            raise bad(f"edges is {edges!r}; expected the topology's number of directed edges, at least the "
                      f"{len(records)} links listed")
    else:  # a /1 file lists every edge of its topology
        edges = len(records)
    return LinksReport(run, float(window), fabric, tuple(records), edges)


def read_links(path: str | PathLike[str]) -> LinksReport:
    """Read and validate a links file; :class:`LinksFileError` says what is wrong, where, and how to fix it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LinksFileError(f"links file {p} does not exist; {REGENERATE}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LinksFileError(f"cannot read links file {p}: {exc}; {REGENERATE}") from None
    data = load_json(text, f"links file {p}", LinksFileError, REGENERATE)
    return parse_links(data, f"links file {p}")


def check_topology(report: LinksReport, graph, where: str) -> None:
    """:class:`LinksFileError` unless ``report`` was recorded on ``graph``: every link it lists is an edge of
    ``graph`` and the topology it was recorded on had as many edges."""
    missing = [r for r in report.links if not graph.has_edge(r.src, r.dst)]
    if missing or report.edges != len(graph.edges):
        what = (f"{len(missing)} of its links are not in topology {graph.spec.name!r} (e.g. {missing[0].label})"
                if missing else f"it was recorded on a topology of {report.edges} links but topology "
                                f"{graph.spec.name!r} has {len(graph.edges)}")
        raise LinksFileError(f"{where} was recorded on another topology ({report.run.get('topology', '?')}): "
                             f"{what}; pass the topology the run used with --topology")


# --------------------------------------------------------------------------- human table


def format_top(records: Sequence[LinkRecord], title: str, window_ns: float) -> str:
    """A human table of links (as given, e.g. :meth:`LinksReport.busiest`); not a parsing contract."""
    lines = [f"busiest links of {title} (run window {window_ns:.1f} ns)"]
    if not records:
        return lines[0] + "\n  no link carried traffic"
    width = max(len(r.label) for r in records)
    lines.append(f"  {'#':>3s}  {'link':{width}s}  {'kind':20s} {'util':>7s} {'bytes':>12s} {'packets':>8s} "
                 f"{'msgs':>6s} {'busy ns':>11s} {'max wait ns':>12s}")
    for i, r in enumerate(records, 1):
        lines.append(f"  {i:3d}  {r.label:{width}s}  {r.kind:20s} {100 * r.utilisation:6.2f}% {r.bytes:12d} "
                     f"{r.packets:8d} {r.messages:6d} {r.busy_ns:11.1f} {r.max_wait_ns:12.1f}")
    return "\n".join(lines)


__all__ = ["READABLE_SCHEMAS", "SCHEMA", "LinkRecord", "LinksFileError", "LinksReport", "carried_traffic",
           "check_topology", "format_top", "link_records", "link_report", "load_json", "parse_links", "read_links",
           "write_links"]
