"""Round 2 of the bad-input catalogue, caches and results files: a hostile user edited what KernBench had written.

``catalogue.py`` calls :func:`extend` with itself; the entries below join its ``CLI_CASES`` and ``API_CASES`` and
a section for caches and results files joins its ``SECTIONS``. Findings:

1. a study cache entry edited to drop a field, change a type or a sign was served as cached and landed in
   ``results.json``; an entry of random bytes broke every ``kernbench study`` (even ``--force``, ``--dry-run``);
2. an edited cube-mesh layout cache entry changed a latency silently, or gave a ``KeyError`` on every run, or a
   misleading routing error;
3. ``kernbench report`` on a damaged ``results.json`` (random bytes, empty or partial points, a duplicated point,
   NaN / 1e999, a string or negative value, a missing field) failed with an internal error or drew a report from it.

The CLI cases run with the user cache in the catalogue's private folder (``KERNBENCH_CACHE_DIR``, set by
``catalogue.run_all``): a case's file maker writes the damaged cache entry there before the command runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

SEC_CACHE = "Caches and results files"
ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "topologies"
WHERE = ("--where", "series=shapes", "--where", "variant=ref_ref", "--where", "m=32", "--where", "k=32",
         "--where", "n=32")
STUDY_DRY = ("study", "gemm", *WHERE, "--topologies", "{tmp}/topologies", "--dry-run")
REPORT = ("report", "--studies", "{tmp}/studies", "--out", "{tmp}/report", "--no-pdf")
ENTRY = ((r"cache entry \S+ is corrupt", "cache entry <cache>/studies/<key>.json is corrupt"),)

BENCH_TESTS = "packages/kernbench-studies/tests/"
CACHE_TESTS = BENCH_TESTS + "test_cache_integrity.py::"
RESULTS_TESTS = BENCH_TESTS + "test_results_integrity.py::"
MESH_TESTS = "packages/kernbench-topology/tests/test_mesh_cache_integrity.py::"


def _entry_path(topologies: Path) -> tuple[Path, object]:
    """The cache entry of the one gemm point the cases select, and its key parts (cache: ``$KERNBENCH_CACHE_DIR``)."""
    from kernbench.studies.cache import ResultCache, key_parts
    from kernbench.studies.registry import get_study

    study = get_study("gemm")
    (point,) = [p for p in study.grid() if dict(p.params) == {"series": "shapes", "topology": "topology.yaml",
                                                              "variant": "ref_ref", "m": 32, "k": 32, "n": 32}]
    parts = key_parts(study, point.params, topologies)
    cache = ResultCache()
    return cache._entry(parts.key()), (cache, parts)


def cache_entry(edit: Callable[[dict], None] | None = None, data: bytes | None = None) -> Callable[[Path], bytes]:
    """A file maker for ``topologies/topology.yaml``: the shipped topology plus a comment (so that its points have
    keys of their own and the damaged entry never reaches another case), and, as a side effect, the selected
    point's cache entry in the user cache (made-up values, then ``edit``-ed without updating its hash, or replaced
    by ``data``)."""
    def make(tmp: Path) -> bytes:
        body = (TOPOLOGIES / "topology.yaml").read_bytes() + f"# catalogue case {tmp.name}\n".encode()
        (tmp / "topologies").mkdir(parents=True, exist_ok=True)
        (tmp / "topologies" / "topology.yaml").write_bytes(body)
        path, (cache, parts) = _entry_path(tmp / "topologies")
        cache.put(parts, {"m": 32, "k": 32, "n": 32, "composite_ns": 153.26, "events": 89}, 0.25)
        if data is not None:
            path.write_bytes(data)
        else:
            entry = json.loads(path.read_text(encoding="utf-8"))
            edit(entry["values"])
            path.write_text(json.dumps(entry), encoding="utf-8")
        return body
    return make


def gemm_results(edit: Callable[[dict], None] | None = None, data: bytes | None = None) -> Callable[[Path], bytes]:
    """A ``results.json`` of the whole gemm grid (made-up values), ``edit``-ed, or ``data`` as is."""
    def make(_tmp: Path) -> bytes:
        if data is not None:
            return data
        from kernbench.studies import results as res
        from kernbench.studies.registry import get_study

        study = get_study("gemm")
        points = [{"labels": dict(p.labels), "params": dict(p.params),
                   "values": {"composite_ns": 100.0 + i, "events": 50 + i}} for i, p in enumerate(study.grid())]
        doc = res.document(study, points, {"packages": {}, "topology_files": {}})
        if edit is not None:
            edit(doc)
        return json.dumps(doc).replace("Infinity", "1e999").encode()
    return make


def _set(i: int, part: str, **kv) -> Callable[[dict], None]:
    return lambda d: d["points"][i][part].update(kv)


def extend(cat: ModuleType) -> None:
    """Add the cache and results-file entries to the catalogue module ``cat``."""
    cli, api = cat.CliCase, cat.ApiCase
    results_file = "studies/gemm/results.json"
    where = "{tmp}/studies/gemm/results.json"

    def study_case(case_id: str, what: str, make: Callable[[Path], bytes], expect: str):
        return cli(case_id, SEC_CACHE, what, STUDY_DRY, expect, code=0, files={"topologies/topology.yaml": make},
                   volatile=ENTRY)

    def report_case(case_id: str, what: str, make: Callable[[Path], bytes], expect: str):
        return cli(case_id, SEC_CACHE, what, REPORT, expect.replace("{where}", where),
                   files={results_file: make})

    def flip(v: dict) -> None:
        v["composite_ns"] = -v["composite_ns"]

    new_cli = (
        study_case("study-cache-sign", "a study cache entry with a value's sign flipped (served as cached before)",
                   cache_entry(flip), "is corrupt (its content does not match its SHA-256 (edited or damaged)); "
                                      "recomputing the point"),
        study_case("study-cache-dropped", "a study cache entry with a field removed (served as cached before)",
                   cache_entry(lambda v: v.pop("composite_ns")), "does not match its SHA-256"),
        study_case("study-cache-type", "a study cache entry with a number turned into text (served before)",
                   cache_entry(lambda v: v.update(composite_ns="153")), "does not match its SHA-256"),
        study_case("study-cache-bytes", "a study cache entry of random bytes (UnicodeDecodeError in every `kernbench "
                   "study`, even `--dry-run`, before)", cache_entry(data=bytes(range(128, 256)) * 4),
                   "is corrupt (it is not UTF-8 text); recomputing the point"),
        report_case("report-bytes", "`kernbench report` on a `results.json` of random bytes",
                    gemm_results(data=b"\x89PNG\r\n" + bytes(range(128, 256))),
                    "{where} is not UTF-8 text (byte 0x89 at offset 0); regenerate it"),
        report_case("report-empty-points", "`results.json` with `points: []`",
                    gemm_results(lambda d: d.update(points=[])), "{where}: holds no points"),
        report_case("report-partial-point", "`results.json` with a point lacking its values",
                    gemm_results(lambda d: d["points"][4].pop("values")),
                    "{where}: point 4 lacks labels/params/values"),
        report_case("report-missing-point", "`results.json` lacking a point of the grid",
                    gemm_results(lambda d: d["points"].pop(5)), "{where}: lacks 1 of the 174 points of study 'gemm'"),
        report_case("report-duplicate", "`results.json` with a point twice",
                    gemm_results(lambda d: d["points"].append(d["points"][2])),
                    "{where}: point 174 repeats point 2 (the same labels and params)"),
        report_case("report-nan", "`results.json` with a NaN value",
                    gemm_results(_set(3, "values", events=float("nan"))),
                    "{where}: point 3 value 'events' is nan"),
        report_case("report-overflow", "`results.json` with `1e999` (inf once read)",
                    gemm_results(_set(3, "values", composite_ns=float("inf"))),
                    "{where}: point 3 value 'composite_ns' is inf"),
        report_case("report-string", "`results.json` with text for a number",
                    gemm_results(_set(3, "values", composite_ns="fast")),
                    "{where}: point 3 value 'composite_ns' is 'fast', expected a number of ns"),
        report_case("report-missing-field", "`results.json` with a value removed from one point",
                    gemm_results(lambda d: d["points"][3]["values"].pop("events")),
                    "{where}: point 3 lacks value 'events', which point 0 of the same panel"),
        report_case("report-negative", "`results.json` with every `composite_ns = -1` (a report was built before)",
                    gemm_results(lambda d: [p["values"].update(composite_ns=-1) for p in d["points"]]),
                    "{where}: point 0 value 'composite_ns' is -1, expected a number of ns at least 0"),
        report_case("report-nan-param", "`results.json` with NaN in a point's params (loaded before)",
                    gemm_results(_set(3, "params", m=float("nan"))), "{where}: point 3 param 'm' is nan"),
    )
    new_api = (
        api("study-cache-rehashed", SEC_CACHE, "a study cache entry edited and its SHA-256 recomputed: its values must "
            "still fit the study's fields (type, finiteness, range)", "expected a number of ns at least 0",
            CACHE_TESTS + "test_an_edited_entry_is_recomputed_not_served[sign-rehashed]"),
        api("study-cache-force", SEC_CACHE, "`kernbench study --force` with an entry of random bytes (failed before): "
            "the entry is not read, and is overwritten", "--force",
            CACHE_TESTS + "test_random_bytes_are_recomputed_and_never_break_dry_run_or_force"),
        api("mesh-cache-scaled", SEC_CACHE, "a cube-mesh cache entry with its coordinates scaled by 1.2 (a latency "
            "of 3821.14 instead of 3645.86 ns before): regenerated with a warning, and gemm-single-pe's latency is "
            "the clean one exactly (3659.86 ns since HBM read replies are paced causally)",
            "the layout does not match its content_sha256",
            "tests/test_hostile_cli_round2.py::test_a_scaled_mesh_cache_entry_never_reaches_a_latency"),
        api("mesh-cache-empty", SEC_CACHE, "a cube-mesh cache entry with `present: []` (KeyError on every run before)",
            "the mesh has no routers (present is empty)", MESH_TESTS + "test_an_empty_mesh_is_regenerated"),
        api("mesh-cache-ucie-row", SEC_CACHE, "a cube-mesh cache entry with a UCIe port at `row: 999` (KeyError on "
            "every run before)", "is not on a present router",
            MESH_TESTS + "test_a_ucie_port_off_the_grid_is_regenerated"),
        api("mesh-cache-nan", SEC_CACHE, "a cube-mesh cache entry with a NaN coordinate (a misleading routing error "
            "before)", "col_xs is not a list of finite numbers", MESH_TESTS + "test_a_nan_coordinate_is_regenerated"),
    )
    cat.CLI_CASES = (*cat.CLI_CASES, *new_cli)
    cat.API_CASES = (*cat.API_CASES, *new_api)
    if SEC_CACHE not in cat.SECTIONS:
        cat.SECTIONS = (*cat.SECTIONS, SEC_CACHE)
