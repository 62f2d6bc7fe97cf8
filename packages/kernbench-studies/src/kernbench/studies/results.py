"""``results.json`` and ``results.csv``: a study's results with schema version, units and provenance.

``results.json`` (schema ``kernbench.study-results``, version
:data:`SCHEMA_VERSION`)::

    {"schema": "kernbench.study-results", "schema_version": 1,
     "study": "gemm", "title": ..., "description": ..., "command": "kernbench study gemm",
     "fidelity": "packet",
     "fields": {"composite_ns": {"unit": "ns", "description": ...}, ...},
     "provenance": {"packages": {"kernbench-studies": "0.1.0", ...},
                    "topology_files": {"topology.yaml": "<sha256>", ...},
                    "source_sha256": "<digest of the kernbench source the points import>",
                    "git_commit": "<sha>" | null,
                    "fidelity": "packet",
                    "run": {"argv": [...], "executor": "process", "jobs": 2, "wall_s": 12.3,
                            "points_run": 168, "points_cached": 0, "point_wall_s": [...]}},
     "points": [{"labels": {...}, "params": {...}, "values": {...}}, ...]}

Points are in grid order. Everything outside ``provenance.run`` depends only
on the study, the topology files and the source, so serial, process-pool
and Dask runs of the same study write the same bytes there; ``run`` records
how this particular run went (its command line, executor and wall times).
``results.csv`` has one row per point: labels, params, then values, except
the fields a study marks ``"csv": false`` in ``fields`` (long JSON documents
held as text, such as the all-reduce study's per-link rows): those live in
``results.json`` only, so the CSV stays one readable line per point.

**Fidelity.** ``fidelity`` (top level, and the same in ``provenance``) is the network fidelity the run
simulated in, ``packet`` or ``flow`` (``kernbench study --fidelity``; a file without it is packet). The points
of a study's fidelity panel carry their own (param ``fidelity``). ``results.csv`` has a ``fidelity`` column
giving every point's, and :func:`rows` adds it to every row. :func:`select` and :func:`one` match only the
points simulated in the run's fidelity unless asked for a ``fidelity``, so that a figure or a table of a panel
never mixes in the fidelity panel's copies of its points (:mod:`kernbench.studies.fidelity` pairs those).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path

from kernbench.studies.base import FIDELITIES, FIDELITY, FIDELITY_FIELDS, Point, SchemaError, Study

SCHEMA = "kernbench.study-results"
SCHEMA_VERSION = 1
RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"


def document(study: Study, points: list[dict], provenance: dict, fidelity: str = "packet") -> dict:
    """The results document of ``study`` run in ``fidelity``: ``points`` in grid order, each ``{"labels",
    "params", "values"}``. The fidelity fields (:data:`~kernbench.studies.base.FIDELITY_FIELDS`) are declared
    beside the study's own."""
    declared = {f.name for f in study.fields}
    fields = {f.name: {"unit": f.unit, "description": f.description, **({} if f.csv else {"csv": False})}
              for f in (*study.fields, *(f for f in FIDELITY_FIELDS if f.name not in declared))}
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "study": study.name, "title": study.title,
            "description": study.description, "command": study.command_for(fidelity), "fidelity": fidelity,
            "fields": fields, "provenance": provenance, "points": points}


def fidelity_of(doc: dict) -> str:
    """The network fidelity a results document was simulated in (``packet`` when it does not say)."""
    return doc.get(FIDELITY, "packet")


def dumps(doc: dict) -> str:
    """The JSON text of a results document: keys in the order built, indented, with each point and the per-point
    wall times on one line."""
    def compact(v: object) -> str:
        return json.dumps(v, allow_nan=False, separators=(", ", ": "))

    head = {k: v for k, v in doc.items() if k != "points"}
    run = head.get("provenance", {}).get("run")
    text = json.dumps(head, indent=1, allow_nan=False)
    if run is not None and "point_wall_s" in run:
        text = text.replace(json.dumps(run["point_wall_s"], indent=1).replace("\n", "\n   "),
                            compact(run["point_wall_s"]), 1)
    points = ",\n".join("  " + compact(p) for p in doc["points"])
    out = text[:-2] + ',\n "points": [\n' + points + "\n ]\n}\n"
    if json.loads(out) != doc:  # the layout trick must never change the content
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    return out


def columns(doc: dict) -> list[str]:
    """CSV columns: every label, param and value name in first-seen order (``fidelity`` after the first point's
    params), less the fields marked ``"csv": false``."""
    seen: dict[str, None] = {}
    for p in doc["points"]:
        for part in ("labels", "params", "values"):
            for k in p[part]:
                seen.setdefault(k, None)
            if part == "params":
                seen.setdefault(FIDELITY, None)
    hidden = {k for k, f in doc.get("fields", {}).items() if f.get("csv", True) is False}
    return [k for k in seen if k not in hidden]


