"""The all-reduce study against the earlier report: its payload grid, the least-squares α–β fit, the two ablations
(one cube per SIP, the one-way exchange) and the "Differences from the reference" table made from the results."""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from kernbench.benches.ccl_allreduce import SHARDS, rank_values
from kernbench.ccl import collective_span_ns, register_algorithm
from kernbench.runtime import RuntimeContext
from kernbench.studies import allreduce_oneway
from kernbench.studies.allreduce import STUDY, all_reduce_with_config, overrides, phase_split
from kernbench.studies.allreduce_model import fit_alpha_beta, one_way_steps, predict
from kernbench.studies.base import PointContext, StudyError
from kernbench.studies.graphs import study_graph
from kernbench.studies.report import allreduce_tex
from kernbench.studies.report.grounding import check_text
from kernbench.studies.report.numbers import Numbers

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
FILES = ("6sip_2x3_ring_1d.yaml", "6sip_2x3_torus_2d.yaml", "6sip_2x3_mesh_2d_no_wrap.yaml")
SEED_CLAIMS = allreduce_tex.SEED_CLAIMS


def _seed_grid() -> list[int]:
    """The earlier report's payloads per PE, as its claims file writes them (\\seedArPayloadGrid)."""
    (body,) = re.findall(r"\\newcommand\{\\seedArPayloadGrid\}\{([^}]*)\}", SEED_CLAIMS.read_text())
    return [int(x) for x in body.split(",")]


# ------------------------------------------------------------------ the payload grid


def test_every_panel_over_payloads_uses_the_reference_grid():
    grid = _seed_grid()
    assert len(grid) == int(allreduce_tex.seed_number("seedArPayloads")) == 12
    assert 128 in grid and 512 not in grid  # the earlier grid's 128 B, not our former 512 B
    for panel in ("topology", "exchange_only", "schedule"):
        for file in FILES:
            got = [p.params["bytes_per_pe"] for p in STUDY.grid()
                   if p.labels["panel"] == panel and p.params["topology"] == file]
            assert got == grid, (panel, file)
    kinds = [p.params for p in STUDY.grid() if p.labels["panel"] == "buffer_kind"]
    assert sorted({p["bytes_per_pe"] for p in kinds}) == grid


def test_seed_claims_are_read_from_the_claims_file():
    seeds = allreduce_tex.seed_claims()
    assert allreduce_tex.seed_number("seedArTorusMax", seeds) == 28.8
    assert allreduce_tex.seed_number("seedArTorusOverMeshSmall", seeds) == 1.57
    assert allreduce_tex.seed_kind_order(seeds) == ["tcm", "hbm", "sram"]
    with pytest.raises(KeyError):
        allreduce_tex.seed_number("seedArNoSuchClaim", seeds)


# ------------------------------------------------------------------ the least-squares fit


def test_the_fit_agrees_with_an_independent_numpy_computation():
    rng = np.random.default_rng(22)
    n = np.array(_seed_grid(), float)
    t = 2400.0 + 0.35 * n + rng.normal(0.0, 60.0, n.size) + 0.02 * np.sqrt(n) * 40  # not a straight line
    fit = fit_alpha_beta(n, t)
    beta, alpha = np.polyfit(n, t, 1)  # another solver: the normal equations of a degree-1 polynomial
    assert fit.alpha_ns == pytest.approx(alpha, rel=1e-9) and fit.beta_ns_per_byte == pytest.approx(beta, rel=1e-9)
    rel = (alpha + beta * n - t) / t
    assert fit.residuals == pytest.approx(tuple(rel), abs=1e-12)
    assert fit.max_rel == pytest.approx(np.abs(rel).max(), rel=1e-9)
    assert fit.rms_rel == pytest.approx(np.sqrt(np.mean(rel ** 2)), rel=1e-9)
    assert fit.max_rel > 0.001  # the points were not on a line, so the residuals are not zero


