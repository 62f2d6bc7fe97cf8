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


def test_export_never_writes_through_a_symlink_made_after_its_check(tmp_path, monkeypatch):
    """The write itself refuses an existing name (O_EXCL), so a link planted between the check and the write
    is not followed: its target is never created."""
    from pathlib import Path

    from kernbench.topology import builtins as b
    from kernbench.topology.errors import KernbenchError

    target, link = tmp_path / "victim.yaml", tmp_path / "out.yaml"
    real_exists = Path.exists

    def exists_then_plant(self, *args, **kwargs):
        found = real_exists(self, *args, **kwargs)
        if self == link and not found and not link.is_symlink():
            link.symlink_to(target)  # the race: the check saw nothing, the link appears before the write
        return found

    monkeypatch.setattr(Path, "exists", exists_then_plant)
    try:
        b.export(b.DEFAULT, link)
    except KernbenchError as exc:
        assert "already exists (or is a symbolic link)" in str(exc)
    else:
        raise AssertionError("export wrote through a symbolic link")
    assert not real_exists(target)
