"""`kernbench run --links/--links-top`, `kernbench links` and `torch.link_stats()` end to end, with their errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernbench.cli.main import main
from kernbench.runtime import DPPolicy, session
from kernbench.sim.links import read_links
from kernbench.topology import load_topology

from .conftest import DEFAULT_TOPOLOGY, ROOT


@pytest.fixture(scope="module")
def gemm_links(tmp_path_factory):
    from .conftest import run_cli

    path = tmp_path_factory.mktemp("links") / "new" / "dir" / "gemm.links.json"  # folders made as needed
    proc = run_cli("run", "--bench", "gemm-single-pe", "--links", str(path), "--links-top", "4")
    assert proc.returncode == 0, proc.stderr
    return path, proc.stdout


def test_run_writes_the_links_that_carried_traffic_and_prints_the_top(gemm_links):
    path, stdout = gemm_links
    graph = load_topology(DEFAULT_TOPOLOGY)
    data = json.loads(path.read_text())
    assert data["schema"] == "kernbench.links/2" and data["edges"] == len(graph.edges)
    assert data["run"]["bench"] == "gemm-single-pe" and data["run"]["device"] == 0
    assert data["run"]["topology_file"] == "builtin:default" and data["run"]["topology"] == graph.spec.name
    order = [graph.edge_index(r["src"], r["dst"]) for r in data["links"]]
    assert order == sorted(order) and len(set(order)) == len(order)  # graph edge order, each link once
    assert data["links"] and all(r["bytes"] > 0 and r["packets"] > 0 and r["busy_ns"] > 0 for r in data["links"])
    assert all(r["kind"] == graph.edge(r["src"], r["dst"]).kind for r in data["links"])
    keys = {"src", "dst", "kind", "bw_gbs", "latency_ns", "bytes", "packets", "messages", "busy_ns", "utilisation",
            "max_wait_ns"}
    assert all(set(r) == keys for r in data["links"])
    report = read_links(path)
    top = report.busiest(4)
    lines = stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("busiest links of gemm-single-pe")))
    assert [line.split()[1] for line in lines[head + 2:head + 6]] == [r.src for r in top]
    assert f"links written to {path}" in stdout


def test_links_command_prints_top_and_draws_the_heatmap(gemm_links, cli, tmp_path):
    path, _ = gemm_links
    svg = tmp_path / "h" / "cube.svg"
    proc = cli("links", str(path), "--top", "2", "--heatmap", str(svg), "--scope", "cube")
    assert proc.returncode == 0, proc.stderr
    report = read_links(path)
    in_cube = [r for r in report.busiest() if r.src.startswith("sip0.cube0.") and r.dst.startswith("sip0.cube0.")]
    assert f"busiest here: {in_cube[0].src} → {in_cube[0].dst}" in svg.read_text()
    assert "heatmap of SIP 0 cube 0" in proc.stdout and proc.stdout.count("→") >= 3


@pytest.mark.parametrize(("args", "needle"), [
    (("run", "--bench", "gemm-single-pe", "--device", "all", "--links", "x.json"),
     "--links/--links-top describe one simulation, but --device all runs 2; pass one --device"),
    (("run", "--bench", "gemm-single-pe", "--links-top", "-1"), "--links-top -1 must be 0 or more"),
    (("links", "no/such/links.json"), "links file no/such/links.json does not exist"),
])
def test_links_errors_are_one_line(args, needle, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_malformed_and_mismatched_links_files(gemm_links, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)

    def error(*args: str) -> str:
        assert main(list(args)) == 2
        return capsys.readouterr().err

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "is not valid JSON (line 1, column 2" in error("links", str(bad))
    path, _ = gemm_links
    data = json.loads(path.read_text())
    data["run"]["topology_file"] = str(tmp_path / "gone.yaml")
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(data))
    assert "which does not exist here; pass --topology YAML" in error("links", str(moved), "--heatmap",
                                                                      str(tmp_path / "x.svg"))
    assert ("was recorded on another topology (ahbm-default): it was recorded on a topology of 10334 links but "
            "topology 'ahbm-6sip-ring-1d' has 30998") in error("links", str(path), "--heatmap", str(tmp_path / "x.svg"),
                                                      "--topology", "topologies/6sip_2x3_ring_1d.yaml")
    assert "must end in .svg, .png or .pdf" in error("links", str(path), "--heatmap", str(tmp_path / "x.gif"))


def test_the_heatmap_never_overwrites_its_inputs_and_a_failed_draw_keeps_the_old_file(gemm_links, tmp_path, capsys,
                                                                                      monkeypatch):
    monkeypatch.chdir(ROOT)
    path, _ = gemm_links
    copy = tmp_path / "copy.links.svg"  # a links file whose name ends like a heatmap
    copy.write_bytes(path.read_bytes())
    before = copy.read_bytes()
    assert main(["links", str(copy), "--heatmap", str(copy)]) == 2
    assert "--heatmap" in capsys.readouterr().err and copy.read_bytes() == before
    topo = tmp_path / "t.svg"
    topo.write_bytes(DEFAULT_TOPOLOGY.read_bytes())
    assert main(["links", str(path), "--heatmap", str(topo), "--topology", str(topo)]) == 2
    assert "is the topology file" in capsys.readouterr().err and topo.read_bytes() == DEFAULT_TOPOLOGY.read_bytes()
    old = tmp_path / "old.svg"
    old.write_text("the previous heatmap")
    assert main(["links", str(path), "--heatmap", str(old), "--scope", "cube", "--sip", "99"]) == 2
    assert old.read_text() == "the previous heatmap"
    from matplotlib.figure import Figure

    def half_written(self, out, **_kwargs):
        Path(out).write_text("<svg half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half_written)
    assert main(["links", str(path), "--heatmap", str(old), "--scope", "cube"]) == 2
    assert "No space left on device" in capsys.readouterr().err and old.read_text() == "the previous heatmap"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.links.svg", "old.svg", "t.svg"]  # no part files


def test_session_link_stats_shows_a_deployment_on_the_host_link():
    with session(DEFAULT_TOPOLOGY) as torch:
        assert torch.link_stats() == []
        t = torch.from_numpy(np.ones((16, 256), np.float16), DPPolicy(cube="row_wise", num_pes=1))
        stats = {(r.src, r.dst): r for r in torch.link_stats()}
        host = stats[("tray.host_cpu", "fabric.switch0")]
        assert host.bytes == t.nbytes == 8192 and host.kind == "pcie"
        assert host.utilisation == pytest.approx(host.busy_ns / torch.now_ns)
        assert len(torch.link_stats(include_idle=True)) == len(torch.graph.edges)


def test_the_link_stats_script_on_the_links_page_prints_what_the_page_shows(tmp_path):
    import re
    import subprocess
    import sys

    text = (ROOT / "docs" / "links.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)
    script = next(body for lang, body in blocks if lang == "python" and "link_stats()" in body)
    shown = next(body for lang, body in blocks if lang == "text" and "links carried traffic" in body)
    path = tmp_path / "link_stats_example.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, "docs/links.md shows stale output: rerun its script and paste what it prints"
