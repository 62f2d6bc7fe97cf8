"""The allreduce study: grid, critical-path step counts, the spec override, one run beside the α–β model, and the
links panel's per-link records against an independent run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kernbench.ccl import collective_span_ns
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.studies import allreduce_links
from kernbench.studies.allreduce import PAYLOADS, STUDY, overrides
from kernbench.studies.allreduce_model import exchange_steps, predict
from kernbench.studies.base import PointContext, SchemaError, StudyError
from kernbench.studies.graphs import study_graph
from kernbench.topology import compile_spec, spec_from_dict

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
TOPOLOGY_FILES = ("6sip_2x3_ring_1d.yaml", "6sip_2x3_torus_2d.yaml", "6sip_2x3_mesh_2d_no_wrap.yaml")
MESH = "6sip_2x3_mesh_2d_no_wrap.yaml"


def test_grid_has_the_three_panels():
    grid = STUDY.grid()
    panels = {}
    for p in grid:
        panels.setdefault(p.labels["panel"], []).append(p.params)
    assert len(PAYLOADS) >= 12 and PAYLOADS[0] == 16 and PAYLOADS[-1] == 96 * 1024
    assert len(panels["topology"]) == 3 * len(PAYLOADS)
    assert {p["topology"] for p in panels["topology"]} == {
        "6sip_2x3_ring_1d.yaml", "6sip_2x3_torus_2d.yaml", "6sip_2x3_mesh_2d_no_wrap.yaml"}
    assert {(p["buffer_kind"], p["bytes_per_pe"]) for p in panels["buffer_kind"]} == {
        (k, b) for k in ("tcm", "sram", "hbm") for b in PAYLOADS}
    sens = panels["sensitivity"]
    assert {p["bytes_per_pe"] for p in sens} == {65536}
    assert sorted({p["hbm_channel_gbs"] for p in sens}) == [16.0, 20.0, 24.0, 28.0, 32.0]


@pytest.mark.parametrize(("n", "wrap", "steps"), [
    (6, True, [2, 2, 1]),   # ring of six: 3 steps east, 2 west; the last step receives from one side only
    (3, True, [2]),         # torus row of three: one step, both neighbours
    (2, True, [1]),         # torus column of two: the one peer, once
    (3, False, [2, 1]),     # mesh row of three: the middle rank takes both ends, then the ends take the far one
    (2, False, [1]),
    (1, True, []),
])
def test_exchange_steps_follow_the_algorithm(n, wrap, steps):
    assert exchange_steps(n, wrap) == steps


@pytest.mark.parametrize(("file", "messages", "accumulates"), [
    # 4x4 cube mesh rooted at (1, 1): 2 + 2 reduction steps, 2 + 2 broadcast steps; then the SIP exchange
    ("6sip_2x3_ring_1d.yaml", 8 + 3, 4 + 5),
    ("6sip_2x3_torus_2d.yaml", 8 + 2, 4 + 3),
    ("6sip_2x3_mesh_2d_no_wrap.yaml", 8 + 3, 4 + 4),
])
def test_critical_path_counts(file, messages, accumulates):
    m = predict(study_graph(TOPOLOGIES, file), 1024, "tcm")
    assert (m.messages, m.accumulates) == (messages, accumulates)
    assert m.total_ns == pytest.approx(m.alpha_ns + m.beta_ns_per_byte * 1024)


def test_accumulate_term_is_the_closed_form():
    """a(N) per accumulate = 2c + 3N/B_r + 2N/B_w + 2 ceil(N/2/lanes)/clock with c = 40 cycles + 2 ns."""
    g = study_graph(TOPOLOGIES, "6sip_2x3_torus_2d.yaml")
    n = 65536
    per = 2 * 42.0 + 3 * n / 512 + 2 * n / 512 + 2 * (n // 2 // 64)
    assert predict(g, n, "tcm").accumulate_ns == pytest.approx(7 * per)


#: One SIP of 2 x 1 cubes with every constant of the message term moved off its default (no wire delay, so each
#: link's latency is its own fixed part).
TWO_CUBES = {
    "system": {"sips": {"count": 1, "grid": [1, 1]}},
    "sip": {"cube_mesh": {"w": 2, "h": 1}, "ucie": {"bw_gbs": 128.0, "latency_ns": 20.0}},
    "cube": {"noc": {"link_bw_gbs": 64.0, "router_overhead_ns": 3.0, "wire_ns_per_mm": 0.0}},
    "pe": {"clock_ghz": 2.0, "cpu_overhead_ns": 5.0, "scheduler_overhead_ns": 4.0, "internal_bw_gbs": 512.0,
           "tcm": {"read_bw_gbs": 256.0, "write_bw_gbs": 128.0}, "dma": {"overhead_ns": 7.0},
           "cost_model": {"fixed_cycles": 40.0}, "ipcq": {"overhead_ns": 6.0}},
    "fabric": {"flit_bytes": 256, "control_bytes": 64},
}


@pytest.mark.parametrize(("nbytes", "message_ns"), [(1024, 347.0), (4096, 539.0)])
def test_message_term_is_the_closed_form(nbytes, message_ns):
    """m(N) = c + o + α_w + α_r + N (1/B_tcm + 1/B_in + 1/B_out), worked out by hand on TWO_CUBES.

    PE 0 of cube 1 sends to the root, cube 0: 2 messages on the critical path (reduce and broadcast along a row
    of two cubes; one SIP, so no exchange). c = 40 cycles / 2 GHz + 5 = 25 ns; o = scheduler 4 + IPCQ 6 = 10 ns.
    α_w, the 256-byte head from the sender's TCM into the root's TCM: the overheads of 2 DMAs (7 each) and of
    7 routers (2 in cube 1, 5 in cube 0; 3 each) = 35 ns; the head on the TCM read side 256/256, on 9 NoC links
    256/64 each and on the root's TCM write side 256/128 = 39 ns; the UCIe link 256/128 + 20 = 22 ns; in all
    96 ns. α_r, the root's DMA copying out of its own ring: the 64-byte command 64/128, the head back 256/256 +
    256/128, the DMA's overhead 7 = 10.5 ns. So the fixed part is 25 + 10 + 96 + 10.5 = 141.5 ns, and per byte:
    staging 1/min(256, 128) + the route's narrowest link 1/64 + the copy out 1/min(128, 256) = 1/32 ns.
    m(1024) = 141.5 + 32 = 173.5 ns and m(4096) = 141.5 + 128 = 269.5 ns, twice each."""
    m = predict(compile_spec(spec_from_dict(TWO_CUBES)), nbytes, "tcm")
    assert m.messages == 2
    assert m.message_ns == pytest.approx(message_ns, rel=1e-12)


def test_inter_sip_message_pays_the_pcie_latency_once_per_link():
    """Two SIPs of 2 x 1 cubes on a ring: 2 intra-SIP messages and 1 exchange message, whose write crosses two
    PCIe links (SIP 1's endpoint to the switch, the switch to SIP 0's). Raising the PCIe latency by 50 ns adds
    1 x 2 x 50 = 100 ns to the messages and to the total, and nothing per byte."""
    def model(latency_ns: float):
        spec = {"system": {"sips": {"count": 2, "grid": [1, 2], "topology": "ring_1d"},
                           "pcie": {"latency_ns": latency_ns}},
                "sip": {"cube_mesh": {"w": 2, "h": 1}}}
        return predict(compile_spec(spec_from_dict(spec)), 2048, "tcm")

    slow, fast = model(80.0), model(30.0)
    assert (fast.messages, slow.messages) == (3, 3)
    assert slow.message_ns - fast.message_ns == pytest.approx(100.0, abs=1e-9)
    assert slow.total_ns - fast.total_ns == pytest.approx(100.0, abs=1e-9)
    assert slow.beta_ns_per_byte == pytest.approx(fast.beta_ns_per_byte, rel=1e-12)


def test_sensitivity_override_changes_only_the_channel_bandwidth():
    assert overrides({"hbm_channel_gbs": None}) == {}
    g = study_graph(TOPOLOGIES, "6sip_2x3_torus_2d.yaml", {"cube.hbm.channel_bw_gbs": 32.0})
    base = study_graph(TOPOLOGIES, "6sip_2x3_torus_2d.yaml")
    assert g.spec.cube.hbm.bw_gbs == 32.0 * base.spec.cube.hbm.pseudo_channels
    assert g.nodes["sip0.cube0.hbm_ctrl.pe0"].attrs["channel_bw_gbs"] == 32.0
    assert g.spec.pe == base.spec.pe and g.spec.sip == base.spec.sip
    # faster channels shorten the HBM-ring model, and leave the file alone
    assert predict(g, 65536, "hbm").total_ns < predict(base, 65536, "hbm").total_ns
    with pytest.raises(StudyError, match="positive"):
        study_graph(TOPOLOGIES, "6sip_2x3_torus_2d.yaml", {"cube.hbm.channel_bw_gbs": -1.0})
    with pytest.raises(StudyError, match="no field"):
        study_graph(TOPOLOGIES, "6sip_2x3_torus_2d.yaml", {"cube.hbm.nope": 1.0})


def test_one_torus_point_sits_just_above_its_model():
    r = STUDY.point({"topology": "6sip_2x3_torus_2d.yaml", "bytes_per_pe": 1024, "buffer_kind": "tcm",
                     "hbm_channel_gbs": None}, PointContext(TOPOLOGIES))
    assert r["sips"] == 6 and r["sip_topology"] == "torus_2d"
    # the model leaves out contention and send serialisation, so it may only be below the measurement, and close
    assert -0.15 <= r["model_error"] < 0
    # every one of the 16 cubes of 6 SIPs sends during the reduction and the broadcast
    assert r["ipcq_messages"] > 6 * 16


def test_odd_payload_is_a_study_error():
    with pytest.raises(StudyError, match="even"):
        STUDY.point({"topology": "6sip_2x3_torus_2d.yaml", "bytes_per_pe": 15, "buffer_kind": "tcm",
                     "hbm_channel_gbs": None}, PointContext(TOPOLOGIES))


# ------------------------------------------------------------------ the links panel


def test_links_panel_has_one_point_per_topology_and_only_it_records_links():
    grid = STUDY.grid()
    links = [p for p in grid if p.labels["panel"] == "links"]
    assert [p.params["topology"] for p in links] == list(TOPOLOGY_FILES)
    assert all(dict(p.params) == {"topology": p.params["topology"], "bytes_per_pe": 65536, "buffer_kind": "tcm",
                                  "hbm_channel_gbs": None, "link_stats": True} for p in links)
    assert not any("link_stats" in p.params for p in grid if p.labels["panel"] != "links")
    fields = {f.name: f for f in STUDY.fields}
    assert fields["links"].csv is False and all(f.csv for n, f in fields.items() if n != "links")


def _independent_run(file: str, nbytes: int):
    """The links panel's configuration run here, without the study's point function: its runtime."""
    graph = study_graph(TOPOLOGIES, file)
    torch = RuntimeContext(graph, data=False)
    spec = graph.spec

    def worker(rank: int) -> None:
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group(backend="ahbm", buffer_kind="tcm")
        torch.distributed.all_reduce(torch.empty((spec.cubes_per_sip, nbytes // 2), "float16",
                                                 DPPolicy(cube="row_wise", num_pes=1)))

    torch.multiprocessing.spawn(worker, nprocs=spec.system.sips.count)
    return torch


@pytest.fixture(scope="module")
def mesh_links():
    """The mesh's links point through the study, and the same configuration run independently."""
    (point,) = [p for p in STUDY.grid() if p.labels["panel"] == "links" and p.params["topology"] == MESH]
    record = STUDY.point(dict(point.params), PointContext(TOPOLOGIES))
    return point, record, _independent_run(MESH, point.params["bytes_per_pe"])