def rows(doc: dict) -> list[dict]:
    """One flat dict per point (labels, then params, then values; a later part wins a repeated name), each with
    the ``fidelity`` the point ran in."""
    run = fidelity_of(doc)
    return [{**p["labels"], **p["params"], **p["values"], FIDELITY: p["params"].get(FIDELITY, run)}
            for p in doc["points"]]


def csv_text(doc: dict) -> str:
    """``results.csv``: a header row and one row per point (empty cells where a point lacks a column)."""
    buf = io.StringIO()
    cols = columns(doc)
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows(doc):
        w.writerow({k: ("" if r.get(k) is None else repr(r[k]) if isinstance(r.get(k), float) else r.get(k))
                    for k in cols})
    return buf.getvalue()


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True when written."""
    path = Path(path)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


def write(out_dir: Path, doc: dict) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.csv`` into ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    j, c = out_dir / RESULTS_JSON, out_dir / RESULTS_CSV
    write_if_changed(j, dumps(doc))
    write_if_changed(c, csv_text(doc))
    return j, c


def _require(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise SchemaError(f"{path}: {what}; regenerate it with `kernbench study NAME`")


#: Units of amounts that are never negative (times, sizes, bandwidths, counts of a named thing).
NON_NEGATIVE_UNITS = frozenset({"ns", "ns/B", "B", "GB/s", "elements", "MAC", "keys", "cycles"})
#: Units of amounts that are whole numbers.
WHOLE_UNITS = frozenset({"B", "elements", "MAC", "keys"})


def value_problem(value: object, unit: str, *, nullable: bool = False) -> str | None:
    """Why ``value`` cannot be a value of a field of ``unit`` (``""``: a label or text field, else a number of that
    unit), or None when it can. ``nullable`` admits ``null`` (a param may say "the file's value")."""
    if value is None:
        return None if nullable or unit == "" else "null, expected a number"
    if unit == "":
        return None if isinstance(value, str | bool) else f"{value!r}, expected text or true/false"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r}, expected a number of {unit}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value}"
    if unit in NON_NEGATIVE_UNITS and value < 0:
        return f"{value!r}, expected a number of {unit} at least 0"
    if unit in WHOLE_UNITS and value != int(value):
        return f"{value!r}, expected a whole number of {unit}"
    return None


def check_record(record: object, units: dict[str, str], what: str, *, nullable: bool = False) -> str | None:
    """Why ``record`` (a mapping of field name to value, e.g. a point's values) breaks the fields ``units``
    (name -> unit), or None when every entry has a declared field and a valid value."""
    if not isinstance(record, dict):
        return f"{what} is not a JSON object"
    for k, v in record.items():
        if k not in units:
            return f"{what} {k!r} has no unit in 'fields'"
        problem = value_problem(v, units[k], nullable=nullable)
        if problem is not None:
            return f"{what} {k!r} is {problem}"
    return None


def _point_id(p: dict) -> str:
    return json.dumps({"labels": p["labels"], "params": p["params"]}, sort_keys=True)


def _registered(name: str) -> Study | None:
    """The registered study ``name``, or None (a results file of a study this kernbench does not register)."""
    from kernbench.studies.registry import get_study, is_registered  # the registry imports the study modules

    return get_study(name) if is_registered(name) else None


def validate(doc: object, path: Path | str = "<results>") -> dict:
    """``doc`` if it is a results document of this schema version, else :class:`SchemaError` saying what is
    wrong: every label, param and value must have a declared field and a value of its unit (finite, in range),
    no point may appear twice, the points of one panel (same labels) report the same fields, and a study this
    kernbench registers must hold exactly its grid, with the units it declares."""
    path = Path(path)
    _require(isinstance(doc, dict), path, "is not a JSON object")
    _require(doc.get("schema") == SCHEMA, path, f"has schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    version = doc.get("schema_version")
    _require(version == SCHEMA_VERSION, path,
             f"has schema version {version!r}; this kernbench reads version {SCHEMA_VERSION}")
    for key, kind in (("study", str), ("command", str), ("fields", dict), ("provenance", dict), ("points", list)):
        _require(isinstance(doc.get(key), kind), path, f"field {key!r} is missing or not a {kind.__name__}")
    for k, f in doc["fields"].items():
        _require(isinstance(f, dict) and isinstance(f.get("unit"), str), path, f"field {k!r} has no unit")
    fidelity = fidelity_of(doc)
    _require(fidelity in FIDELITIES, path, f"has fidelity {fidelity!r}, expected one of {', '.join(FIDELITIES)}")
    recorded = doc["provenance"].get(FIDELITY, fidelity)
    _require(recorded == fidelity, path, f"says fidelity {fidelity!r} but its provenance says {recorded!r}")
    units = {k: f["unit"] for k, f in doc["fields"].items()}
    study = _registered(doc["study"])
    if study is not None:
        for k, unit in study.units().items():
            _require(units.get(k) == unit, path, f"field {k!r} has unit {units.get(k)!r}, but study "
                                                 f"{study.name!r} declares {unit!r}")
    _require(bool(doc["points"]), path, "holds no points")
    seen: dict[str, int] = {}
    panels: dict[str, tuple[int, set[str]]] = {}
    for i, p in enumerate(doc["points"]):
        _require(isinstance(p, dict) and all(isinstance(p.get(k), dict) for k in ("labels", "params", "values")),
                 path, f"point {i} lacks labels/params/values")
        for part in ("labels", "params", "values"):
            what = f"point {i} {part.removesuffix('s')}"
            problem = check_record(p[part], units, what, nullable=part != "values")
            _require(problem is None, path, str(problem))
        _require(bool(p["values"]), path, f"point {i} has no values")
        _require(p["params"].get(FIDELITY, fidelity) in FIDELITIES, path,
                 f"point {i} param {FIDELITY!r} is {p['params'].get(FIDELITY)!r}, expected one of "
                 f"{', '.join(FIDELITIES)}")
        pid = _point_id(p)
        _require(pid not in seen, path, f"point {i} repeats point {seen.get(pid)} (the same labels and params)")
        seen[pid] = i
        panel = json.dumps(p["labels"], sort_keys=True)
        first, names = panels.setdefault(panel, (i, set(p["values"])))
        for name in sorted(names ^ set(p["values"])):
            holder, other = (first, i) if name in names else (i, first)
            _require(False, path, f"point {other} lacks value {name!r}, which point {holder} of the same panel "
                                  f"{p['labels']} has")
    if study is not None:
        _check_grid(doc, study, seen, path)
    return doc


def selected(point: Point, where: tuple[tuple[str, tuple[str, ...]], ...]) -> bool:
    """Whether ``point`` is one of the points ``--where`` selects (every key a label or param of it, its value,
    as text, one of the given values)."""
    fields = {**point.labels, **point.params}
    return all(key in fields and str(fields[key]) in values for key, values in where)


def _check_grid(doc: dict, study: Study, seen: dict[str, int], path: Path) -> None:
    """The points of ``doc`` are exactly ``study``'s grid in the document's fidelity (:meth:`Study.points`), or the
    part of it its recorded ``--where`` selects; the study's optional points (:attr:`Study.optional`) may be
    present or absent."""

    run = doc["provenance"].get("run")
    where = run.get("where") if isinstance(run, dict) else None
    _require(where is None or (isinstance(where, dict) and all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in where.values())), path,
        "provenance.run.where is not a mapping of field to a list of values")
    selection = tuple((k, tuple(v)) for k, v in (where or {}).items())
    points = [g for g in study.points(fidelity_of(doc)) if selected(g, selection)]
    grid = [_point_id({"labels": dict(g.labels), "params": dict(g.params)}) for g in points
            if not study.optional(g.params)]
    known = {_point_id({"labels": dict(g.labels), "params": dict(g.params)}) for g in points}
    extra = sorted(i for pid, i in seen.items()
                   if pid not in known and not study.optional(doc["points"][i]["params"]))
    _require(not extra, path, f"point {extra[0] if extra else ''} is not a point of study {study.name!r}"
             + (f" selected by --where {where}" if where else ""))
    missing = [g for g in grid if g not in seen]
    _require(not missing, path, f"lacks {len(missing)} of the {len(grid)} points of study {study.name!r} (first: "
                                f"{missing[0] if missing else ''})")


def load(path: Path | str) -> dict:
    """Read and validate a ``results.json`` (a folder means the file inside it)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_JSON
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SchemaError(f"{path} does not exist; run `kernbench study NAME` first") from None
    except OSError as exc:
        raise SchemaError(f"cannot read {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                          f"regenerate it with `kernbench study NAME`") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"{path} is not valid JSON ({exc}); regenerate it with `kernbench study NAME`") from None
    return validate(doc, path)


def select(doc: dict, **match: object) -> list[dict]:
    """Flat rows of the points whose labels/params/values equal every ``match`` item, in grid order. Unless
    ``match`` names a ``fidelity``, only the points simulated in the document's own fidelity match (the fidelity
    panel's copies, run in the other one, are left out)."""
    match.setdefault(FIDELITY, fidelity_of(doc))
    return [r for r in rows(doc) if all(r.get(k) == v for k, v in match.items())]


def one(doc: dict, **match: object) -> dict:
    """The single flat row matching ``match``; :class:`SchemaError` when there is none or several."""
    found = select(doc, **match)
    if len(found) != 1:
        raise SchemaError(f"study {doc.get('study')!r}: {len(found)} points match {match}, expected one; the results "
                          f"file does not have the grid this kernbench expects, regenerate it")
    return found[0]


def strip_run(doc: dict) -> dict:
    """``doc`` without ``provenance.run`` (what differs between runs of the same study)."""
    out = dict(doc)
    out["provenance"] = {k: v for k, v in doc["provenance"].items() if k != "run"}
    return out


def values(rows_: Iterable[dict], key: str) -> list:
    """``key`` of each row."""
    return [r[key] for r in rows_]
