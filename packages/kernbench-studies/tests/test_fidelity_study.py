"""Studies in flow fidelity (ADR 0039): ``--fidelity`` reaching every point, the cache key, the results' record of
the fidelity, every study's fidelity panel, its figure and its report section.

Most tests use made-up results (``studies_synthetic``) or a made-up study registered from code (no simulation);
one test runs a real GEMM point in both fidelities.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from kernbench.studies import fidelity as fid
from kernbench.studies import registry
from kernbench.studies import results as res
from kernbench.studies.base import (
    FIDELITY,
    FIDELITY_OF,
    FidelityPanel,
    Field,
    Point,
    PointContext,
    Study,
    StudyError,
)
from kernbench.studies.cache import CACHE_FORMAT, ResultCache, canonical, file_digest, key_parts, source_digest
from kernbench.studies.figures import fidelity as fig_fidelity
from kernbench.studies.figures import render_fidelity
from kernbench.studies.figures.common import styled
from kernbench.studies.report import fidelity_tex
from kernbench.studies.report.grounding import check_text
from kernbench.studies.report.numbers import Numbers
from kernbench.studies.runner import DEFAULT_OUT_FLOW, RunOptions, execute_point, out_dir, plan, run_studies

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
BUILTIN = ("gemm", "allreduce", "gqa", "moe")


@pytest.fixture(scope="module")
def docs(synthetic) -> dict[str, dict]:
    """Synthetic, validated results of the four built-in studies (their fidelity panels included)."""
    return {n: res.validate(synthetic.synthetic_doc(n)) for n in BUILTIN}


# ------------------------------------------------------------------ the panels in the grids


@pytest.mark.parametrize("name", BUILTIN)
def test_every_study_has_a_fidelity_panel_of_flow_copies_of_its_own_points(name):
    study = registry.get_study(name)
    assert isinstance(study.fidelity, FidelityPanel)
    grid = study.grid()
    copies = [p for p in grid if FIDELITY in p.params]
    packet = [p for p in grid if FIDELITY not in p.params]
    assert 5 <= len(copies) <= 20 and grid[-len(copies):] == tuple(copies)  # a small panel, last in the grid
    label = study.fidelity.label
    for c in copies:
        assert c.params[FIDELITY] == "flow" and c.labels[label] == FIDELITY
        base = {k: v for k, v in c.params.items() if k != FIDELITY}
        twins = [p for p in packet if dict(p.params) == base]
        assert twins, f"{name}: the copy {dict(c.params)} has no packet point in the grid"
        assert c.labels[FIDELITY_OF] in {p.labels[label] for p in twins}
        assert study.fidelity.latency(base) in study.units() and study.units()[study.fidelity.latency(base)] == "ns"
    assert len({json.dumps(dict(c.params), sort_keys=True) for c in copies}) == len(copies)  # no copy twice
    # a flow run runs every point but the copies (each would be its own point's flow run)
    assert study.points("flow") == tuple(packet) and study.points("packet") == grid


# ------------------------------------------------------------------ the cache key


def _old_key(study: Study, params: dict, topology_dir: Path) -> str:
    """A packet point's key as the cache made it before fidelities existed (written out here, not imported)."""
    files = {n: file_digest(topology_dir / n) for n in study.files(params)}
    parts = {"format": CACHE_FORMAT, "study": study.name, "params": params, "files": files,
             "overrides": study.overrides(params), "source": source_digest(study.modules)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@pytest.mark.parametrize("name", BUILTIN)
def test_the_cache_key_holds_the_fidelity_and_packet_keys_are_unchanged(name):
    study = registry.get_study(name)
    copy_ = next(p for p in study.grid() if FIDELITY in p.params)
    base = {k: v for k, v in copy_.params.items() if k != FIDELITY}
    packet = key_parts(study, base, TOPOLOGIES)
    assert packet.key() == _old_key(study, base, TOPOLOGIES)  # existing caches stay valid
    assert "fidelity" not in packet.as_json()
    flow = key_parts(study, base, TOPOLOGIES, "flow")
    assert flow.key() != packet.key() and flow.as_json()["fidelity"] == "flow"
    assert flow.as_json() == {**packet.as_json(), "fidelity": "flow"}
    # the panel's copy (its own fidelity param) and the same point of a --fidelity flow run share one entry
    assert key_parts(study, dict(copy_.params), TOPOLOGIES).key() == flow.key()
    assert key_parts(study, dict(copy_.params), TOPOLOGIES, "flow").key() == flow.key()


def test_a_flow_entry_is_never_served_to_a_packet_point(tmp_path):
    study = registry.get_study("gemm")
    params = {"series": "shapes", "topology": "topology.yaml", "variant": "load_load", "m": 32, "k": 32, "n": 32}
    cache = ResultCache(tmp_path)
    flow = key_parts(study, params, TOPOLOGIES, "flow")
    cache.put(flow, {"composite_ns": 99.0, "events": 7}, 0.1)
    assert cache.get(flow.key(), study)[0] == "hit"
    assert cache.get(key_parts(study, params, TOPOLOGIES).key(), study)[0] == "missing"
    assert cache.why(key_parts(study, params, TOPOLOGIES)) == "it has not run before"  # its own index entry


# ------------------------------------------------------------------ a made-up study: the mode reaches the points


def _tiny_point(params, ctx: PointContext) -> dict:
    """Records what it was given: the params it saw and the fidelity of its context."""
    assert FIDELITY not in params  # the runner takes the param out
    flow = ctx.fidelity == "flow"
    return {"latency_ns": 100.0 * params["x"] * (1.02 if flow else 1.0), "ran_flow": flow,
            "saw": ",".join(sorted(params)), "events": 10 if flow else 40}


def _tiny_grid() -> tuple[Point, ...]:
    points = [Point({"panel": "line"}, {"x": x}) for x in (1, 2, 4)]
    return (*points, *TINY_PANEL.twins(points[1:]))


TINY_PANEL = FidelityPanel(latency=lambda params: "latency_ns", describe=lambda params: f"x={params['x']}")


@pytest.fixture
def tiny():
    study = registry.register(Study(
        name="tinyfid", title="A tiny study", description="latency = 100 x", grid=_tiny_grid, point=_tiny_point,
        files=lambda params: (), overrides=lambda params: {}, modules=("kernbench.studies.base",),
        fields=(Field("panel", "", "panel"), Field("x", "1", "input"), Field("latency_ns", "ns", "latency"),
                Field("ran_flow", "", "ran in flow fidelity"), Field("saw", "", "params seen"),
                Field("events", "1", "events")),
        fidelity=TINY_PANEL))
    yield study
    registry.unregister("tinyfid")


def _run(study, tmp_path, fidelity="packet", out="packet"):
    return run_studies([study], RunOptions(executor="serial", out=tmp_path / out, topology_dir=TOPOLOGIES,
                                           progress=False, cache_root=tmp_path / "cache", fidelity=fidelity))


def test_the_fidelity_reaches_every_point_and_the_results_record_it(tiny, tmp_path):
    (done,) = _run(tiny, tmp_path)
    doc = res.load(done.results)
    assert doc["fidelity"] == "packet" and doc["provenance"]["fidelity"] == "packet"
    assert doc["command"] == "kernbench study tinyfid"
    ran = [(p["params"]["x"], p["params"].get(FIDELITY), p["values"]["ran_flow"]) for p in doc["points"]]
    assert ran == [(1, None, False), (2, None, False), (4, None, False), (2, "flow", True), (4, "flow", True)]
    assert {p["values"]["saw"] for p in doc["points"]} == {"x"}
    assert doc["fields"][FIDELITY]["unit"] == "" and FIDELITY_OF in doc["fields"]
    table = list(csv.DictReader(io.StringIO((done.results.parent / "results.csv").read_text())))
    assert [r[FIDELITY] for r in table] == ["packet", "packet", "packet", "flow", "flow"]
    # the default selection leaves the panel's copies out; asking for a fidelity finds them
    assert [r["x"] for r in res.select(doc)] == [1, 2, 4]
    assert [r["x"] for r in res.select(doc, fidelity="flow")] == [2, 4]

    (flow,) = _run(tiny, tmp_path, "flow", "flow")
    fdoc = res.load(flow.results)
    assert fdoc["fidelity"] == "flow" and fdoc["provenance"]["fidelity"] == "flow"
    assert fdoc["command"] == "kernbench study tinyfid --fidelity flow"
    assert [(p["params"], p["values"]["ran_flow"]) for p in fdoc["points"]] == [
        ({"x": 1}, True), ({"x": 2}, True), ({"x": 4}, True)]
    assert (flow.ran, flow.cached) == (1, 2)  # the panel's flow runs of x = 2 and 4 were cached already
    assert [r[FIDELITY] for r in csv.DictReader(io.StringIO((flow.results.parent / "results.csv").read_text()))] \
        == ["flow"] * 3
    assert fid.rows(fdoc) == []  # a flow run has no panel to compare
    (again,) = _run(tiny, tmp_path)
    assert (again.ran, again.cached) == (0, 5)


def test_a_flow_run_defaults_to_its_own_results_folder(tiny):
    assert out_dir(tiny, RunOptions(fidelity="flow"), False) == DEFAULT_OUT_FLOW / "tinyfid"
    assert out_dir(tiny, RunOptions(), False) == Path("out") / "studies" / "tinyfid"


def test_execute_point_runs_in_the_points_own_fidelity(tiny):
    values, _ = execute_point("tinyfid", {"x": 2, FIDELITY: "flow"}, str(TOPOLOGIES), "packet")
    assert values["ran_flow"] is True
    values, _ = execute_point("tinyfid", {"x": 2}, str(TOPOLOGIES), "flow")
    assert values["ran_flow"] is True
    values, _ = execute_point("tinyfid", {"x": 2}, str(TOPOLOGIES))
    assert values["ran_flow"] is False


def test_a_real_point_runs_in_flow_fidelity():
    """The GEMM study's point function builds its runtime in the context's fidelity: fewer engine events, the same
    composite time (GEMM moves data on one PE only: flow fidelity is exact there)."""
    params = {"series": "shapes", "topology": "topology.yaml", "variant": "ref_ref", "m": 32, "k": 128, "n": 32}
    study = registry.get_study("gemm")
    packet = study.point(params, PointContext(TOPOLOGIES))
    flow = study.point(params, PointContext(TOPOLOGIES, "flow"))
    assert flow["events"] < packet["events"]
    assert flow["composite_ns"] == pytest.approx(packet["composite_ns"], rel=1e-9)


@pytest.mark.parametrize("bad", ["exact", "", "FLOW", 3])
def test_a_bad_fidelity_is_one_study_error_naming_the_flag_and_the_values(bad):
    with pytest.raises(StudyError) as err:
        RunOptions(fidelity=bad).checked()
    assert str(err.value) == (f"--fidelity {str(bad)!r} is invalid; use packet (every packet on every link) or flow "
                              f"(every transfer one flow sharing its links max-min fairly)")
    with pytest.raises(StudyError, match="--fidelity"):
        plan([registry.get_study("gemm")], RunOptions(fidelity=bad, topology_dir=TOPOLOGIES))


# ------------------------------------------------------------------ the results' record


def test_a_results_file_must_say_a_known_fidelity_and_agree_with_its_provenance(docs):
    doc = copy.deepcopy(docs["gemm"])
    res.validate(doc)
    doc["fidelity"] = "exact"
    with pytest.raises(res.SchemaError, match="has fidelity 'exact'"):
        res.validate(doc)
    doc = copy.deepcopy(docs["gemm"])
    doc["provenance"]["fidelity"] = "flow"
    with pytest.raises(res.SchemaError, match="but its provenance says 'flow'"):
        res.validate(doc)
    doc = copy.deepcopy(docs["gemm"])
    doc["points"][-1]["params"][FIDELITY] = "approximate"
    with pytest.raises(res.SchemaError, match="param 'fidelity' is 'approximate'"):
        res.validate(doc)
    # a flow run's document holds the grid without the panel; the panel's copies are not points of it
    flow = copy.deepcopy(docs["gemm"])
    flow["fidelity"] = flow["provenance"]["fidelity"] = "flow"
    with pytest.raises(res.SchemaError, match="is not a point of study 'gemm'"):
        res.validate(flow)
    flow["points"] = [p for p in flow["points"] if FIDELITY not in p["params"]]
    flow["provenance"]["run"]["point_wall_s"] = flow["provenance"]["run"]["point_wall_s"][:len(flow["points"])]
    assert res.validate(flow) and res.select(flow, series="shapes")


# ------------------------------------------------------------------ the panel's records


def _independent_rows(doc: dict, study) -> list[tuple]:
    """(packet ns, flow ns, error, packet s, flow s) of every copy, found here by scanning the document."""
    walls = doc["provenance"]["run"]["point_wall_s"]
    out = []
    for i, p in enumerate(doc["points"]):
        if FIDELITY not in p["params"]:
            continue
        base = {k: v for k, v in p["params"].items() if k != FIDELITY}
        j = next(k for k, q in enumerate(doc["points"]) if q["params"] == base)
        field = study.fidelity.latency(base)
        a, b = doc["points"][j]["values"][field], p["values"][field]
        out.append((a, b, (b - a) / a, walls[j], walls[i]))
    return out


@pytest.mark.parametrize("name", BUILTIN)
def test_the_panel_pairs_each_copy_with_its_packet_point(docs, name):
    doc = docs[name]
    study = registry.get_study(name)
    rows = fid.rows(doc)
    expect = _independent_rows(doc, study)
    assert len(rows) == len(expect) == sum(FIDELITY in p.params for p in study.grid())
    for r, (a, b, err, wa, wb) in zip(rows, expect, strict=True):
        assert (r.packet_ns, r.flow_ns, r.packet_wall_s, r.flow_wall_s) == (a, b, wa, wb)
        assert r.error == pytest.approx(err, rel=1e-12, abs=1e-15)
        assert r.speedup == pytest.approx(wa / wb, rel=1e-12)
        assert r.study == name and r.point == study.fidelity.describe(doc["points"][r.packet_index]["params"])
    # nudge one flow latency: its error follows
    nudged = copy.deepcopy(doc)
    r0 = rows[0]
    nudged["points"][r0.flow_index]["values"][r0.field] *= 1.05
    moved = fid.rows(nudged)[0]
    assert moved.error == pytest.approx((r0.flow_ns * 1.05 - r0.packet_ns) / r0.packet_ns, rel=1e-12)
    assert moved.error != pytest.approx(r0.error)


def test_the_summary_and_the_classes(docs):
    rows = fid.all_rows(docs)
    s = fid.summary(rows)
    errors = sorted(abs(r.error) for r in rows)
    n = len(errors)
    median = errors[n // 2] if n % 2 else (errors[n // 2 - 1] + errors[n // 2]) / 2
    assert s.median_error == pytest.approx(median) and s.max_error == errors[-1]
    assert abs(s.worst.error) == errors[-1]
    assert s.reaching == tuple(r for r in rows if r.packet_wall_s / r.flow_wall_s >= 20.0)
    assert s.reaching and len(s.reaching) < len(rows)  # the synthetic results have points on both sides
    classes = fid.classes(rows)
    assert sum(len(c.rows) for c in classes) == len(rows)
    assert {(c.study, c.panel) for c in classes} == {(r.study, r.panel) for r in rows}
    assert fid.summary([]) is None


# ------------------------------------------------------------------ the figure


def test_the_figure_draws_one_marker_per_point_by_study(docs, fc):
    fig = styled(fig_fidelity.draw_speed_error, docs)
    try:
        ax = fig.axes[0]
        drawn = {ln.get_label().split(" (")[0]: ln for ln in ax.get_lines() if "points)" in ln.get_label()}
        assert list(drawn) == list(BUILTIN)
        for name, line in drawn.items():
            mine = [r for r in fid.rows(docs[name])]
            assert list(line.get_xdata()) == pytest.approx([r.packet_wall_s / r.flow_wall_s for r in mine])
            assert list(line.get_ydata()) == pytest.approx([100 * abs(r.flow_ns / r.packet_ns - 1) for r in mine])
        assert len({ln.get_color() for ln in drawn.values()}) == len(drawn)
        assert fc.all_problems(fig, fig_fidelity.FIGURES[0].width) == []
    finally:
        plt.close(fig)


def test_the_figure_is_redrawn_only_when_the_panels_change(docs, tmp_path):
    paths = render_fidelity(docs, tmp_path, ("svg",))
    assert [p.name for p in paths] == ["fidelity_speed_error.svg"]
    before = paths[0].stat().st_mtime_ns
    render_fidelity(docs, tmp_path, ("svg",))
    assert paths[0].stat().st_mtime_ns == before
    changed = copy.deepcopy(docs)
    r = fid.rows(changed["gqa"])[0]
    changed["gqa"]["provenance"]["run"]["point_wall_s"][r.flow_index] *= 10
    stamp = (tmp_path / ".fidelity.figures.sha256").read_text()
    render_fidelity(changed, tmp_path, ("svg",))
    assert (tmp_path / ".fidelity.figures.sha256").read_text() != stamp


# ------------------------------------------------------------------ the report section: numbers and claims


def _generate(docs: dict) -> tuple[dict[str, str], Numbers, dict[str, str]]:
    nums = Numbers()
    claims, files = fidelity_tex.generate(docs, nums)
    return claims, nums, files


def _scale_flow(docs: dict, factor: float, only: tuple[str, int] | None = None) -> dict:
    """A copy of ``docs`` whose fidelity-panel latencies are multiplied by ``factor`` (only the ``n``-th of study
    ``s`` when ``only`` is (s, n))."""
    out = copy.deepcopy(docs)
    for name, doc in out.items():
        for n, r in enumerate(fid.rows(doc)):
            if only is None or only == (name, n):
                doc["points"][r.flow_index]["values"][r.field] = r.packet_ns * factor
    return out


def _set_speedups(docs: dict, speedup: float) -> dict:
    out = copy.deepcopy(docs)
    for doc in out.values():
        walls = doc["provenance"]["run"]["point_wall_s"]
        for r in fid.rows(doc):
            walls[r.flow_index] = walls[r.packet_index] / speedup
    return out


def test_the_section_states_the_measured_numbers(docs):
    _, nums, files = _generate(docs)
    s = fid.summary(fid.all_rows(docs))
    assert nums.items["kbFidPoints"].text == str(len(s.rows))
    assert float(nums.items["kbFidErrMedian"].text) == pytest.approx(100 * s.median_error, rel=0.05)
    assert float(nums.items["kbFidErrMax"].text) == pytest.approx(100 * s.max_error, rel=0.05)
    assert nums.items["kbFidErrMedianBound"].text == "5" and nums.items["kbFidErrMaxBound"].text == "15"
    assert nums.items["kbFidSpeedupTarget"].text == "20"
    assert nums.items["kbFidSpeedMax"].text == "32.0" and "gqa" in nums.items["kbFidSpeedMaxPoint"].text
    assert {"fidelity.tex", "tab-fidelity-classes.tex", "tab-fidelity-points.tex"} <= set(files)


def test_the_error_claims_follow_the_results(docs):
    claims, _, _ = _generate(docs)
    assert claims["kbClaimFidError"].startswith(r"the median is within the bound")
    assert "the largest within the bound" in claims["kbClaimFidError"]
    # every flow latency 10 % long: the median passes its bound of 5 %, the largest stays under 15 %
    claims, _, _ = _generate(_scale_flow(docs, 1.10))
    assert claims["kbClaimFidError"].startswith(r"the median is above the bound")
    assert "the largest within the bound" in claims["kbClaimFidError"]
    # one moe point 20 % short: the largest passes its bound, and the claim names its class
    claims, nums, _ = _generate(_scale_flow(docs, 0.80, ("moe", 4)))
    assert claims["kbClaimFidError"].startswith(r"the median is within the bound")
    assert r"the largest is above the bound of \kbFidErrMaxBound{} on \kbFidErrOver{} points, in " \
           r"\texttt{moe expert\_parallel}" in claims["kbClaimFidError"]
    assert nums.items["kbFidErrOver"].text == "1" and "moe 2 SIPs" in nums.items["kbFidErrWorstPoint"].text


def test_the_speed_claims_follow_the_results(docs):
    claims, nums, _ = _generate(docs)
    text = claims["kbClaimFidSpeed"]
    reaching = nums.items["kbFidReaching"].text
    assert reaching == str(sum(r.speedup >= 20 for r in fid.all_rows(docs))) == "1"
    assert r"of the \kbFidPoints{} points reaches the target of \kbFidSpeedupTarget, in \texttt{gqa long\_context}" \
        in text
    assert r"(every point of" not in text  # long_context has slower points too
    misses = re.search(r"no point of (.*) reaches it", text).group(1)
    assert r"\texttt{gemm shapes}" in misses and r"\texttt{moe decoder}" in misses and "long" not in misses
    assert claims["kbClaimFidSlower"].startswith(r"On \kbFidSlower{} points flow fidelity ran slower")
    # the gemm points at the target too: two classes hold points at it, one of them whole
    both = copy.deepcopy(docs)
    for r in fid.rows(both["gemm"]):
        both["gemm"]["provenance"]["run"]["point_wall_s"][r.flow_index] = r.packet_wall_s / 21.0
    claims, nums, _ = _generate(both)
    assert nums.items["kbFidReaching"].text == "7"
    assert (r"points reach the target of \kbFidSpeedupTarget, all in \texttt{gemm shapes}, \texttt{gemm tiles} and "
            r"\texttt{gqa long\_context} (every point of \texttt{gemm shapes} and \texttt{gemm tiles})") \
        in claims["kbClaimFidSpeed"]
    # no point at the target: every class misses it
    claims, nums, _ = _generate(_set_speedups(docs, 3.0))
    assert claims["kbClaimFidSpeed"].startswith(r"no point reaches the target")
    assert "kbFidReaching" not in nums.items
    assert claims["kbClaimFidSlower"] == "Flow fidelity ran faster than packet fidelity on every point"
    # every point at the target
    claims, _, _ = _generate(_set_speedups(docs, 25.0))
    assert claims["kbClaimFidSpeed"] == r"every point reaches the target of \kbFidSpeedupTarget"
    # every point slower
    claims, _, _ = _generate(_set_speedups(docs, 0.5))
    assert claims["kbClaimFidSlower"] == "Flow fidelity ran slower than packet fidelity on every point"


def test_the_events_claim_compares_the_event_ratio_with_the_speed_up(docs):
    claims, nums, _ = _generate(docs)
    assert float(nums.items["kbFidEventsMedian"].text) == pytest.approx(8.0)  # the synthetic flow events are 1/8
    assert claims["kbClaimFidEvents"].startswith("more than it saves")
    claims, _, _ = _generate(_set_speedups(docs, 9.0))
    assert claims["kbClaimFidEvents"].startswith("no more than it saves")


def test_the_fastest_and_slowest_classes_come_from_the_results(docs):
    _, nums, _ = _generate(docs)
    classes = fid.classes(fid.all_rows(docs))
    best = max(classes, key=lambda c: c.median_speedup)
    assert nums.items["kbFidBestClass"].text == f"{best.study} {best.panel}"
    faster = _set_speedups(docs, 2.0)
    gemm = faster["gemm"]
    for r in fid.rows(gemm):
        gemm["provenance"]["run"]["point_wall_s"][r.flow_index] = r.packet_wall_s / 9.0
    _, nums, _ = _generate(faster)
    assert nums.items["kbFidBestClass"].text in ("gemm shapes", "gemm tiles")


def test_the_modes_claim_names_the_studies_simulated_in_flow(docs):
    claims, _, _ = _generate(docs)
    assert claims["kbClaimFidModes"] == "Every other result of this report was simulated in packet fidelity."
    flow = copy.deepcopy(docs)
    doc = flow["allreduce"]
    doc["fidelity"] = doc["provenance"]["fidelity"] = "flow"
    claims, _, _ = _generate(flow)
    assert claims["kbClaimFidModes"].startswith(r"The results of \texttt{allreduce} in this report were simulated in "
                                                "flow fidelity")


def test_without_a_panel_the_section_says_so_and_states_no_measurement(docs):
    bare = copy.deepcopy(docs)
    for doc in bare.values():
        doc["provenance"]["run"].pop("point_wall_s")  # no wall times: nothing to compare
    claims, nums, files = _generate(bare)
    assert set(files) == {"fidelity.tex"} and r"\kbClaimFidNoPanel" in files["fidelity.tex"]
    assert {n for n in nums.items} == {"kbFidErrMedianBound", "kbFidErrMaxBound", "kbFidSpeedupTarget"}
    assert check_text(files["fidelity.tex"] + "\n".join(claims.values()), Path("fidelity.tex")) == []


def test_the_section_is_grounded_and_every_macro_it_uses_is_defined(docs):
    claims, nums, files = _generate(docs)
    text = "\n".join(files.values()) + "\n" + "\n".join(claims.values())
    assert check_text(files["fidelity.tex"] + "\n".join(claims.values()), Path("fidelity.tex")) == []
    for name in ("tab-fidelity-classes.tex", "tab-fidelity-points.tex"):
        assert check_text(files[name], Path(name), data_rows=True) == []
    used = set(re.findall(r"\\(kb[A-Z][A-Za-z]*)", text))
    figure_macros = {"kbFigFidelitySpeedError"}
    assert used - set(nums.items) - set(claims) - figure_macros == set()
    planted = files["fidelity.tex"].replace(r"\kbFidSpeedMedian", "1.3x")
    assert check_text(planted, Path("fidelity.tex"))  # a typed speed-up fails the check


def test_the_tables_hold_the_rows_and_render_for_the_docs(docs):
    rows = fid.all_rows(docs)
    classes, points = fidelity_tex.tables(docs)
    assert len(points.rows) == len(rows) and len(classes.rows) == len(fid.classes(rows))
    first = rows[0]
    assert points.rows[0][:3] == [first.study, first.panel, first.point]
    assert float(points.rows[0][5]) == pytest.approx(100 * first.error, abs=0.005)
    assert "20×" in classes.markdown() and "| gqa | long_context | 8 |" in classes.markdown()


def test_the_report_inputs_the_section_after_the_studies(synthetic, tmp_path, seed_figures):
    from kernbench.studies.report import build

    studies = tmp_path / "studies"
    synthetic.write_synthetic(studies)
    seed_figures(tmp_path / "report")
    gen = build.generate(studies, None, tmp_path / "report", TOPOLOGIES)
    generated = gen.tex_dir / "generated"
    sections = [ln for ln in (generated / "study-sections.tex").read_text().splitlines() if ln.startswith("\\input")]
    assert sections[-1] == r"\input{generated/fidelity}"
    assert r"\newcommand{\kbFigFidelitySpeedError}" in (generated / "figures.tex").read_text()
    assert (gen.tex_dir / "figures" / "fidelity_speed_error.pdf").is_file()
    assert gen.numbers.items["kbFidPoints"].text == str(len(fid.all_rows(
        {n: res.load(studies / n) for n in BUILTIN})))


def test_canonical_is_the_json_the_key_hashes():  # the independent key above relies on it
    assert canonical({"b": 1, "a": [1.5]}) == json.dumps({"a": [1.5], "b": 1}, sort_keys=True,
                                                         separators=(",", ":"))
