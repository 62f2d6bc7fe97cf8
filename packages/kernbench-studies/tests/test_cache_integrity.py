"""A study cache entry is served only when it is whole: readable JSON, its own key, the SHA-256 of its content,
and values that fit the study's declared fields. Anything else is recomputed, with one warning line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernbench.studies import results as res
from kernbench.studies.cache import ResultCache, content_hash
from kernbench.studies.registry import resolve
from kernbench.studies.runner import RunOptions, parse_where, plan, run_studies
from kernbench.topology.mesh_gen import CacheWarning

TOPOLOGIES = Path(__file__).resolve().parents[3] / "topologies"
WHERE = parse_where(["series=shapes", "variant=ref_ref", "m=32", "k=32", "n=32"])


def _options(tmp_path: Path, **kw) -> RunOptions:
    return RunOptions(executor="serial", jobs=1, out=tmp_path / "out", topology_dir=TOPOLOGIES, progress=False,
                      cache_root=tmp_path / "cache", where=WHERE, **kw)


@pytest.fixture
def cached(tmp_path):
    """One gemm point run once: its cache entry's path and the values it holds."""
    (r,) = run_studies(resolve("gemm"), _options(tmp_path))
    assert (r.ran, r.cached) == (1, 0)
    (entry,) = (tmp_path / "cache" / "studies").rglob("*.json")
    return entry, json.loads(entry.read_text())["values"]


def _rerun(tmp_path: Path, match: str):
    with pytest.warns(CacheWarning) as caught:
        (r,) = run_studies(resolve("gemm"), _options(tmp_path))
    (w,) = caught
    assert str(w.message).startswith("study gemm cache entry ") and str(w.message).endswith(
        f"is corrupt ({match}); recomputing the point"), str(w.message)
    assert (r.ran, r.cached) == (1, 0)
    return res.load(r.results)["points"][0]["values"]


@pytest.mark.parametrize(("edit", "rehash", "match"), [
    (lambda v: v.pop("composite_ns"), False, "its content does not match its SHA-256 (edited or damaged)"),
    (lambda v: v.update(composite_ns="fast"), False, "its content does not match its SHA-256 (edited or damaged)"),
    (lambda v: v.update(composite_ns=-v["composite_ns"]), False,
     "its content does not match its SHA-256 (edited or damaged)"),
    (lambda v: v.update(composite_ns=-1.0), True, "value 'composite_ns' is -1.0, expected a number of ns at least 0"),
    (lambda v: v.update(composite_ns="fast"), True, "value 'composite_ns' is 'fast', expected a number of ns"),
    (lambda v: v.update(mystery=1), True, "value 'mystery' has no unit in 'fields'"),
    (lambda v: v.update(macs=1.5), True, "value 'macs' is 1.5, expected a whole number of MAC"),
], ids=["dropped", "type", "sign", "sign-rehashed", "type-rehashed", "unknown-rehashed", "fraction-rehashed"])
def test_an_edited_entry_is_recomputed_not_served(tmp_path, cached, edit, rehash, match):
    """An edit (a dropped field, a type, a sign) is never served; with its hash recomputed it still has to fit the
    study's declared fields."""
    path, good = cached
    entry = json.loads(path.read_text())
    edit(entry["values"])
    if rehash:
        entry["sha256"] = content_hash(entry["key"], entry["values"], entry["wall_s"])
    path.write_text(json.dumps(entry))
    assert _rerun(tmp_path, match) == good
    assert json.loads(path.read_text())["values"] == good  # the entry is whole again


def test_random_bytes_are_recomputed_and_never_break_dry_run_or_force(tmp_path, cached):
    """An entry of random bytes (UnicodeDecodeError in every `kernbench study` before, even --force and --dry-run)."""
    path, good = cached
    path.write_bytes(bytes(range(256)) * 3)
    with pytest.warns(CacheWarning, match=r"is corrupt \(it is not UTF-8 text\); recomputing the point"):
        (p,) = plan(resolve("gemm"), _options(tmp_path))
    assert [(pp.cached, pp.reason) for pp in p.points] == [(False, "its cache entry is corrupt")]
    (p,) = plan(resolve("gemm"), _options(tmp_path, force=True))  # --force does not even read the entry
    assert [(pp.cached, pp.reason) for pp in p.points] == [(False, "--force")]
    (r,) = run_studies(resolve("gemm"), _options(tmp_path, force=True))
    assert (r.ran, json.loads(path.read_text())["values"]) == (1, good)


def test_a_nan_in_an_entry_is_corrupt(tmp_path, cached):
    path, _ = cached
    path.write_text(path.read_text().replace('"composite_ns": ', '"composite_ns": NaN, "x": ', 1))
    _rerun(tmp_path, "its content cannot be hashed (a value is not finite)")


def test_a_whole_entry_is_a_hit(tmp_path, cached):
    path, good = cached
    key = path.stem
    status, values, _ = ResultCache(tmp_path / "cache").get(key, resolve("gemm")[0])
    assert (status, values) == ("hit", good)
