"""``topologies_folder`` outside a clone: the shipped topologies land in one folder of the user cache, reused by
every run, and nothing is left in the temporary directory."""

from __future__ import annotations

import tempfile

import pytest

from kernbench.topology.builtins import REPO_FILES, names, text, topologies_folder
from kernbench.topology.errors import SpecError


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """A folder with no repository above it, a private cache and a private temporary directory."""
    monkeypatch.setenv("KERNBENCH_CACHE_DIR", str(tmp_path / "cache"))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    where = tmp_path / "elsewhere"
    where.mkdir()
    return where, temp


def test_runs_outside_a_clone_share_one_cache_folder_and_leave_no_temporary_folder(outside, tmp_path):
    where, temp = outside
    first = topologies_folder(where / "_")
    second = topologies_folder(where / "_")
    assert first == second and first.is_relative_to(tmp_path / "cache")
    assert sorted(p.name for p in first.iterdir()) == sorted(REPO_FILES.get(n, f"{n}.yaml") for n in names())
    assert (first / "topology.yaml").read_text(encoding="utf-8") == text("default")
    assert list(temp.iterdir()) == []


def test_a_changed_copy_in_the_cache_is_restored(outside):
    where, _ = outside
    folder = topologies_folder(where / "_")
    edited = folder / "6sip_2x3_torus_2d.yaml"
    edited.write_text("# not the shipped file\n", encoding="utf-8")
    (folder / "topology.yaml").unlink()
    assert topologies_folder(where / "_") == folder
    assert edited.read_text(encoding="utf-8") == text("6sip_2x3_torus_2d")
    assert (folder / "topology.yaml").read_text(encoding="utf-8") == text("default")


def test_an_unwritable_cache_is_one_clear_error(outside, tmp_path, monkeypatch):
    where, _ = outside
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KERNBENCH_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(SpecError, match=r"cannot write the shipped topologies into .*; set KERNBENCH_CACHE_DIR"):
        topologies_folder(where / "_")


def test_inside_a_clone_the_repository_folder_is_used(tmp_path):
    repo = tmp_path / "repo"
    (repo / "topologies").mkdir(parents=True)
    (repo / "topologies" / "topology.yaml").write_text(text("default"), encoding="utf-8")
    (repo / "deep" / "er").mkdir(parents=True)
    assert topologies_folder(repo / "deep" / "er" / "x.py") == repo / "topologies"