def test_the_fit_recovers_a_line_exactly_and_refuses_too_few_payloads():
    fit = fit_alpha_beta([16, 1024, 65536], [1016.0, 2024.0, 66536.0])
    assert (fit.alpha_ns, fit.beta_ns_per_byte) == (pytest.approx(1000.0), pytest.approx(1.0))
    assert fit.max_rel < 1e-12
    with pytest.raises(ValueError, match="two distinct payloads"):
        fit_alpha_beta([64, 64], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        fit_alpha_beta([16, 64], [1.0, 0.0])


def test_the_report_fits_the_topology_panel(synthetic):
    doc = synthetic.synthetic_doc("allreduce")
    nums = Numbers()
    allreduce_tex.generate(doc, nums)
    rows = [p["values"] for p in doc["points"] if p["labels"]["panel"] == "topology"
            and p["values"]["sip_topology"] == "torus_2d"]
    n = [p["params"]["bytes_per_pe"] for p in doc["points"] if p["labels"]["panel"] == "topology"
         and p["values"]["sip_topology"] == "torus_2d"]
    beta, alpha = np.polyfit(n, [r["allreduce_ns"] for r in rows], 1)
    assert nums.items["kbArTorusFitAlpha"].text == f"{alpha / 1e3:.2f}"  # 3 significant digits of a few µs
    assert nums.items["kbArTorusFitBeta"].text == f"{beta:.3f}"  # and of a fraction of a ns/B
    assert "least-squares fit" in nums.items["kbArTorusFitBeta"].source


# ------------------------------------------------------------------ the ablations


@pytest.mark.parametrize(("n", "wrap", "steps"), [
    (6, True, [1, 1, 1, 1, 1]),        # ring of six, one way: five steps, one accumulate each
    (3, True, [1, 1]),                 # torus row
    (2, True, [1]),                    # torus column
    (3, False, [1, 1, 0, 0]),          # mesh row: reduce to the east end, then broadcast back
    (1, False, []),
])
def test_one_way_steps(n, wrap, steps):
    assert one_way_steps(n, wrap) == steps


@pytest.mark.parametrize(("file", "lrab", "one_way"), [
    ("6sip_2x3_ring_1d.yaml", (3, 5), (5, 5)),
    ("6sip_2x3_torus_2d.yaml", (2, 3), (3, 3)),
    ("6sip_2x3_mesh_2d_no_wrap.yaml", (3, 4), (6, 3)),
])
def test_exchange_step_counts_of_both_schedules(file, lrab, one_way):
    g = study_graph(TOPOLOGIES, file)
    for schedule, want in (("lrab", lrab), ("one_way", one_way)):
        m = predict(g, 256, "tcm", schedule)
        assert (m.exchange_messages, m.exchange_accumulates) == want
    with pytest.raises(ValueError, match="unknown exchange schedule"):
        predict(g, 256, "tcm", "two_way")


@pytest.mark.parametrize("file", FILES)
def test_the_one_way_exchange_sums_exactly(file):
    """The ablation's kernel is a correct all-reduce: every shard of every rank ends as the exact sum."""
    graph = study_graph(TOPOLOGIES, file)
    torch = RuntimeContext(graph, data=True)
    spec = graph.spec
    world, cubes, n = spec.system.sips.count, spec.cubes_per_sip, 64
    out = {}
    register_algorithm(allreduce_oneway)  # as the study's point function does before it runs one
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "ccl.yaml"
        config.write_text(allreduce_oneway.CCL_YAML)

        def worker(rank: int) -> None:
            torch.ahbm.set_device(rank)
            torch.distributed.init_process_group(backend="ahbm", config=str(config))
            t = torch.from_numpy(rank_values(rank, cubes, n), SHARDS)
            torch.distributed.all_reduce(t)
            out[rank] = torch.peek(t)

        torch.multiprocessing.spawn(worker, nprocs=world)
    total = sum(rank_values(r, cubes, n).astype(np.float64).sum(axis=0) for r in range(world))
    assert sorted(out) == list(range(world))
    assert all((o.astype(np.float64) == total).all() for o in out.values())
    kernels = {r.params["kernel"] for r in torch.oplog.records if r.op_name == "kernel"}
    assert kernels == {allreduce_oneway.NAME}


def test_the_cube_mesh_override_and_its_errors():
    assert overrides({"cube_mesh": "1x1"}) == {"sip.cube_mesh.w": 1, "sip.cube_mesh.h": 1}
    assert overrides({"cube_mesh": None, "hbm_channel_gbs": 20.0}) == {"cube.hbm.channel_bw_gbs": 20.0}
    for bad in ("1", "0x1", "ax2", "2x"):
        with pytest.raises(StudyError, match="WxH"):
            overrides({"cube_mesh": bad})
    assert study_graph(TOPOLOGIES, FILES[1], overrides({"cube_mesh": "1x1"})).spec.cubes_per_sip == 1


@pytest.fixture(scope="module")
def small_points():
    """The smallest payload of the topology panel and of both ablations, for all three topologies."""
    out = {}
    for panel, extra in (("topology", {}), ("exchange_only", {"cube_mesh": "1x1"}),
                         ("schedule", {"schedule": "one_way"})):
        for file in FILES:
            params = {"topology": file, "bytes_per_pe": 16, "buffer_kind": "tcm", "hbm_channel_gbs": None, **extra}
            out[panel, file] = STUDY.point(params, PointContext(TOPOLOGIES))
    return out


def test_the_phases_add_up_and_only_the_exchange_depends_on_the_topology(small_points):
    for (panel, file), r in small_points.items():
        assert r["reduce_ns"] + r["exchange_ns"] + r["broadcast_ns"] == pytest.approx(r["allreduce_ns"], abs=1e-6)
        assert min(r["reduce_ns"], r["exchange_ns"], r["broadcast_ns"]) >= 0, (panel, file)
    for panel in ("topology", "schedule"):
        sip = {(r["reduce_ns"], r["broadcast_ns"]) for (p, _), r in small_points.items() if p == panel}
        assert len(sip) == 1 and min(next(iter(sip))) > 0
        exchange = {r["exchange_ns"] for (p, _), r in small_points.items() if p == panel}
        assert len(exchange) == 3
    for file in FILES:  # one cube per SIP: no reduction or broadcast inside a SIP, and a shorter all-reduce
        one = small_points["exchange_only", file]
        assert one["reduce_ns"] == one["broadcast_ns"] == 0.0
        assert one["allreduce_ns"] < small_points["topology", file]["allreduce_ns"]


def test_the_schedule_point_runs_the_one_way_exchange(small_points):
    lrab, one_way = small_points["topology", FILES[2]], small_points["schedule", FILES[2]]
    assert (lrab["exchange_messages"], one_way["exchange_messages"]) == (3, 6)
    assert one_way["allreduce_ns"] > lrab["allreduce_ns"]  # more serial steps, same SIP-internal phases
    assert abs(one_way["model_error"]) < 0.1


def test_phase_split_of_an_independent_run_matches_the_record(small_points):
    graph = study_graph(TOPOLOGIES, FILES[0])
    torch = RuntimeContext(graph, data=False)
    span = all_reduce_with_config(torch, 16, "tcm", allreduce_oneway.CCL_YAML)
    record = small_points["schedule", FILES[0]]
    assert span == record["allreduce_ns"] == collective_span_ns([res for _, res in torch.distributed.results])
    assert phase_split(torch) == {k: record[k] for k in ("reduce_ns", "exchange_ns", "broadcast_ns")}


# ------------------------------------------------------------------ the differences table


def _diff(doc: dict) -> tuple[str, Numbers, dict]:
    nums = Numbers()
    claims, files = allreduce_tex.generate(doc, nums)
    return files["tab-allreduce-differences.tex"], nums, claims


def _set(doc: dict, panel: str, topology: str, field: str, fn) -> None:
    for p in doc["points"]:
        if p["labels"]["panel"] == panel and p["values"]["sip_topology"] == topology:
            p["values"][field] = fn(p["values"][field])


def test_the_differences_table_is_made_of_macros_only(synthetic):
    table, nums, claims = _diff(synthetic.synthetic_doc("allreduce"))
    body = table.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0]
    assert check_text(body) == []  # no typed digit in any cell: every number is a \kb or \seed macro
    used = set(re.findall(r"\\((?:kb|seed)[A-Za-z]+)", body))
    seeds = allreduce_tex.seed_claims()
    assert used <= set(nums.items) | set(claims) | set(seeds) | {"kbArPayloads"}
    assert {"seedArRingFasterCount", "kbArRingFasterCount", "seedArTorusOverRingSmall", "kbArTorusOverRingSmall",
            "kbArExTorusOverRingSmall", "kbClaimArOwRingMesh", "kbClaimHbmSram"} <= used
    assert table.count(r"\\") == 4 + 1  # four rows and the header
    assert r"\begin{tabularx}{\linewidth}" in table  # a wide table wraps (ADR 0040)


