"""The all-reduce on the 6-SIP torus: its links file conserves bytes, and its heatmap names the busiest link.

Conservation is checked against what the fabric model says a transfer puts on a link, recorded independently of
the engine's wire counters: every ``GraphEngine.send`` (writes, read commands of ``control_bytes``, read replies,
IPCQ copies) puts its ``nbytes`` on each link of its route in ``ceil(nbytes / packet_bytes)`` packets, and every
``send_control`` is one message of 0 bytes (a sideband). The file must hold exactly those sums for every
directed edge of the topology. The deployment is known in closed form: the host writes each rank's
``[cubes, CCL_BYTES / 2]`` f16 tensor, so the host link carries ``ranks × cubes × CCL_BYTES`` bytes.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

from kernbench.runtime import RuntimeContext
from kernbench.runtime.bench import discover
from kernbench.sim.links import read_links
from kernbench.topology import load_topology

from .conftest import ROOT

TORUS = ROOT / "topologies" / "6sip_2x3_torus_2d.yaml"
CCL_BYTES = 6000  # per PE: one full 4096-byte packet and a short 1904-byte one per shard


def expected_traffic(graph, monkeypatch) -> tuple[Counter, Counter, Counter, int]:
    """Run the all-reduce in-process, recording every transfer the engine is asked to make."""
    monkeypatch.setenv("CCL_BYTES", str(CCL_BYTES))
    torch = RuntimeContext(graph)
    eng = torch.engine
    sent: list[tuple[tuple[str, ...], int]] = []
    send, send_control = eng.send, eng.send_control

    def recording_send(request, route, nbytes, **kw):
        sent.append((route.nodes, nbytes))
        return send(request, route, nbytes, **kw)

    def recording_control(request, nodes, payload, **kw):
        sent.append((tuple(nodes), 0))
        return send_control(request, nodes, payload, **kw)

    eng.send, eng.send_control = recording_send, recording_control
    discover().resolve("ccl-allreduce").fn(torch)
    torch.wait_all()
    nbytes, packets, messages = Counter(), Counter(), Counter()
    for nodes, n in sent:
        for link in itertools.pairwise(nodes):
            nbytes[link] += n
            packets[link] += math.ceil(n / eng.packet_bytes)
            messages[link] += 1
    return nbytes, packets, messages, len(sent)


@pytest.fixture(scope="module")
def torus_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("allreduce")
    links = out / "torus.links.json"
    env = {**os.environ, "CCL_BYTES": str(CCL_BYTES)}
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "run", "--topology", str(TORUS), "--bench",
                           "ccl-allreduce", "--links", str(links), "--links-top", "3", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return out, links, json.loads(proc.stdout), proc.stderr


def test_allreduce_links_file_conserves_every_transfers_bytes(torus_run, monkeypatch):
    _, links, run, _ = torus_run
    graph = load_topology(TORUS)
    nbytes, packets, messages, transfers = expected_traffic(graph, monkeypatch)
    report = read_links(links)
    assert len(report.links) == len(graph.edges)  # one record per directed edge
    assert transfers > 1000 and sum(nbytes.values()) > 0
    wrong = [(r.label, (r.bytes, r.packets, r.messages), (nbytes[(r.src, r.dst)], packets[(r.src, r.dst)],
                                                          messages[(r.src, r.dst)]))
             for r in report.links
             if (r.bytes, r.packets, r.messages) != (nbytes[(r.src, r.dst)], packets[(r.src, r.dst)],
                                                      messages[(r.src, r.dst)])]
    assert not wrong, wrong[:5]
    # deployment in closed form: every rank's tensor crosses the host link once, in 4096-byte packets
    ranks, cubes = graph.spec.system.sips.count, graph.spec.cubes_per_sip
    host = report.by_edge()[("tray.host_cpu", "fabric.switch0")]
    assert host.bytes == ranks * cubes * CCL_BYTES and host.packets == ranks * cubes * 2
    # utilisation is busy time over the whole run, which ends with the run
    assert report.window_ns == pytest.approx(run["latency_ns"], rel=1e-9)  # the bench's first op starts at 0
    for r in report.links:
        assert 0.0 <= r.utilisation <= 1.0
        assert r.utilisation == pytest.approx(r.busy_ns / report.window_ns, rel=1e-12)
        if r.bytes:  # a wire is busy at least for its bytes at its bandwidth
            assert r.busy_ns >= r.bytes / r.bw_gbs - 1e-6


def test_links_top_goes_to_stderr_with_json_and_lists_the_busiest(torus_run):
    _, links, _, stderr = torus_run
    report = read_links(links)
    top = report.busiest(3)
    lines = stderr.splitlines()
    assert lines[0].startswith("busiest links of ccl-allreduce on ahbm-6sip-torus-2d (device 0)")
    assert [line.split()[1:4] for line in lines[2:5]] == [[r.src, "→", r.dst] for r in top]


def test_allreduce_heatmap_names_the_busiest_link(torus_run, cli):
    out, links, _, _ = torus_run
    svg = out / "heatmap.svg"
    proc = cli("links", str(links), "--top", "1", "--heatmap", str(svg))
    assert proc.returncode == 0, proc.stderr
    report = read_links(links)
    busiest = max(report.links, key=lambda r: (r.busy_ns, r.bytes))  # computed here, not by the command
    text = svg.read_text()
    assert f"busiest link of the run: {busiest.src} → {busiest.dst} ({100 * busiest.utilisation:.1f} %)" in text
    assert f"busiest here: {busiest.src} → {busiest.dst}" in text
    assert "Link utilisation: ccl-allreduce on ahbm-6sip-torus-2d (device 0)" in text
    assert "utilisation (% of the run window)" in text
    assert f"busiest link shown: {busiest.src} → {busiest.dst}" in proc.stdout