def test_links_record_is_what_an_independent_runs_link_stats_says(mesh_links):
    _, record, torch = mesh_links
    rows = allreduce_links.decode(record["links"])
    assert record["window_ns"] == torch.now_ns > 0
    expected = [(r.src, r.dst, r.kind, r.bytes, r.packets, r.busy_ns) for r in torch.link_stats() if r.bytes]
    assert [(r.src, r.dst, r.kind, r.bytes, r.packets, r.busy_ns) for r in rows] == expected
    assert record["links_used"] == len(rows) > 1000 and record["link_bytes"] == sum(r.bytes for r in rows)
    # the extra param changes nothing the engine does: same latency and event count as the same run without it
    assert record["allreduce_ns"] == collective_span_ns([res for _, res in torch.distributed.results])
    assert record["events"] == torch.engine.events


def test_links_record_conserves_bytes(mesh_links):
    point, record, torch = mesh_links
    rows = allreduce_links.decode(record["links"])
    window, nbytes = record["window_ns"], point.params["bytes_per_pe"]
    graph = study_graph(TOPOLOGIES, MESH)
    # the busiest link's utilisation is its busy time over the run window, and every link is busy at least for
    # its bytes at its bandwidth, within the window
    top = max(rows, key=lambda r: r.busy_ns)
    assert record["busiest_link"] == f"{top.src} → {top.dst}"
    assert record["busiest_utilisation"] == pytest.approx(top.busy_ns / window, rel=1e-12)
    assert all(r.bytes / graph.edge(r.src, r.dst).bw_gbs - 1e-6 <= r.busy_ns <= window for r in rows)
    # every IPCQ message's payload crosses at least one link
    assert record["link_bytes"] >= record["ipcq_messages"] * nbytes
    # the PCIe links carry exactly the inter-SIP messages of the op log: up from the sender's SIP, down into the
    # receiver's (nothing else crosses them: the tensors are allocated, not deployed, and control has no bytes)
    up, down = Counter(), Counter()
    for r in torch.oplog.records:
        if r.op_name == "ipcq_send":
            src, dst = r.component_id.split(".")[0], r.params["peer"].split(".")[0]
            if src != dst:
                up[f"{src}.io0.pcie_ep"] += r.params["nbytes"]
                down[f"{dst}.io0.pcie_ep"] += r.params["nbytes"]
    pcie = {(r.src, r.dst): r.bytes for r in rows if r.kind == "pcie"}
    assert pcie == {**{(ep, "fabric.switch0"): b for ep, b in up.items()},
                    **{("fabric.switch0", ep): b for ep, b in down.items()}}
    assert len(up) == len(down) == 6 and sum(up.values()) == sum(down.values()) >= 6 * nbytes


@pytest.mark.parametrize(("text", "needle"), [
    ("[[", "not valid JSON"),
    ('{"a": 1}', "expected a JSON array of rows"),
    ('[["a", "b", "router_mesh", 0, 1, 1.0]]', "row 0"),
    ('[["a", "b", "router_mesh", 4, 1, 1.0], ["a", "b", "router_mesh", 4, 1, 1.0]]', "listed twice"),
    (7, "expected a JSON text"),
])
def test_a_bad_links_value_is_a_schema_error(text, needle):
    with pytest.raises(SchemaError, match=needle):
        allreduce_links.decode(text)
