"""Outputs never destroy inputs or each other (round 2 of issue 12): ``--trace T.yaml`` over the topology used to
overwrite it with exit 0, ``--links F --trace F`` lost one of them, an interrupted write left a 0-byte file, and
``--trace DIR/`` did not create its folder while ``--links`` and ``--diagrams`` did. Every output of ``kernbench
run`` is now checked against the inputs and the other outputs (resolved paths) before anything runs, missing folders
are created for all of them, and each is written beside its name and moved into place in one step."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kernbench.cli import run_cmd
from kernbench.cli.main import main
from kernbench.cli.paths import OutputPathError, plan_outputs, replace_atomically
from kernbench.topology.builtins import text

RUN = ("run", "--bench", "gemm-single-pe", "--json")


def _error(capsys, *argv) -> str:
    """The one stderr line of a refused command (exit 2, nothing on stdout)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    return err.strip()


@pytest.fixture
def topology(tmp_path) -> Path:
    path = tmp_path / "T.yaml"
    path.write_text(text())
    return path


@pytest.mark.parametrize("option", ["--trace", "--links"])
def test_an_output_that_is_the_topology_is_refused_and_the_file_kept(capsys, topology, option):
    before = topology.read_bytes()
    assert _error(capsys, *RUN, "--topology", str(topology), option, str(topology)) == (
        f"kernbench: error: {option} {topology}: is the topology file (--topology {topology}), which this command "
        f"reads; writing it would destroy it, so choose another path")
    assert topology.read_bytes() == before


def test_the_same_file_by_another_name_is_refused_too(capsys, topology, tmp_path):
    (tmp_path / "hard.yaml").hardlink_to(topology)
    (tmp_path / "soft.yaml").symlink_to(topology)
    (tmp_path / "sub").mkdir()
    for other in ("hard.yaml", "soft.yaml", "sub/../T.yaml"):
        assert _error(capsys, *RUN, "--topology", str(topology), "--trace", str(tmp_path / other)).endswith(
            f"is the topology file (--topology {topology}), which this command reads; writing it would destroy it, "
            f"so choose another path")
    assert topology.read_text() == text()


def test_the_ccl_yaml_beside_the_topology_is_an_input(capsys, topology, tmp_path):
    ccl = tmp_path / "ccl.yaml"
    ccl.write_text("defaults: {}\n")
    assert _error(capsys, *RUN, "--topology", str(topology), "--links", str(ccl)) == (
        f"kernbench: error: --links {ccl}: is the ccl.yaml beside the topology, which this command reads; writing "
        f"it would destroy it, so choose another path")
    assert ccl.read_text() == "defaults: {}\n"


def test_two_outputs_on_one_file_are_refused_before_any_folder_is_made(capsys, tmp_path):
    same = tmp_path / "new" / "f.json"
    assert _error(capsys, *RUN, "--links", str(same), "--trace", str(same)) == (
        f"kernbench: error: --links {same}: is also the --trace file; give each output its own path")
    # A folder given to --trace means <folder>/<bench>.trace.json: the same rule applies to the file it names.
    folder = tmp_path / "out"
    assert _error(capsys, *RUN, "--trace", f"{folder}{os.sep}", "--links",
                  str(folder / "gemm-single-pe.trace.json")) == (
        f"kernbench: error: --links {folder / 'gemm-single-pe.trace.json'}: is also the --trace file; give each "
        f"output its own path")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(("option", "message"), [
    ("--trace", "--trace '': the path is empty; give a file or a folder"),
    ("--links", "--links '': the path is empty; give a file name"),
])
def test_an_empty_output_path_is_refused(capsys, option, message):
    assert _error(capsys, *RUN, option, "") == f"kernbench: error: {message}"


def test_every_output_creates_its_missing_folders(capsys, tmp_path):
    """``--trace DIR/`` (a folder that does not exist yet) and a file below new folders, like ``--links``."""
    assert main([*RUN, "--trace", f"{tmp_path / 'a' / 'b'}{os.sep}", "--links", str(tmp_path / "c" / "l.json")]) == 0
    capsys.readouterr()
    assert (tmp_path / "a" / "b" / "gemm-single-pe.trace.json").stat().st_size > 0
    assert (tmp_path / "c" / "l.json").stat().st_size > 0
    assert main([*RUN, "--trace", str(tmp_path / "d" / "e" / "t.json")]) == 0
    assert (tmp_path / "d" / "e" / "t.json").stat().st_size > 0
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.startswith(".")]
    assert leftovers == []


@pytest.mark.parametrize(("option", "writer"), [("--trace", "write_chrome_trace"), ("--links", "write_links")])
def test_an_interrupted_write_keeps_the_old_file(capsys, monkeypatch, tmp_path, option, writer):
    old = tmp_path / "out.json"
    old.write_text("the previous run\n")

    def interrupted(data, path):
        Path(path).write_text('{"half": ')  # Ctrl-C in the middle of the write
        raise KeyboardInterrupt

    monkeypatch.setattr(run_cmd, writer, interrupted)
    assert main([*RUN, option, str(old)]) == 130
    assert capsys.readouterr().err == "kernbench: interrupted\n"
    assert old.read_text() == "the previous run\n" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_replace_atomically_keeps_permissions_and_cleans_up(tmp_path):
    existing = tmp_path / "t.json"
    existing.write_text("old")
    existing.chmod(0o640)
    with replace_atomically(existing) as part:
        assert part.parent == tmp_path and part.suffix == ".json" and part != existing
        part.write_text("new")
        assert existing.read_text() == "old"  # nothing changes until the block ends
    assert existing.read_text() == "new" and stat.S_IMODE(existing.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh.json"
    with replace_atomically(fresh) as part:
        part.write_text("x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask
    with pytest.raises(OSError), replace_atomically(existing) as part:
        part.write_text("partial")
        raise OSError(28, "No space left on device")
    assert existing.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["fresh.json", "t.json"]
    link = tmp_path / "latest.json"
    link.symlink_to(existing)
    with replace_atomically(link) as part:
        part.write_text("through the link")
    assert link.is_symlink() and existing.read_text() == "through the link"


def test_plan_outputs_returns_the_files_to_write(tmp_path):
    plan = plan_outputs({"--trace": (str(tmp_path), "b.trace.json"), "--links": (None, None)}, {})
    assert plan == {"--trace": tmp_path / "b.trace.json"}
    with pytest.raises(OutputPathError, match="is also the --a file"):
        plan_outputs({"--a": (str(tmp_path / "x"), None), "--b": (f"{tmp_path}/./x", None)}, {})
