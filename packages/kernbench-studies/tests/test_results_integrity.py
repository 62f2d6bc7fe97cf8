"""``results.json`` is validated against the study's declared fields before anything is drawn: every case below
was an internal error (or, for a negative latency, a silent report) before."""

from __future__ import annotations

import json

import pytest

from kernbench.studies import results as res
from kernbench.studies.base import SchemaError

REGEN = "; regenerate it with `kernbench study NAME`"


def _gemm_grid_size() -> int:
    from kernbench.studies.registry import get_study

    return len(get_study("gemm").grid())


def _dup(d):
    d["points"].append(json.loads(json.dumps(d["points"][2])))


def _drop_point(d):
    del d["points"][5]


def _partial(d):
    d["points"][4] = {"labels": d["points"][4]["labels"], "params": d["points"][4]["params"]}


CASES = [
    (lambda d: d.update(points=[]), "holds no points"),
    (_partial, "point 4 lacks labels/params/values"),
    (lambda d: d["points"][4].update(values={}), "point 4 has no values"),
    (_drop_point, f"lacks 1 of the {_gemm_grid_size()} points of study 'gemm' (first: "),
    (_dup, f"point {_gemm_grid_size()} repeats point 2 (the same labels and params)"),
    (lambda d: d["points"][3]["values"].update(composite_ns=float("nan")), "point 3 value 'composite_ns' is nan"),
    (lambda d: d["points"][3]["values"].update(composite_ns="fast"),
     "point 3 value 'composite_ns' is 'fast', expected a number of ns"),
    (lambda d: d["points"][3]["values"].pop("composite_ns"),
     "point 3 lacks value 'composite_ns', which point 0 of the same panel {'series': 'shapes'} has"),
    (lambda d: [p["values"].update(composite_ns=-1) for p in d["points"]],
     "point 0 value 'composite_ns' is -1, expected a number of ns at least 0"),
    (lambda d: d["points"][3]["params"].update(m=float("nan")), "point 3 param 'm' is nan"),
    (lambda d: d["points"][3]["labels"].update(series=float("inf")),
     "point 3 label 'series' is inf, expected text or true/false"),
    (lambda d: d["points"][3]["values"].update(macs=True), "point 3 value 'macs' is True, expected a number of MAC"),
    (lambda d: d["fields"]["composite_ns"].update(unit="ms"),
     "field 'composite_ns' has unit 'ms', but study 'gemm' declares 'ns'"),
]


@pytest.mark.parametrize(("mutate", "message"), CASES, ids=[
    "empty", "partial", "no-values", "missing-point", "duplicate", "nan", "string", "missing-field",
    "negative-latency", "nan-param", "inf-label", "bool-number", "unit"])
def test_a_corrupted_results_file_is_one_schema_error(synthetic, tmp_path, mutate, message):
    doc = synthetic.synthetic_doc("gemm")
    mutate(doc)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as err:
        res.load(path)
    assert str(err.value).startswith(f"{path}: {message}") and str(err.value).endswith(REGEN), str(err.value)


def test_overflowing_numbers_and_random_bytes(synthetic, tmp_path):
    doc = synthetic.synthetic_doc("gemm")
    path = tmp_path / "results.json"
    doc["points"][0]["values"]["composite_ns"] = float("inf")
    path.write_text(json.dumps(doc).replace("Infinity", "1e999"))  # a number too large for a float
    assert "1e999" in path.read_text()
    with pytest.raises(SchemaError, match=r"point 0 value 'composite_ns' is inf; regenerate it"):
        res.load(path)
    path.write_bytes(b"\x89PNG\xff\xfe" + bytes(range(256)))
    with pytest.raises(SchemaError, match=r"results.json is not UTF-8 text \(byte 0x89 at offset 0\); regenerate"):
        res.load(path)


def test_a_where_run_records_its_selection_and_loads(synthetic, tmp_path):
    """A ``--where`` run holds part of the grid and says which part (``provenance.run.where``)."""
    doc = synthetic.synthetic_doc("gemm")
    # what --where series=tiles selects: a param wins over a label, so the fidelity panel's copy of a tiles point
    # (label series=fidelity, param series=tiles) is part of the selection
    doc["points"] = [p for p in doc["points"] if {**p["labels"], **p["params"]}["series"] == "tiles"]
    doc["provenance"]["run"] = {"where": {"series": ["tiles"]}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    assert res.load(path)["points"] == doc["points"]
    doc["points"].pop()
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="lacks 1 of the"):
        res.load(path)
