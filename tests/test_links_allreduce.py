"""The all-reduce on the 6-SIP torus: its links file conserves bytes, and its heatmap names the busiest link.

Conservation is checked against what the fabric model says a transfer puts on a link, recorded independently of
the engine's wire counters while ``kernbench run --links`` runs: every ``GraphEngine.send`` (writes, read
commands of ``control_bytes``, read replies, IPCQ copies) puts its ``nbytes`` on each link of its route in
``ceil(nbytes / packet_bytes)`` packets, and every ``send_control`` is one message of 0 bytes (a sideband). The
file must hold exactly those sums for every directed edge of the topology. The deployment is known in closed
form: the host writes each rank's ``[cubes, CCL_BYTES / 2]`` f16 tensor, so the host link carries
``ranks × cubes × CCL_BYTES`` bytes.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
from collections import Counter

import pytest

from kernbench.cli.main import main
from kernbench.sim import GraphEngine
from kernbench.sim.links import read_links
from kernbench.topology import load_topology

from .conftest import ROOT

TORUS = ROOT / "topologies" / "6sip_2x3_torus_2d.yaml"
CCL_BYTES = 6000  # per PE: one full 4096-byte packet and a short 1904-byte one per shard


def sums(sent: list[tuple[tuple[str, ...], int]], packet_bytes: int) -> tuple[Counter, Counter, Counter]:
    """Bytes, packets and messages per link implied by the recorded transfers."""
    nbytes, packets, messages = Counter(), Counter(), Counter()
    for nodes, n in sent:
        for link in itertools.pairwise(nodes):
            nbytes[link] += n
            packets[link] += math.ceil(n / packet_bytes)
            messages[link] += 1
    return nbytes, packets, messages


@pytest.fixture(scope="module")
def torus_run(tmp_path_factory):
    """`kernbench run --links` of the all-reduce, with every transfer the engine is asked to make recorded."""
    out = tmp_path_factory.mktemp("allreduce")
    links = out / "torus.links.json"
    sent: list[tuple[tuple[str, ...], int]] = []
    send, send_control = GraphEngine.send, GraphEngine.send_control

    def recording_send(self, request, route, nbytes, **kw):
        sent.append((route.nodes, nbytes))
        return send(self, request, route, nbytes, **kw)

    def recording_control(self, request, nodes, payload, **kw):
        sent.append((tuple(nodes), 0))
        return send_control(self, request, nodes, payload, **kw)

    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CCL_BYTES", str(CCL_BYTES))
        mp.chdir(ROOT)
        mp.setattr(GraphEngine, "send", recording_send)
        mp.setattr(GraphEngine, "send_control", recording_control)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = main(["run", "--topology", str(TORUS), "--bench", "ccl-allreduce", "--links", str(links),
                           "--links-top", "3", "--json"])
    assert status == 0, stderr.getvalue()
    return out, links, json.loads(stdout.getvalue()), stderr.getvalue(), sent


def test_allreduce_links_file_conserves_every_transfers_bytes(torus_run):
    _, links, run, _, sent = torus_run
    graph = load_topology(TORUS)
    report = read_links(links)
    nbytes, packets, messages = sums(sent, report.fabric["packet_bytes"])
    assert report.edges == len(graph.edges)
    # the file lists exactly the links the transfers put bytes on (control messages alone do not count)
    assert {(r.src, r.dst) for r in report.links} == {link for link, n in nbytes.items() if n > 0}
    assert any(messages[link] and not nbytes[link] for link in messages)  # such control-only links exist
    assert len(sent) > 1000 and sum(nbytes.values()) > 0
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
    w = report.window_ns
    assert all(0.0 <= r.utilisation <= 1.0 and abs(r.utilisation * w - r.busy_ns) <= 1e-9 * w for r in report.links)
    # a wire is busy at least for its bytes at its bandwidth
    assert all(r.busy_ns >= r.bytes / r.bw_gbs - 1e-6 for r in report.links)


def test_links_top_goes_to_stderr_with_json_and_lists_the_busiest(torus_run):
    _, links, _, stderr, _ = torus_run
    report = read_links(links)
    top = report.busiest(3)
    lines = stderr.splitlines()
    assert lines[0].startswith("busiest links of ccl-allreduce on ahbm-6sip-torus-2d (device 0)")
    assert [line.split()[1:4] for line in lines[2:5]] == [[r.src, "→", r.dst] for r in top]


def test_allreduce_heatmap_names_the_busiest_link(torus_run, capsys, monkeypatch):
    out, links, _, _, _ = torus_run
    svg = out / "heatmap.svg"
    monkeypatch.chdir(ROOT)  # the links file names its topology relative to the repository
    assert main(["links", str(links), "--top", "1", "--heatmap", str(svg)]) == 0
    stdout = capsys.readouterr().out
    report = read_links(links)
    busiest = max(report.links, key=lambda r: (r.busy_ns, r.bytes))  # computed here, not by the command
    text = svg.read_text()
    assert f"busiest link of the run: {busiest.src} → {busiest.dst} ({100 * busiest.utilisation:.1f} %)" in text
    assert f"busiest here: {busiest.src} → {busiest.dst}" in text
    assert "Link utilisation: ccl-allreduce on ahbm-6sip-torus-2d (device 0)" in text
    assert "utilisation (% of the run window)" in text
    assert f"busiest link shown: {busiest.src} → {busiest.dst}" in stdout
