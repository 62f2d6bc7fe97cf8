"""A cube-mesh cache entry is checked before use: the SHA-256 of the layout it was generated with, and the
structure of the layout. An edited or damaged entry is regenerated with one warning, never used."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from kernbench.topology import load_topology
from kernbench.topology.builtins import text as default_text
from kernbench.topology.mesh_gen import CacheWarning, generate_mesh


@pytest.fixture
def topo(tmp_path, monkeypatch) -> Path:
    """The default topology in a scratch folder, with a private user cache."""
    monkeypatch.setenv("KERNBENCH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "topology.yaml"
    path.write_text(default_text(), encoding="utf-8")
    return path


def _rehash(data: dict) -> None:
    """Store the content hash of ``data``'s (edited) layout, as a careful vandal would."""
    layout = {k: v for k, v in data.items() if k != "content_sha256"}
    text = json.dumps(layout, sort_keys=True, separators=(",", ":"), allow_nan=False)
    data["content_sha256"] = hashlib.sha256(text.encode()).hexdigest()


def _edit_and_reload(topo: Path, edit, match: str, *, rehash: bool = False):
    first = load_topology(topo)
    cache = first.mesh_path
    data = yaml.safe_load(cache.read_text(encoding="utf-8"))
    edit(data)
    if rehash:
        _rehash(data)
    cache.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.warns(CacheWarning) as caught:
        again = load_topology(topo)
    (w,) = caught
    assert re.fullmatch(rf"cube-mesh cache {re.escape(str(cache))} is unusable \(ValueError: {match}\); "
                        r"regenerating it", str(w.message)), str(w.message)
    assert again.mesh == first.mesh == generate_mesh(first.spec)
    # the regenerated entry is whole again: the next load is silent and uses it
    assert load_topology(topo).mesh == first.mesh
    return first


def _scale(data: dict) -> None:
    data["col_xs"] = [x * 1.2 for x in data["col_xs"]]
    data["row_ys"] = [y * 1.2 for y in data["row_ys"]]


def test_scaled_coordinates_are_regenerated_not_used(topo):
    """The layout's coordinates scaled by 1.2 (a latency of 3821.14 instead of 3645.86 ns before)."""
    _edit_and_reload(topo, _scale, re.escape("the layout does not match its content_sha256 (edited or damaged)"))


def test_an_empty_mesh_is_regenerated(topo):
    """``present: []`` (a KeyError on every run before), even with a matching content hash."""
    _edit_and_reload(topo, lambda d: d.update(present=[]), re.escape("the mesh has no routers (present is empty)"),
                     rehash=True)


def test_a_ucie_port_off_the_grid_is_regenerated(topo):
    """A UCIe port at ``row: 999`` (a KeyError on every run before), even with a matching content hash."""
    def edit(d):
        d["ucie"][0]["row"] = 999

    _edit_and_reload(topo, edit, r"UCIe port n0 \(row 999, col \d+\) is not on a present router", rehash=True)


def test_a_nan_coordinate_is_regenerated(topo):
    """A NaN router coordinate (a misleading routing error before)."""
    def edit(d):
        d["col_xs"][1] = float("nan")

    _edit_and_reload(topo, edit, re.escape("col_xs is not a list of finite numbers"))


def test_an_entry_without_its_content_hash_is_regenerated(topo):
    _edit_and_reload(topo, lambda d: d.pop("content_sha256"),
                     re.escape("the layout does not match its content_sha256 (edited or damaged)"))
