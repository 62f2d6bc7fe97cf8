"""What the CLI prints from user input cannot drive the terminal, and `topology --export` never writes through a
dangling symbolic link.

Terminal escape sequences (ESC, BEL, C1 controls, bidi overrides) in a topology name or in a links file's fields
are printed as Python escapes (``\\x1b``) by one helper, :func:`kernbench.topology.safe_yaml.printable`.
"""

from __future__ import annotations

import json

import pytest

from kernbench.cli.main import main
from kernbench.runtime.bench import discover, run_bench
from kernbench.sim.links import link_report, write_links
from kernbench.topology import load_topology
from kernbench.topology.builtins import text as builtin_text
from kernbench.topology.safe_yaml import printable

from .conftest import DEFAULT_TOPOLOGY

EVIL_TITLE = "x\x1b]0;pwned\x07\x1b[2J"


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain name", "plain name"),
    ("a\x1b[31mred", "a\\x1b[31mred"),
    ("bell\x07", "bell\\x07"),
    ("csi\x9b1m", "csi\\x9b1m"),
    ("rtl\u202eexe.txt", "rtl\\u202eexe.txt"),
    ("del\x7f", "del\\x7f"),
    ("two\nlines\r", "two\\nlines\\r"),
    ("tab\there", "tab\\there"),
    ("café → ok", "café → ok"),
])
def test_printable_escapes_what_a_terminal_acts_on(raw, shown):
    assert printable(raw) == shown


def test_printable_keeps_the_characters_asked_for():
    assert printable("a\n\x1bb", keep="\n") == "a\n\\x1bb"


@pytest.fixture(scope="module")
def links_file(tmp_path_factory):
    graph = load_topology(DEFAULT_TOPOLOGY)
    result = run_bench(discover().resolve("gemm-single-pe"), graph, 0)
    path = write_links(link_report(result.engine, {"bench": result.bench, "device": 0,
                                                   "topology_file": str(DEFAULT_TOPOLOGY)}),
                       tmp_path_factory.mktemp("esc") / "links.json")
    return path


def test_links_file_fields_are_printed_escaped(links_file, tmp_path, capsys):
    r"""An ESC, a BEL and a bidi override in a links file print as \x1b, \x07 and \u202e."""
    data = json.loads(links_file.read_text())
    data["run"]["bench"] = EVIL_TITLE
    busiest = data["links"][0]
    busiest.update(kind="pcie\x1b[31m", src=busiest["src"] + "\u202e", utilisation=0.99)
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(data))
    assert main(["links", str(evil), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    lines = out.splitlines()
    assert lines[0] == "busiest links of x\\x1b]0;pwned\\x07\\x1b[2J on ahbm-default (device 0) (run window " \
                       f"{data['window_ns']:.1f} ns)"
    assert f"{busiest['src']}" not in lines[2] and f"{busiest['src'][:-1]}\\u202e → " in lines[2]
    assert "pcie\\x1b[31m" in lines[2]


def test_a_topology_name_with_escapes_is_printed_escaped(tmp_path, capsys):
    r"""``name: "evil\e[2J\a"`` prints as 'evil\x1b[2J\x07'."""
    topo = tmp_path / "topology.yaml"
    body = builtin_text()
    assert body.count("name: ahbm-default") == 1
    topo.write_text(body.replace("name: ahbm-default", 'name: "evil\\e[2J\\a"'))
    assert main(["topology", str(topo)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[0] == f"topology 'evil\\x1b[2J\\x07' ({topo})"


def test_export_refuses_a_dangling_symlink_and_creates_nothing(tmp_path, capsys):
    link = tmp_path / "link.yaml"
    target = tmp_path / "created-elsewhere.yaml"
    link.symlink_to(target)
    assert main(["topology", "--export", "default", str(link)]) == 2
    assert capsys.readouterr().err == (
        f"kernbench: error: --export {link}: is a symbolic link to {target}, which does not exist; writing "
        "through it would create that file, so remove the link or choose another path\n")
    assert not target.exists() and link.is_symlink()


def test_export_refuses_a_dangling_symlink_inside_the_folder_given(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "default.yaml").symlink_to(tmp_path / "gone.yaml")
    assert main(["topology", "--export", "default", str(tmp_path / "out")]) == 2
    assert "is a symbolic link to " in capsys.readouterr().err
    assert not (tmp_path / "gone.yaml").exists()


def test_export_still_writes_a_new_file(tmp_path, capsys):
    assert main(["topology", "--export", "default", str(tmp_path / "t.yaml")]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 't.yaml'}\n"
    assert (tmp_path / "t.yaml").read_text() == builtin_text()