def test_the_differences_table_follows_the_results(synthetic):
    doc = synthetic.synthetic_doc("allreduce")
    table, nums, _ = _diff(doc)
    assert "the same number of serial steps" in table
    before = {k: nums.items[k].text for k in ("kbArRingFasterCount", "kbArTorusOverRingSmall",
                                                 "kbArExTorusOverMeshSmall")}
    changed = copy.deepcopy(doc)
    # the ring becomes faster than the mesh at every payload, and the mesh's exchange one step longer
    _set(changed, "topology", "ring_1d", "allreduce_ns", lambda v: 0.5 * v)
    _set(changed, "topology", "mesh_2d_no_wrap", "exchange_messages", lambda v: v + 1)
    _set(changed, "exchange_only", "mesh_2d_no_wrap", "allreduce_ns", lambda v: 2.0 * v)
    table2, nums2, _ = _diff(changed)
    assert nums2.items["kbArRingFasterCount"].text == "12" != before["kbArRingFasterCount"]
    assert nums2.items["kbArTorusOverRingSmall"].text != before["kbArTorusOverRingSmall"]
    assert nums2.items["kbArExTorusOverMeshSmall"].text != before["kbArExTorusOverMeshSmall"]
    assert "more serial steps" in table2 and "the same number of serial steps" not in table2
    assert table2 != table
    # the plain version the documentation site shows has the values, not the macros
    (plain,) = [t for t in allreduce_tex.tables(changed) if t.label == "tab:allreduce-differences"]
    assert plain.rows[0][1:3] == ["12 of 12", "12 of 12"]
    assert not any("\\" in c for row in plain.rows for c in row)
