"""The gqa study's reference panel: the earlier report's workloads with its kernels (a user's folder) and ours, and
the zero-dispatch ablation.

The earlier team's own files are read from the seed folder when it exists (skipped elsewhere); everything else
uses small pointer-form kernels written here, so the mechanics are tested on every machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench.studies import gqa_reference as ref
from kernbench.studies.base import PointContext, StudyError
from kernbench.studies.cache import key_parts
from kernbench.studies.gqa import STUDY, ZERO_DISPATCH, grid
from kernbench.studies.graphs import study_graph

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
CTX = PointContext(TOPOLOGIES)
SEEDS = Path("/work/shared/seeds/extracted/src/kernbench/benches")

#: A stand-in for an earlier prefill_short kernel: one PE loads Q (Tq, d) and K^T (d, S) and multiplies them once.
FAKE_PREFILL = '''
def gqa_attention_prefill_short_kernel(q_ptr, k_ptr, v_ptr, o_ptr, T_q, S_kv, h_kv, d_head, C, P, kv_per_cube,
                                       *, tl):
    q = tl.load(q_ptr, shape=(T_q, d_head), dtype="f16")
    kt = tl.load(k_ptr, shape=(d_head, S_kv), dtype="f16")
    s = tl.dot(q, kt)
    tl.store(o_ptr, tl.dot(s, tl.load(v_ptr, shape=(S_kv, d_head), dtype="f16")))
'''


def _point(**params):
    return STUDY.point({"topology": "topology.yaml", **params}, CTX)


@pytest.fixture
def fake_folder(tmp_path, monkeypatch):
    (tmp_path / "_gqa_attention_prefill_short.py").write_text(FAKE_PREFILL)
    monkeypatch.setenv(ref.ENV, str(tmp_path))
    return tmp_path


def test_without_the_folder_only_our_kernels_run(monkeypatch):
    monkeypatch.delenv(ref.ENV, raising=False)
    points = [p.params for p in grid() if p.labels["panel"] == "reference"]
    assert {p["kernels"] for p in points if "workload" in p} == {"ours"}
    assert {(p["workload"], p["dispatch"]) for p in points if "workload" in p} == {
        (w.name, m) for w in ref.WORKLOADS for m in ("model", "zero")}
    assert sorted(p["name"] for p in points if p["panel"] == "headline") == sorted(
        ["prefill_c1", "prefill_c4_ring", "decode_c1_p8", "decode_c4_p8"])


def test_a_folder_missing_a_kernel_file_is_one_line(fake_folder):
    with pytest.raises(StudyError, match=r"_gqa_attention_prefill_long\.py is not there; point "
                                         r"KERNBENCH_EARLIER_KERNELS at the folder"):
        grid()


def test_the_kernel_file_keys_the_cache(fake_folder):
    w = ref.workload("single_user_prefill_gqa")
    path = fake_folder / "_gqa_attention_prefill_short.py"
    params = {"panel": "reference", "topology": "topology.yaml", "workload": w.name, "kernels": "earlier",
              "dispatch": "model", "kernel_digest": ref.kernel_digest(path)}
    key = key_parts(STUDY, params, TOPOLOGIES).key()
    path.write_text(FAKE_PREFILL + "\n# edited\n")
    changed = {**params, "kernel_digest": ref.kernel_digest(path)}
    assert key_parts(STUDY, changed, TOPOLOGIES).key() != key
    with pytest.raises(StudyError, match="changed since the study's grid was made"):
        _point(**params)


def test_an_earlier_kernel_runs_from_the_users_folder(fake_folder):
    """The stand-in's two GEMMs and three loads are the op log's; its window is its launch's."""
    r = _point(panel="reference", workload="single_user_prefill_gqa", kernels="earlier", dispatch="model")
    assert (r["op_gemm"], r["op_dma_read"], r["op_dma_write"], r["op_ipcq_copy"]) == (2, 3, 1, 0)
    assert r["pes_active"] == 1 and r["latency_ns"] > 0
    assert r["kv_bytes_total"] == 2 * 16 * 64 * 2  # K and V, S = 16 keys, d = 64, float16


def test_a_workload_without_an_earlier_kernel_says_so(fake_folder):
    with pytest.raises(StudyError, match="not among the earlier team's files; run it with kernels=ours"):
        _point(panel="reference", workload="multi_user_decode_gqa", kernels="earlier", dispatch="model")


