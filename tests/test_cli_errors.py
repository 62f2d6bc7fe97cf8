"""Bad input: one line on stderr, exit status 2, a message naming what/where/how; --debug shows a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kernbench: error: ")
    return lines[0]


def test_malformed_yaml_names_file_and_line(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsystem:\n  sips: {count: 2\n  pcie: 3\n")
    msg = _one_line_error(cli("topology", str(bad)))
    assert str(bad) in msg
    assert "line " in msg


def test_wrong_type_names_field_path_and_allowed(cli, topo_copy: Path) -> None:
    text = topo_copy.read_text().replace("link_bw_gbs: 256.0", 'link_bw_gbs: "fast"')
    topo_copy.write_text(text)
    msg = _one_line_error(cli("topology", str(topo_copy)))
    assert "cube.noc.link_bw_gbs" in msg and "'fast'" in msg and "a number from 0.001 to 1000000" in msg


def test_out_of_range_value(cli, topo_copy: Path) -> None:
    topo_copy.write_text(topo_copy.read_text().replace("topology: ring_1d", "topology: star"))
    msg = _one_line_error(cli("probe", "--topology", str(topo_copy)))
    assert "system.sips.topology" in msg and "'ring_1d'" in msg and "'torus_2d'" in msg


def test_missing_required_link_is_a_compile_error(cli, topo_copy: Path) -> None:
    text = topo_copy.read_text() + '\ndisabled_links:\n  - ["sip0.cube3.pe2.pe_dma", "sip0.cube3.noc.r0c3"]\n'
    topo_copy.write_text(text)
    msg = _one_line_error(cli("topology", str(topo_copy)))
    assert "no link for sip0.cube3.pe2.pe_dma → sip0.cube3.noc.r0c3" in msg


def test_unknown_component_implementation_lists_known(cli, topo_copy: Path) -> None:
    topo_copy.write_text(topo_copy.read_text().replace("  router: forwarding", "  router: warp_drive"))
    msg = _one_line_error(cli("probe", "--topology", str(topo_copy), "--case", "pe-local-hbm"))
    assert "'warp_drive'" in msg and "forwarding" in msg and "hbm_ctrl" in msg


def test_unknown_case_lists_valid_names(cli) -> None:
    msg = _one_line_error(cli("probe", "--case", "no-such-case"))
    assert "no-such-case" in msg and "h2d-1hop" in msg and "contention-4flows" in msg


def test_missing_topology_file(cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    msg = _one_line_error(cli("topology", str(missing)))
    assert str(missing) in msg and "not found" in msg


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_traceback(cli, tmp_path: Path, where: str) -> None:
    missing = str(tmp_path / "nope.yaml")
    args = ["--debug", "topology", missing] if where == "before" else ["topology", missing, "--debug"]
    proc = cli(*args)
    assert proc.returncode == 2
    assert "Traceback (most recent call last)" in proc.stderr
