"""One count of "links that carried traffic" everywhere: the links file, the web viewer and the heatmap agree on a
real run (the all-reduce on the default topology, whose control messages reach links that carry no bytes), and the
file holds exactly the links bytes crossed (``kernbench.sim.links.carried_traffic``)."""

from __future__ import annotations

import http.client
import json
import os
import re

import pytest

from kernbench.cli.web import ViewerServer, ViewerState
from kernbench.runtime.bench import discover, run_bench
from kernbench.sim.links import carried_traffic, link_records, read_links
from kernbench.topology import builtin

from .conftest import run_cli


@pytest.fixture(scope="module")
def allreduce(tmp_path_factory):
    """`kernbench run --bench ccl-allreduce --links FILE` on the default topology: (graph, links file)."""
    path = tmp_path_factory.mktemp("agree") / "allreduce.links.json"
    proc = run_cli("run", "--bench", "ccl-allreduce", "--links", str(path))
    assert proc.returncode == 0, proc.stderr
    return builtin(), path


def test_the_file_holds_exactly_the_links_bytes_crossed(allreduce):
    graph, path = allreduce
    data = json.loads(path.read_text())
    assert data["edges"] == len(graph.edges)
    in_file = [(r["src"], r["dst"]) for r in data["links"]]
    assert all(r["bytes"] > 0 for r in data["links"])
    # the same run in this process, every edge's counters: the file is its links with bytes, in edge order
    saved = os.environ.pop("CCL_BYTES", None)
    try:
        engine = run_bench(discover().resolve("ccl-allreduce"), graph, 0).engine
    finally:
        if saved is not None:
            os.environ["CCL_BYTES"] = saved
    every = link_records(engine, include_idle=True)
    assert in_file == [(r.src, r.dst) for r in every if r.bytes > 0]
    control_only = [r for r in every if r.messages and not r.bytes]
    assert control_only and not any(carried_traffic(r) for r in control_only)  # seen, yet not counted
    assert len(in_file) < len(every) // 5


def _served_links(graph, path) -> dict:
    server = ViewerServer(ViewerState(graph, None, str(path)), "127.0.0.1", 0).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/data/links.json")
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
    finally:
        server.stop()
    assert resp.status == 200
    return json.loads(body)


def test_file_viewer_and_heatmap_count_the_same_links(allreduce, tmp_path, cli):
    graph, path = allreduce
    in_file = len(json.loads(path.read_text())["links"])
    report = read_links(path)
    assert len(report.traffic()) == len(report.busiest()) == in_file
    # the viewer: the page says "N of M links carried traffic" with N = the served payload's links
    served = _served_links(graph, path)
    assert len(served["links"]) == in_file and served["edges"] == len(graph.edges)
    # the heatmap: `kernbench links --heatmap` counts the links it was given a value for, in its line and figure
    svg = tmp_path / "tray.svg"
    proc = cli("links", str(path), "--top", "0", "--heatmap", str(svg), "--scope", "system")
    assert proc.returncode == 0, proc.stderr
    shown, total = map(int, re.search(r"; (\d+) of the (\d+) links that carried traffic\)", proc.stdout).groups())
    assert total == in_file and 0 < shown <= total
    assert f"({shown} of the {in_file} with traffic)" in svg.read_text()