def test_zero_dispatch_removes_exactly_the_dispatch_cost():
    """Same commands, no dispatch cycles, and the window shrinks by no more than the cycles the critical PE
    spent dispatching (1 GHz clock: cycles = ns)."""
    modelled = _point(panel="headline", name="prefill_c1")
    zero = _point(panel="headline", name="prefill_c1", dispatch="zero")
    assert modelled["commands"] == zero["commands"] > 0
    assert zero["dispatch_cycles"] == 0.0 and modelled["dispatch_cycles"] > 0
    assert modelled["op_gemm"] == zero["op_gemm"] and modelled["op_dma_read"] == zero["op_dma_read"]
    assert 0 < modelled["latency_ns"] - zero["latency_ns"] <= modelled["dispatch_cycles"]


def test_the_zero_dispatch_override_reaches_the_spec_and_only_there():
    spec = study_graph(TOPOLOGIES, "topology.yaml", ZERO_DISPATCH).spec
    assert (spec.pe.cost_model.fixed_cycles, spec.pe.cost_model.r_cycles_per_byte) == (0.0, 0.0)
    assert study_graph(TOPOLOGIES, "topology.yaml").spec.pe.cost_model.fixed_cycles == 40.0
    with pytest.raises(StudyError, match=r"'cube.hbm.bw_gbs' = 0.0: use a positive number"):
        study_graph(TOPOLOGIES, "topology.yaml", {"cube.hbm.bw_gbs": 0.0})
    with pytest.raises(StudyError, match=r"'pe.cost_model.fixed_cycles' = -1.0: use a number >= 0"):
        study_graph(TOPOLOGIES, "topology.yaml", {"pe.cost_model.fixed_cycles": -1.0})
    with pytest.raises(StudyError, match="dispatch='none'; use one of model, zero"):
        _point(panel="headline", name="prefill_c1", dispatch="none")


