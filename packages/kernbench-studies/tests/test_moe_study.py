"""The moe study's grid, figures and report section, on a synthetic results document.

The document holds the study's whole grid (a registered study's results must) with values made up from simple
formulas of the point params (:func:`moe_values`): latencies near, not on, an α–β line per collective series, a
layer whose steps and per-expert histogram follow the routing and the degree, drops that fall with the capacity
factor, and dispatch links on real links of the torus. Tests then change single values to flip the section's
claims, and check the least-squares fits against numpy's own.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from kernbench.studies import results as res
from kernbench.studies.cache import file_digest
from kernbench.studies.figures import moe as figs
from kernbench.studies.figures import render_study
from kernbench.studies.figures.common import styled
from kernbench.studies.moe import (
    CAPACITIES,
    CAPACITY_SKEW,
    COLLECTIVES,
    DEGREES,
    LAYER,
    MOVE_STEPS,
    PAYLOADS,
    ROUTINGS,
    STEPS,
    STUDY,
    TOPOLOGIES,
    TORUS,
)
from kernbench.studies.report import build, moe_tex
from kernbench.studies.report.grounding import check_text
from kernbench.studies.report.numbers import Numbers, sig
from kernbench.studies.results import select

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGY_DIR = ROOT / "topologies"


# ------------------------------------------------------------------ the synthetic document

#: Made-up α (ns) and β (ns/B) per (series, SIP topology family); every point lies 2 % off its line, alternately
#: above and below, so a fit has residuals to report.
_ALPHA = {"pairwise": 2500.0, "hierarchical": 2800.0, "": 1500.0}
_BETA = {"pairwise": 0.02, "hierarchical": 0.025, "": 0.1}
_TOPO = {"ring_1d": 1.1, "torus_2d": 1.0, "mesh_2d_no_wrap": 1.2}


def _histogram(slots: int, distribution: str, skew: float | None) -> np.ndarray:
    """Token-slots per expert: even for balanced, falling as (i + 1)^-s otherwise (uniform: a mild s)."""
    s = 0.0 if distribution == "balanced" else 0.3 if distribution == "uniform" else float(skew)
    w = np.array([(i + 1) ** -s for i in range(LAYER.experts)])
    counts = np.floor(w / w.sum() * slots).astype(int)
    counts[: slots - counts.sum()] += 1  # the rest, one each to the first experts
    return counts


def moe_values(p: dict, links) -> dict:
    """Made-up values of one moe point (``links(topology, window_ns)`` gives a ``links`` text on real links)."""
    if p.get("placement"):  # the decoder block's panel, which this study's figures and section do not show
        attention, handoff = 20000.0, 1500.0 * (p["placement"] == "tensor")
        ffn = 30000.0 if p["ffn_kind"] == "dense" else 45000.0
        return {"sip_topology": "ring_1d", "sips": 2, "attention_ns": attention, "handoff_ns": handoff,
                "ffn_ns": ffn, "block_ns": attention + handoff + ffn, "events": 9000}
    if p.get("collective"):
        topo = p["topology"].removeprefix("6sip_2x3_").removesuffix(".yaml")
        algo = p["algorithm"].removeprefix("grid_all_to_all_")
        b = p["bytes_per_rank"]
        wiggle = 1.02 if PAYLOADS.index(b) % 2 else 0.98
        return {"sip_topology": topo, "sips": 6, "latency_ns": (_ALPHA[algo] + _BETA[algo] * b) * _TOPO[topo] * wiggle,
                "events": 1000 + b // 64}
    sips, cap = p["sips_used"], p["capacity_factor"]
    slots = LAYER.tokens * LAYER.topk * sips
    counts = _histogram(slots, p["distribution"], p["skew"])
    if cap is not None:
        counts = np.minimum(counts, moe_tex.per_expert(cap) * sips)
    dropped = slots - int(counts.sum())
    multi = sips > 1
    top = int(counts.max())
    steps = {"router": 700.0, "permute": 4000.0 * multi, "counts": 300.0 * sips * multi,
             "dispatch": (800.0 + 20.0 * top) * multi, "experts": 400.0 * top + 30000.0 / sips,
             "combine_exchange": (900.0 + 25.0 * top) * multi, "combine": 6000.0}
    total = sum(steps.values())
    out = {"sip_topology": "torus_2d", "sips": max(sips, 2), "moe_ns": total,
           **{f"{s}_ns": v for s, v in steps.items()},
           "move_share": sum(steps[s] for s in MOVE_STEPS) / total, "max_load": top,
           "mean_load": float(counts.mean()), "imbalance": float(top / counts.mean()), "dropped": dropped,
           "histogram": json.dumps([int(c) for c in counts]), "events": 5000 + sips}
    if p.get("link_stats"):
        window = steps["dispatch"]
        text = links(p["topology"], window)
        rows = json.loads(text)
        best = max(rows, key=lambda r: r[5])
        out.update({"window_ns": window, "links_used": len(rows), "link_bytes": sum(r[3] for r in rows),
                    "busiest_link": f"{best[0]} → {best[1]}", "busiest_utilisation": best[5] / window,
                    "links": text})
    return out


def moe_doc(links) -> dict:
    """A complete, valid results document of the moe study with :func:`moe_values`."""
    grid = STUDY.grid()
    points = [{"labels": dict(p.labels), "params": dict(p.params), "values": moe_values(dict(p.params), links)}
              for p in grid]
    files = sorted({f for p in grid for f in STUDY.files(dict(p.params))})
    run = {"argv": ["test"], "executor": "serial", "jobs": 1, "wall_s": 0.0, "points_run": len(points),
           "points_cached": 0, "point_wall_s": [0.01] * len(points)}
    provenance = {"packages": {"kernbench-studies": "test"}, "python": "test", "source_sha256": "0" * 64,
                  "git_commit": None, "topology_files": {f: file_digest(TOPOLOGY_DIR / f) for f in files}, "run": run}
    return res.validate(res.document(STUDY, points, provenance))


@pytest.fixture(scope="module")
def doc(synthetic) -> dict:
    return moe_doc(synthetic.synthetic_links)


def _edit(doc: dict, match: dict, **values) -> dict:
    """A copy of ``doc`` whose points matching ``match`` (labels and params) take ``values``."""
    out = copy.deepcopy(doc)
    for p in out["points"]:
        flat = {**p["labels"], **p["params"]}
        if all(flat.get(k) == v for k, v in match.items()):
            p["values"].update(values)
    return out


def _scale(doc: dict, match: dict, key: str, factor: float) -> dict:
    out = copy.deepcopy(doc)
    for p in out["points"]:
        flat = {**p["labels"], **p["params"]}
        if all(flat.get(k) == v for k, v in match.items()):
            p["values"][key] *= factor
    return out


def _claims(doc: dict) -> tuple[dict[str, str], Numbers, dict[str, str]]:
    nums = Numbers()
    claims, files = moe_tex.generate(doc, nums)
    return claims, nums, files


# ------------------------------------------------------------------ the grid


#: The panels this module's figures and report section show; the study's decoder panel
#: (:mod:`kernbench.studies.decoder`) and its fidelity panel (:mod:`kernbench.studies.fidelity`) come after them in
#: the grid and are not part of them.
SHOWN = {"collectives": 36, "expert_parallel": 20, "capacity": 7, "dispatch_links": 2}


def test_the_grid_has_65_points_in_the_four_panels_with_their_documented_params():
    grid = STUDY.grid()
    panels: dict[str, list[dict]] = {}
    for p in grid:
        panels.setdefault(p.labels["panel"], []).append(dict(p.params))
    shown = [p for p in grid if p.labels["panel"] in SHOWN]
    assert len(shown) == 65 and grid[:65] == tuple(shown)  # first in the grid, in this order
    assert {k: len(v) for k, v in panels.items() if k in SHOWN} == SHOWN
    assert set(panels) - set(SHOWN) <= {"decoder", "fidelity"}
    assert PAYLOADS == (4096, 16384, 65536, 131072)
    assert TOPOLOGIES == ("6sip_2x3_ring_1d.yaml", "6sip_2x3_torus_2d.yaml", "6sip_2x3_mesh_2d_no_wrap.yaml")
    assert {(p["collective"], p["algorithm"], p["topology"], p["bytes_per_rank"]) for p in panels["collectives"]} == {
        (c, a, t, b) for c, a in (("all_to_all", "grid_all_to_all_pairwise"),
                                  ("all_to_all", "grid_all_to_all_hierarchical"), ("all_gather", ""))
        for t in TOPOLOGIES for b in PAYLOADS}
    moe_keys = {"topology", "sips_used", "distribution", "skew", "capacity_factor"}
    assert all(set(p) == moe_keys for p in panels["expert_parallel"] + panels["capacity"])
    assert all(set(p) == moe_keys | {"link_stats"} and p["link_stats"] is True for p in panels["dispatch_links"])
    assert [(p["topology"], p["sips_used"]) for p in panels["expert_parallel"][::5]] == [
        ("topology.yaml", 1), ("topology.yaml", 2), ("6sip_2x3_torus_2d.yaml", 6), ("16sip_4x4_torus_2d.yaml", 16)]
    assert [(p["distribution"], p["skew"]) for p in panels["expert_parallel"][:5]] == [
        ("balanced", None), ("uniform", None), ("zipf", 0.8), ("zipf", 1.2), ("zipf", 2.0)]
    assert all(p["capacity_factor"] is None for p in panels["expert_parallel"] + panels["dispatch_links"])
    assert [p["capacity_factor"] for p in panels["capacity"]] == [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, None]
    assert all((p["topology"], p["sips_used"], p["distribution"], p["skew"]) == (TORUS, 6, "zipf", 1.2)
               for p in panels["capacity"])
    assert [(p["distribution"], p["skew"]) for p in panels["dispatch_links"]] == [("balanced", None),
                                                                                  ("zipf", CAPACITY_SKEW)]
    assert (LAYER.tokens, LAYER.hidden, LAYER.ffn, LAYER.experts, LAYER.topk, LAYER.shared) == (
        32, 256, 256, 48, 4, False)
    assert len(DEGREES) * len(ROUTINGS) == 20 and len(CAPACITIES) == 7 and len(COLLECTIVES) == 3
    assert set(STEPS) >= set(MOVE_STEPS) and "experts" not in MOVE_STEPS and "router" not in MOVE_STEPS


def test_every_field_a_point_records_is_declared_and_the_synthetic_document_is_valid(doc):
    fields = {f.name for f in STUDY.fields}
    for p in doc["points"]:
        assert set(p["values"]) <= fields
    assert res.validate(doc) is doc
    assert STUDY.report.tex == "generated/moe" and STUDY.figures == ("kernbench.studies.figures.moe:FIGURES",)


# ------------------------------------------------------------------ the α–β fits


def test_each_collective_fit_is_the_least_squares_line_numpy_finds(doc):
    fits = moe_tex.fits(doc)
    assert len(fits) == 9
    _, nums, _ = _claims(doc)
    for (collective, algorithm, topo), fit in fits.items():
        rows = figs.series_rows(doc, collective, algorithm, topo)
        x = np.array([r["bytes_per_rank"] for r in rows], float)
        y = np.array([r["latency_ns"] for r in rows])
        beta, alpha = np.polyfit(x, y, 1)
        (a2, b2), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)
        assert fit.alpha_ns == pytest.approx(alpha, rel=1e-9) == pytest.approx(a2, rel=1e-9)
        assert fit.beta_ns_per_byte == pytest.approx(beta, rel=1e-9) == pytest.approx(b2, rel=1e-9)
        rel = (alpha + beta * x - y) / y
        assert fit.max_rel == pytest.approx(np.max(np.abs(rel))) and fit.max_rel > 0.005  # the points are off it
        assert fit.rms_rel == pytest.approx(np.sqrt(np.mean(rel ** 2)))
        tag = moe_tex.series_tag(collective, algorithm) + moe_tex.TOPOLOGIES[topo]
        assert nums.items[f"kbMoeFit{tag}Alpha"].text == sig(alpha / 1e3, 3)
        assert nums.items[f"kbMoeFit{tag}Beta"].text == sig(beta, 3)
    worst = max(fits.values(), key=lambda f: f.max_rel)
    assert nums.items["kbMoeFitMaxAll"].text == f"{100 * worst.max_rel:.1f}"


def test_the_figure_draws_each_fit_as_its_dashed_line(doc):
    fig = styled(figs.draw_collectives, doc)
    fits = moe_tex.fits(doc)
    for ax, (collective, algorithm) in zip(fig.axes, figs.SERIES, strict=True):
        lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert len(lines) == 3
        for ln, topo in zip(lines, moe_tex._topologies(doc), strict=True):
            fit = fits[(collective, algorithm, topo)]
            x = np.asarray(ln.get_xdata(), float)
            assert np.allclose(np.asarray(ln.get_ydata(), float), (fit.alpha_ns + fit.beta_ns_per_byte * x) / 1e3)
        points = [ln for ln in ax.get_lines() if ln.get_linestyle() in ("None", "none", "")]
        assert sorted(ln.get_label() for ln in points) == sorted(moe_tex._topologies(doc))


# ------------------------------------------------------------------ claims follow the results


HIER = {"panel": "collectives", "algorithm": "grid_all_to_all_hierarchical"}
PAIR = {"panel": "collectives", "algorithm": "grid_all_to_all_pairwise"}


def _hierarchical_at(doc: dict, factor: float) -> dict:
    """``doc`` with every hierarchical all-to-all at ``factor`` times the pairwise one of its point."""
    out = copy.deepcopy(doc)
    pair = {(r["topology"], r["bytes_per_rank"]): r["latency_ns"] for r in select(doc, **PAIR)}
    for p in out["points"]:
        if p["params"].get("algorithm") == HIER["algorithm"]:
            p["values"]["latency_ns"] = factor * pair[(p["params"]["topology"], p["params"]["bytes_per_rank"])]
    return out


def test_the_algorithm_claim_follows_which_all_to_all_is_faster(doc):
    assert "faster than the pairwise one in every pair" in _claims(_hierarchical_at(doc, 0.9))[0][
        "kbClaimMoeAlgorithms"]
    assert "slower than the pairwise one in every pair" in _claims(_hierarchical_at(doc, 1.1))[0][
        "kbClaimMoeAlgorithms"]
    level = _claims(_hierarchical_at(doc, 1.0))[0]["kbClaimMoeAlgorithms"]
    assert "never faster" in level and "both algorithms take the same time" in level and "ring" in level
    mixed = _scale(_hierarchical_at(doc, 1.1), {**HIER, "topology": TORUS}, "latency_ns", 0.8)
    claim, nums = _claims(mixed)[:2]
    assert r"faster than the pairwise one in \kbMoeHierFaster{} and slower in \kbMoeHierSlower" in claim[
        "kbClaimMoeAlgorithms"]
    assert (nums.items["kbMoeHierFaster"].text, nums.items["kbMoeHierSlower"].text) == ("4", "8")


BALANCED = {"panel": "expert_parallel", "distribution": "balanced"}


def test_the_scaling_claim_says_grows_or_shrinks_from_the_results(doc):
    degrees = [d for _, d in DEGREES]
    up = doc
    for i, d in enumerate(degrees):
        up = _edit(up, {**BALANCED, "sips_used": d}, moe_ns=1e4 * (i + 1))
    claim = _claims(up)[0]["kbClaimMoeEpScaling"]
    assert claim.startswith("the layer time grows") and "rising at every step" in claim
    down = doc
    for i, d in enumerate(degrees):
        down = _edit(down, {**BALANCED, "sips_used": d}, moe_ns=1e4 * (len(degrees) - i))
    claim = _claims(down)[0]["kbClaimMoeEpScaling"]
    assert claim.startswith("the layer time shrinks") and "falling at every step" in claim
    dip = _edit(up, {**BALANCED, "sips_used": degrees[1]}, moe_ns=1.0)
    claims, nums, _ = _claims(dip)
    assert r"shortest at degree \kbMoeDegreeBest" in claims["kbClaimMoeEpScaling"]
    assert nums.items["kbMoeDegreeBest"].text == str(degrees[1])


def test_the_move_share_and_skew_claims_follow_the_results(doc):
    zipf = {"panel": "expert_parallel", "distribution": "zipf", "skew": CAPACITY_SKEW}
    lo, hi = DEGREES[0][1], DEGREES[-1][1]
    grows = _edit(_edit(doc, {**zipf, "sips_used": lo}, move_share=0.1), {**zipf, "sips_used": hi}, move_share=0.6)
    assert _claims(grows)[0]["kbClaimMoeMoveShare"].startswith("grows")
    shrinks = _edit(_edit(doc, {**zipf, "sips_used": lo}, move_share=0.6), {**zipf, "sips_used": hi},
                    move_share=0.1)
    assert _claims(shrinks)[0]["kbClaimMoeMoveShare"].startswith("shrinks")
    most = {"panel": "expert_parallel", "distribution": "zipf", "skew": max(s for d, s in ROUTINGS if s)}
    base = select(doc, **BALANCED, sips_used=lo)[0]["moe_ns"]
    faster = _edit(doc, {**most, "sips_used": lo}, moe_ns=0.5 * base)
    assert "the skewed routing is the faster" in _claims(faster)[0]["kbClaimMoeSkewLow"]
    slower = _edit(doc, {**most, "sips_used": lo}, moe_ns=2.0 * base)
    assert "the skew costs time too" in _claims(slower)[0]["kbClaimMoeSkewLow"]
    top = select(doc, **BALANCED, sips_used=hi)[0]["moe_ns"]
    assert "skew saves time" in _claims(_edit(doc, {**most, "sips_used": hi}, moe_ns=0.5 * top))[0]["kbClaimMoeSkew"]
    assert "skew costs time" in _claims(_edit(doc, {**most, "sips_used": hi}, moe_ns=2.0 * top))[0]["kbClaimMoeSkew"]


def test_the_capacity_claims_follow_the_results(doc):
    free = select(doc, panel="capacity", capacity_factor=None)[0]["moe_ns"]
    smallest = {"panel": "capacity", "capacity_factor": CAPACITIES[0]}
    shorter = _edit(doc, smallest, moe_ns=0.5 * free)
    claims, nums, _ = _claims(shorter)
    assert claims["kbClaimMoeCapTime"].startswith("dropping those token-slots shortens the layer")
    assert nums.items["kbMoeCapSaving"].text == "50.0"
    longer = _edit(doc, smallest, moe_ns=1.25 * free)
    claims, nums, _ = _claims(longer)
    assert claims["kbClaimMoeCapTime"].startswith("the drops do not shorten the layer")
    assert nums.items["kbMoeCapSaving"].text == "25.0"
    no_drop_from = _edit(doc, {"panel": "capacity", "capacity_factor": 2.0}, dropped=0)
    claims, nums, _ = _claims(no_drop_from)
    assert claims["kbClaimMoeCapZero"].startswith("From a capacity factor of")
    assert nums.items["kbMoeCapFactorNoDrop"].text == "2"
    always = _edit(doc, {"panel": "capacity", "capacity_factor": 2.0}, dropped=3)
    assert _claims(always)[0]["kbClaimMoeCapZero"].startswith("Even at a capacity factor of")


def test_the_dispatch_window_claim_follows_the_two_windows(doc):
    balanced = select(doc, panel="dispatch_links", distribution="balanced")[0]["window_ns"]
    zipf = {"panel": "dispatch_links", "distribution": "zipf"}
    claims, nums, _ = _claims(_edit(doc, zipf, window_ns=2 * balanced))
    assert claims["kbClaimMoeLinksWindow"].startswith("the skewed dispatch lasts")
    assert nums.items["kbMoeLinksZipfOverBalanced"].text == "2.00"
    claims, nums, _ = _claims(_edit(doc, zipf, window_ns=0.5 * balanced))
    assert claims["kbClaimMoeLinksWindow"].startswith("the skewed dispatch is the shorter")
    assert nums.items["kbMoeLinksZipfOverBalanced"].text == "0.50"


# ------------------------------------------------------------------ grounding


_MACRO = re.compile(r"\\(kb[A-Za-z]+)")


def test_the_generated_section_is_grounded_and_every_macro_it_uses_is_defined(doc):
    claims, nums, files = _claims(doc)
    assert set(files) == {"moe.tex", "tab-moe-fits.tex", "tab-moe-expert-parallel.tex", "tab-moe-capacity.tex",
                          "tab-moe-dispatch-links.tex", "tab-moe-decoder.tex"}
    for name, text in files.items():
        assert check_text(text, Path(name), data_rows=True) == [], name
    for name, text in claims.items():
        assert check_text(text, Path(name)) == [], name
    figures = build._figure_macros(figs.FIGURES)
    assert check_text(figures, Path("figures.tex")) == []
    figure_macros = set(re.findall(r"\\newcommand\{\\(kbFig[A-Za-z]+)\}", figures))
    used = {m for text in [*files.values(), *claims.values(), figures] for m in _MACRO.findall(text)}
    undefined = used - set(nums.items) - set(claims) - figure_macros
    assert undefined == set()
    section = files["moe.tex"]
    for label in ("fig:moe-collectives", "fig:moe-expert-parallel", "fig:moe-steps", "fig:moe-capacity",
                  "fig:moe-dispatch-links", "tab:moe-fits"):
        assert label in section or label in figures
    assert all(f"\\input{{generated/{n.removesuffix('.tex')}}}" in section for n in files if n.startswith("tab-"))


def test_a_number_typed_into_the_section_fails_the_check(doc, monkeypatch):
    monkeypatch.setattr(moe_tex, "SECTION", moe_tex.SECTION + "\nThe layer takes 42 µs on sixteen SIPs.\n")
    found = check_text(_claims(doc)[2]["moe.tex"], data_rows=True)
    assert [v.number for v in found] == ["42", "sixteen"]


def test_the_report_builds_the_section_from_all_four_studies(doc, synthetic, tmp_path):
    studies = tmp_path / "studies"
    for name in ("gemm", "allreduce", "gqa"):
        res.write(studies / name, synthetic.synthetic_doc(name))
    res.write(studies / "moe", doc)
    gen = build.generate(studies, build.PACKAGED_SOURCE, tmp_path / "report", TOPOLOGY_DIR)  # grounded, or raises
    generated = gen.tex_dir / "generated"
    assert r"\input{generated/moe}" in (generated / "study-sections.tex").read_text()
    assert (generated / "moe.tex").read_text() == moe_tex.SECTION
    assert all((gen.tex_dir / "figures" / f"{s.name}.pdf").is_file() for s in figs.FIGURES)
    assert "kbMoeFitPairwiseTorusAlpha" in gen.numbers.items and "kbMoePoints" in gen.numbers.items


# ------------------------------------------------------------------ figures and tables


@pytest.mark.parametrize("spec", figs.FIGURES, ids=lambda s: s.name)
def test_every_figure_draws_from_the_results_and_passes_the_layout_checks(doc, spec, fc):
    fig = styled(spec.draw, doc, TOPOLOGY_DIR) if spec.topologies else styled(spec.draw, doc)
    assert fc.all_problems(fig, spec.width) == []


def test_the_steps_and_capacity_figures_show_the_recorded_values(doc):
    fig = styled(figs.draw_steps, doc)
    rows = sorted(select(doc, panel="expert_parallel", distribution="zipf", skew=CAPACITY_SKEW),
                  key=lambda r: r["sips_used"])
    bars = fig.axes[0].patches
    assert len(bars) == len(STEPS) * len(rows)
    for i, step in enumerate(STEPS):
        heights = [b.get_height() for b in bars[i * len(rows):(i + 1) * len(rows)]]
        assert heights == pytest.approx([r[f"{step}_ns"] / 1e3 for r in rows])
    shares = [t.get_text() for t in fig.axes[0].texts]
    assert shares == [f"moving {100 * r['move_share']:.0f} %" for r in rows]
    fig = styled(figs.draw_capacity, doc)
    free = select(doc, panel="capacity", capacity_factor=None)[0]
    hist = fig.axes[2]
    assert [b.get_height() for b in hist.patches] == json.loads(free["histogram"])
    assert {t.get_text() for t in hist.get_legend().get_texts()} == {f"max {free['max_load']}",
                                                                    f"mean {free['mean_load']:.3g}"}
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][-1] == "∞ (none)"


def test_render_study_writes_every_figure(doc, tmp_path):
    paths = render_study(doc, tmp_path, ("svg",), TOPOLOGY_DIR)
    assert sorted(p.name for p in paths) == sorted(f"{s.name}.svg" for s in figs.FIGURES)


def test_the_tables_follow_the_results_and_render_for_the_docs(doc):
    tables = moe_tex.tables(doc)
    assert [t.label for t in tables] == ["tab:moe-fits", "tab:moe-expert-parallel", "tab:moe-capacity",
                                         "tab:moe-dispatch-links", "tab:moe-decoder"]
    fits, ep, cap, links, block = tables
    assert len(fits.rows) == 9 and len(ep.rows) == 20 and len(cap.rows) == 7 and len(links.rows) == 2
    assert [row[:2] for row in block.rows] == [[w, f] for f in ("dense FFN", "MoE") for w in
                                               ("tensor-parallel", "expert-parallel", "sequence-parallel")]
    for row in block.rows:  # the block is the sum of its parts
        r = next(x for x in select(doc, panel="decoder") if moe_tex.PLACEMENT_WORDS[x["placement"]] == row[0]
                 and (x["ffn_kind"] == "dense") == (row[1] == "dense FFN"))
        assert row[5] == sig(r["block_ns"] / 1e3, 4)
        assert r["block_ns"] == r["attention_ns"] + r["handoff_ns"] + r["ffn_ns"]
    for row in ep.rows:
        r = next(x for x in select(doc, panel="expert_parallel", sips_used=int(row[1]))
                 if figs.routing_label(x["distribution"], x["skew"]) == row[0])
        assert row[2] == sig(r["moe_ns"] / 1e3, 4) and row[6] == f"{100 * r['move_share']:.1f}"
    assert [row[0] for row in cap.rows][-1] == "none" and cap.rows[-1][1] == "none"
    assert [row[1] for row in cap.rows[:-1]] == [str(moe_tex.per_expert(f)) for f in CAPACITIES[:-1]]
    for t in tables:
        md = t.markdown()
        assert "\\kb" not in md and md.count("\n|") == len(t.rows) + 2
        assert check_text(t.latex(), data_rows=True) == []


def test_the_decoder_claims_name_the_fastest_placement_and_follow_the_results(doc):
    flipped = copy.deepcopy(doc)
    claims: dict[str, str] = {}
    moe_tex._decoder(doc, Numbers(), claims)
    fastest = min(select(doc, panel="decoder", ffn_kind="dense"), key=lambda r: r["block_ns"])
    assert claims["kbClaimMoeDecoderDense"].startswith(f"the {moe_tex.PLACEMENT_WORDS[fastest['placement']]} block")
    for p in flipped["points"]:  # make the slowest dense placement the fastest
        v = p["values"]
        if p["labels"]["panel"] == "decoder" and p["params"]["ffn_kind"] == "dense":
            v["block_ns"] = 1e6 - v["block_ns"]
    flipped_claims: dict[str, str] = {}
    moe_tex._decoder(flipped, Numbers(), flipped_claims)
    assert flipped_claims["kbClaimMoeDecoderDense"] != claims["kbClaimMoeDecoderDense"]
