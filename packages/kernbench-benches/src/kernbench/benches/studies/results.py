"""``results.json`` and ``results.csv``: a study's results with schema version, units and provenance.

``results.json`` (schema ``kernbench.study-results``, version
:data:`SCHEMA_VERSION`)::

    {"schema": "kernbench.study-results", "schema_version": 1,
     "study": "gemm", "title": ..., "description": ..., "command": "kernbench study gemm",
     "fields": {"composite_ns": {"unit": "ns", "description": ...}, ...},
     "provenance": {"packages": {"kernbench-benches": "0.1.0", ...},
                    "topology_files": {"topology.yaml": "<sha256>", ...},
                    "source_sha256": "<digest of the kernbench source the points import>",
                    "git_commit": "<sha>" | null,
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
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path

from kernbench.benches.studies.base import SchemaError, Study

SCHEMA = "kernbench.study-results"
SCHEMA_VERSION = 1
RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"


def document(study: Study, points: list[dict], provenance: dict) -> dict:
    """The results document of ``study``: ``points`` in grid order, each ``{"labels", "params", "values"}``."""
    fields = {f.name: {"unit": f.unit, "description": f.description, **({} if f.csv else {"csv": False})}
              for f in study.fields}
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "study": study.name, "title": study.title,
            "description": study.description, "command": study.command, "fields": fields,
            "provenance": provenance, "points": points}


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
    """CSV columns: every label, param and value name in first-seen order, less the fields marked
    ``"csv": false``."""
    seen: dict[str, None] = {}
    for p in doc["points"]:
        for part in ("labels", "params", "values"):
            for k in p[part]:
                seen.setdefault(k, None)
    hidden = {k for k, f in doc.get("fields", {}).items() if f.get("csv", True) is False}
    return [k for k in seen if k not in hidden]


def rows(doc: dict) -> list[dict]:
    """One flat dict per point (labels, then params, then values; a later part wins a repeated name)."""
    return [{**p["labels"], **p["params"], **p["values"]} for p in doc["points"]]


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


def validate(doc: object, path: Path | str = "<results>") -> dict:
    """``doc`` if it is a results document of this schema version, else :class:`SchemaError` saying what is
    wrong."""
    path = Path(path)
    _require(isinstance(doc, dict), path, "is not a JSON object")
    _require(doc.get("schema") == SCHEMA, path, f"has schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    version = doc.get("schema_version")
    _require(version == SCHEMA_VERSION, path,
             f"has schema version {version!r}; this kernbench reads version {SCHEMA_VERSION}")
    for key, kind in (("study", str), ("command", str), ("fields", dict), ("provenance", dict), ("points", list)):
        _require(isinstance(doc.get(key), kind), path, f"field {key!r} is missing or not a {kind.__name__}")
    for i, p in enumerate(doc["points"]):
        _require(isinstance(p, dict) and all(isinstance(p.get(k), dict) for k in ("labels", "params", "values")),
                 path, f"point {i} lacks labels/params/values")
        for k, v in p["values"].items():
            _require(k in doc["fields"], path, f"point {i} value {k!r} has no unit in 'fields'")
            _require(not (isinstance(v, float) and not math.isfinite(v)), path, f"point {i} value {k!r} is {v}")
    return doc


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
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"{path} is not valid JSON ({exc}); regenerate it with `kernbench study NAME`") from None
    return validate(doc, path)


def select(doc: dict, **match: object) -> list[dict]:
    """Flat rows of the points whose labels/params/values equal every ``match`` item, in grid order."""
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