def test_ring_order_is_one_hop_per_step_when_rows_allow():
    spec = study_graph(TOPOLOGIES, "topology.yaml").spec
    assert spec.sip.cube_mesh.w == 4
    assert ref.ring_order(spec, 4) == [0, 1, 2, 3]
    order = ref.ring_order(spec, 8)
    assert sorted(order) == list(range(8))
    hops = [abs(a % 4 - b % 4) + abs(a // 4 - b // 4) for a, b in zip(order, order[1:] + order[:1], strict=True)]
    assert hops == [1] * 8


# ------------------------------------------------------------------------------------- the earlier team's files
@pytest.fixture
def seed_folder(monkeypatch):
    if not SEEDS.is_dir():
        pytest.skip(f"the earlier team's kernels are not here ({SEEDS} is only in the project's sandbox)")
    monkeypatch.setenv(ref.ENV, str(SEEDS))


def test_their_sweep_kernel_issues_the_operations_their_report_counts(seed_folder):
    """The earlier report's only sweep panel (8 cubes x 8 PEs, Tq = S = 1024, d = 128) with its own kernel: the
    GEMM and IPCQ counts are the report's; every IPCQ message also moves its bytes with one DMA read and one DMA
    write here, so the DMA counts are the report's plus one per message."""
    want = ref.REFERENCE[ref.SWEEP]
    r = _point(panel="reference", workload=ref.SWEEP, kernels="earlier", dispatch="model")
    assert (r["op_gemm"], r["op_ipcq_copy"]) == (want.gemm, want.ipcq_copy)
    assert r["op_dma_read"] - r["op_ipcq_copy"] == want.dma_read
    assert r["op_dma_write"] - r["op_ipcq_copy"] == want.dma_write
    assert r["pes_active"] == 64


@pytest.mark.parametrize("name", ["single_user_prefill_gqa", "multi_user_prefill_gqa", "single_user_decode_gqa"])
def test_their_headline_kernels_issue_the_operations_their_report_counts(seed_folder, name):
    want = ref.REFERENCE[name]
    r = _point(panel="reference", workload=name, kernels="earlier", dispatch="model")
    assert (r["op_gemm"], r["op_ipcq_copy"]) == (want.gemm, want.ipcq_copy)
    assert (r["op_dma_read"] - r["op_ipcq_copy"], r["op_dma_write"] - r["op_ipcq_copy"]) == (want.dma_read,
                                                                                               want.dma_write)


# ------------------------------------------------------------------------------------------- the report's part
def _row(workload, kernels, dispatch, latency, counts=None):
    claim = ref.REFERENCE.get(workload)
    gemm, ipcq, rd, wr = counts or ((claim.gemm, claim.ipcq_copy, claim.dma_read, claim.dma_write) if claim
                                    else (8, 4, 4, 1))
    values = {"latency_ns": latency, "op_gemm": gemm, "op_ipcq_copy": ipcq, "op_dma_read": rd + ipcq,
              "op_dma_write": wr + ipcq, "occupancy_pe_dma_ns": 300.0, "occupancy_pe_gemm_ns": 100.0}
    return {"labels": {"panel": "reference"}, "params": {"panel": "reference", "workload": workload,
                                                          "kernels": kernels, "dispatch": dispatch},
            "values": values}


def _doc(earlier_scale=1.0, zero_scale=0.5, decode4=1800.0, gemm_off=0):
    points = [{"labels": {"panel": "headline"}, "params": {"panel": "headline", "name": n},
               "values": {"latency_ns": lat}} for n, lat in
              (("prefill_c1", 1200.0), ("prefill_c4_ring", 2000.0), ("decode_c1_p8", 2400.0),
               ("decode_c4_p8", decode4))]
    for w in ref.WORKLOADS:
        base = ref.REFERENCE[w.name].latency_ns if w.name in ref.REFERENCE and ref.REFERENCE[w.name].latency_ns \
            else 5000.0
        for d, f in (("model", 1.0), ("zero", zero_scale)):
            points.append(_row(w.name, "ours", d, 0.5 * base * f))
            if w.kernel is not None:
                claim = ref.REFERENCE.get(w.name)
                counts = (claim.gemm + gemm_off, claim.ipcq_copy, claim.dma_read, claim.dma_write) if claim else None
                points.append(_row(w.name, "earlier", d, earlier_scale * base * f, counts))
    return {"points": points}


def _claims(doc):
    from kernbench.studies.report.gqa_reference_tex import generate
    from kernbench.studies.report.numbers import Numbers

    nums = Numbers()
    claims, text = generate(doc, nums)
    return claims, {n.name: n.text for n in nums.items.values()}, text


def test_the_report_part_follows_the_results():
    claims, nums, text = _claims(_doc())
    assert "exactly its GEMM operations" in claims["kbClaimGqaRefCounts"]
    assert "every latency the report gives lies between" in claims["kbClaimGqaBetween"]
    assert claims["kbClaimGqaEarlierOrder"].startswith("in the report's order")
    assert "faster than the single-user decode" in claims["kbClaimGqaHeadDecode"]
    words = {"kbGqaHereKernels", "kbGqaRefCubesDecodeEight"}  # text and counts printed as words
    value = {k: float(v) for k, v in nums.items()
             if k.startswith("kbGqa") and k not in words and not k.startswith("kbGqaRefName")}
    assert nums["kbGqaRefCubesDecodeEight"] == "eight" and nums["kbGqaRefNameDecodeEight"] == "8-cube decode"
    assert value["kbGqaEarlierOverRefLow"] == value["kbGqaEarlierOverRefHigh"] == 1.0
    assert value["kbGqaOursOverEarlierLow"] == value["kbGqaOursOverEarlierHigh"] == 0.5
    assert value["kbGqaRefDispatchShareLow"] == value["kbGqaRefDispatchShareHigh"] == 50.0
    assert value["kbGqaRefGemmPerOp"] == 1.024 and value["kbGqaHereDmaGemmLow"] == 3.0
    assert r"\input{generated/tab-gqa-ref-ops}" in text and "KERNBENCH" not in text

    claims, _, _ = _claims(_doc(earlier_scale=1.2, zero_scale=0.5))
    assert claims["kbClaimGqaBetween"] == ("every latency the report gives lies between this model's with and "
                                           "without the dispatch cost")
    claims, _, _ = _claims(_doc(gemm_off=1, earlier_scale=1.5, zero_scale=0.9, decode4=2500.0))
    assert "do not issue the operations" in claims["kbClaimGqaRefCounts"]
    assert claims["kbClaimGqaBetween"].startswith("no latency the report gives lies between")
    assert "slower than the single-user decode" in claims["kbClaimGqaHeadDecode"]


@pytest.mark.parametrize("kwargs", [{}, {"gemm_off": 1, "earlier_scale": 1.5, "zero_scale": 0.9, "decode4": 2500.0}])
def test_the_report_part_types_no_number_with_or_without_earlier_runs(kwargs):
    """Every sentence the comparison writes (claims and text, with the earlier kernels' runs and without) passes
    the report's grounding check: its numbers and the workloads' names are macros."""
    from kernbench.studies.report.grounding import check_text

    for doc in (_doc(**kwargs), _doc_without_earlier(_doc(**kwargs))):
        claims, _, text = _claims(doc)
        assert [str(v) for v in check_text(text)] == []
        assert {k: [v.number for v in check_text(c)] for k, c in claims.items() if check_text(c)} == {}


def _doc_without_earlier(doc):
    doc["points"] = [p for p in doc["points"] if p["params"].get("kernels") != "earlier"]
    return doc


def test_without_earlier_runs_the_report_says_why_the_column_is_empty():
    doc = _doc()
    doc["points"] = [p for p in doc["points"] if p["params"].get("kernels") != "earlier"]
    claims, nums, text = _claims(doc)
    assert "KERNBENCH\\_EARLIER\\_KERNELS" in text and "kbClaimGqaRefCounts" not in claims
    assert nums["kbGqaHereKernels"] == "our"


def test_the_quoted_numbers_are_the_earlier_reports_own():
    """reference/gqa.json against the earlier report's results files, where the seed documents are present."""
    import json

    seeds = SEEDS.parents[2]  # the extracted seed tree
    headline = seeds / "docs/report/1H-codesign-paper/figures/gqa_latency.json"
    sweep = SEEDS / "1H_milestone_output/gqa_headline/sweep.json"
    if not (headline.is_file() and sweep.is_file()):
        pytest.skip("the earlier report's results files are only in the project's sandbox")
    rows = json.loads(headline.read_text())["rows"] + json.loads(sweep.read_text())["rows"]
    assert {r["panel"] for r in rows} == set(ref.REFERENCE)
    for r in rows:
        got = ref.REFERENCE[r["panel"]]
        counts = r["op_log_summary"]
        assert (got.gemm, got.ipcq_copy, got.dma_read, got.dma_write) == (
            counts["gemm_count"], counts["ipcq_copy_count"], counts["dma_read_count"], counts["dma_write_count"])
        if "latency_ns" in r:
            assert got.latency_ns == pytest.approx(r["latency_ns"], rel=1e-9)
            busy = r["engine_occupancy_ns"]
            assert (got.gemm_busy_ns, got.math_busy_ns, got.dma_busy_ns) == pytest.approx(
                (busy["pe_gemm"], busy["pe_math"], busy["pe_dma"]), rel=1e-9)
        else:
            assert got.latency_ns is None


def _all_fake_kernels(folder: Path) -> None:
    for w in ref.WORKLOADS:
        if w.kernel is not None:
            (folder / f"_gqa_attention_{w.kernel}.py").write_text(FAKE_PREFILL.replace("prefill_short", w.kernel))


def test_results_read_with_or_without_the_earlier_points(synthetic, tmp_path, monkeypatch):
    """A report can be built where the earlier kernels are absent from results made with them, and the other way
    round; any other stray point is still refused."""
    import copy

    from kernbench.studies import results as res

    _all_fake_kernels(tmp_path)
    monkeypatch.setenv(ref.ENV, str(tmp_path))
    with_earlier = synthetic.synthetic_doc("gqa")
    assert any(p["params"].get("kernels") == "earlier" for p in with_earlier["points"])
    monkeypatch.delenv(ref.ENV)
    without = synthetic.synthetic_doc("gqa")
    res.validate(copy.deepcopy(with_earlier))
    monkeypatch.setenv(ref.ENV, str(tmp_path))
    res.validate(copy.deepcopy(without))
    stray = copy.deepcopy(without)
    stray["points"].append(copy.deepcopy(stray["points"][0]))
    stray["points"][-1]["params"]["name"] = "decode_c9"
    with pytest.raises(StudyError, match="is not a point of study 'gqa'"):
        res.validate(stray)
