"""Layout rules of the report (ADR 0040): nothing runs off the page, nothing is hidden, the numbers live in a CSV.

The figure checks (:mod:`figure_checks`) run on every figure of every registered study, drawn from synthetic
results and, when a study run left them, from ``out/studies``; each check also has a planted failure, so a check
that stops looking fails here too.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from kernbench.studies import results as res
from kernbench.studies.base import StudyError
from kernbench.studies.figures import figures_of
from kernbench.studies.figures.common import new_figure, styled
from kernbench.studies.report import build
from kernbench.studies.report.hardware import assumed_fields
from kernbench.studies.report.numbers import CSV_COLUMNS, Numbers, split_source
from kernbench.studies.report.tables import table

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
REPORT = build.PACKAGED_SOURCE
STUDIES = ("gemm", "allreduce", "gqa", "moe")


# ------------------------------------------------------------------ overfull boxes


LOG = r"""(./main.tex (./generated/tab-wide.tex
Overfull \hbox (110.10246pt too wide) in paragraph at lines 6--24
 []\T1/lmr/m/n/9 ...
Overfull \hbox (0.6pt too wide) in paragraph at lines 30--31
)
LaTeX Warning: Float too large for page by 44.2pt on input line 132.
Overfull \vbox (3.0pt too high) has occurred while \output is active
"""


def test_overfull_boxes_above_the_limit_are_read_from_the_log():
    boxes = build.overfull_boxes(LOG)
    assert [(b.kind, b.pt) for b in boxes] == [("hbox", 110.10246), ("float", 44.2), ("vbox", 3.0)]
    assert "tab-wide.tex" in boxes[0].where  # names the file it is in: the table to fix
    assert build.overfull_boxes(LOG, limit_pt=200) == []


def test_the_build_fails_on_an_overfull_box(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(LOG)
    with pytest.raises(StudyError, match=r"3 overfull box\(es\) above 1 pt .*hbox 110.1 pt"):
        build.check_overfull(log)
    log.write_text("Overfull \\hbox (0.9pt too wide) in paragraph at lines 1--2\n")
    build.check_overfull(log)  # under the limit: fine


def test_a_table_wider_than_the_text_wraps_instead_of_running_off():
    header = ["shape", "staging", "tiles", "fill %", "measured ns", "model ns", "eff. %", "model eff. %", "error %",
              "bottleneck"]
    wide = table("tab:x", "c", header, [["512×512×512", "load_load", "4096", "100.0", "123456.7", "123456.7", "99.9",
                                         "99.9", "0.0", "dma_read"]], "llrrrrrrrl")
    assert r"\begin{tabularx}{\linewidth}{@{}llRRRRRRRl@{}}" in wide and r"\footnotesize" in wide
    narrow = table("tab:y", "c", ["loop", "µs"], [["opt1", "1.0"]], "lr")
    assert r"\begin{tabular}{@{}lr@{}}" in narrow and "tabularx" not in narrow


# ------------------------------------------------------------------ numbers.csv


@pytest.fixture(scope="module")
def generated(synthetic, tmp_path_factory, seed_figures):
    folder = tmp_path_factory.mktemp("layout")
    seed_figures(folder / "report")  # the figures of these results, drawn once for the test run
    for name in STUDIES:
        res.write(folder / "studies" / name, synthetic.synthetic_doc(name))
    return folder, build.generate(folder / "studies", REPORT, folder / "report", TOPOLOGIES)


def test_numbers_csv_has_one_row_per_macro_with_its_source(generated):
    folder, gen = generated
    rows = list(csv.reader(io.StringIO((folder / "report" / build.NUMBERS_CSV).read_text())))
    assert tuple(rows[0]) == CSV_COLUMNS
    macros = re.findall(r"\\newcommand\{\\(kb\w+)\}", (gen.tex_dir / "generated" / "numbers.tex").read_text())
    assert [r[0] for r in rows[1:]] == [f"\\{m}" for m in macros]
    numbers = json.loads((gen.tex_dir / "generated" / "numbers.json").read_text())
    by_macro = {r[0][1:]: dict(zip(CSV_COLUMNS, r, strict=True)) for r in rows[1:]}
    for name, n in numbers.items():
        row = by_macro[name]
        assert row["value"] == n["text"] and row["source file"] and (row["source file"] in n["source"])
    torus = by_macro["kbArTorusMax"]
    assert (torus["unit"], torus["source file"], torus["field"]) == ("µs", "out/studies/allreduce/results.json",
                                                                      "allreduce_ns")
    assert by_macro["kbGemmEffBigLoadLoad"]["point"] == "512x512x512 load_load"


def test_the_pdf_keeps_a_short_provenance_appendix_not_the_number_list(generated):
    _, gen = generated
    appendix = (gen.tex_dir / "generated" / "appendix-numbers.tex").read_text()
    assert "longtable" not in appendix and "numbers.csv" in appendix
    assert appendix.count(r"\begin{table}") == 2 and appendix.count(r"\\") < 40  # fits on one page


def test_a_source_splits_into_file_field_and_point():
    assert split_source("out/studies/gqa/results.json: latency_ns, headline prefill_c1") == \
        ("out/studies/gqa/results.json", "latency_ns", "headline prefill_c1")
    assert split_source("topologies/topology.yaml: cube.hbm.bw_gbs / cube.hbm.pseudo_channels") == \
        ("topologies/topology.yaml", "cube.hbm.bw_gbs / cube.hbm.pseudo_channels", "")
    nums = Numbers()
    nums.pct("kbX", 0.5, "the acceptance band")
    assert nums.csv_file().splitlines()[1] == r"\kbX,50.0,%,the acceptance band,,"


def test_the_gemm_model_error_table_has_a_row_per_series_and_staging_and_no_empty_cells(generated):
    """The GEMM model's error is reported whatever it is: one row per series and staging, never an empty table,
    and the claim counts the points inside both bands."""
    _, gen = generated
    errors = (gen.tex_dir / "generated" / "tab-gemm-model-error.tex").read_text()
    claims = (gen.tex_dir / "generated" / "claims.tex").read_text()
    assert r"\begin{table}" in errors and "none" not in errors
    body = errors.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0].strip().splitlines()
    assert body[0] == "% grounding: data rows" and body[-1] == "% grounding: end data rows"  # exempt: results
    assert [ln.split(" & ")[0] for ln in body[1:-1]] == [
        f"{series}, {v}" for series in ("shapes", "tiles") for v in (r"ref\_ref", r"load\_ref", r"load\_load")]
    assert r"\kbGemmWithinNarrow{}" in claims and r"\kbGemmErrMedian" in claims
    assert not (gen.tex_dir / "generated" / "tab-gemm-outliers.tex").exists()


def test_the_hardware_table_marks_the_fields_the_file_calls_assumed(generated):
    _, gen = generated
    assumed = assumed_fields((TOPOLOGIES / "topology.yaml").read_text())
    assert {"pe.math_lanes", "pe.ipcq.depth", "pe.dma.overhead_ns", "system.pcie.latency_ns"} <= assumed
    assert "pe.dma.read_channels" not in assumed and "pe.clock_ghz" not in assumed
    hw = (gen.tex_dir / "generated" / "hardware.tex").read_text()
    marked = [ln for ln in hw.splitlines() if r"$^\dagger$" in ln and r"\texttt{\footnotesize" in ln]
    assert marked and all(any(f.replace("_", r"\_") in ln for f in assumed) for ln in marked)
    assert r"$^\dagger$ are marked assumed" in hw


# ------------------------------------------------------------------ figures


def _docs(synthetic) -> list[tuple[str, dict | None]]:
    out = [("topology", None)] + [(f"synthetic {n}", synthetic.synthetic_doc(n)) for n in STUDIES]
    for n in STUDIES:
        path = ROOT / "out" / "studies" / n / res.RESULTS_JSON
        if path.is_file():
            try:
                out.append((f"out/studies {n}", res.load(path)))
            except Exception:  # a stale or partial run is not this test's business
                continue
    return out


def test_every_figure_passes_the_layout_checks(synthetic, fc):
    problems = []
    for where, doc in _docs(synthetic):
        specs = figures_of(None) if doc is None else figures_of(doc["study"])
        for spec in specs:
            if doc is None:
                fig = styled(spec.draw, TOPOLOGIES)
            else:
                fig = styled(spec.draw, doc, TOPOLOGIES) if spec.topologies else styled(spec.draw, doc)
            try:
                problems += [f"{where}: {spec.name}: {p}" for p in fc.all_problems(fig, spec.width)]
            finally:
                plt.close(fig)
    assert problems == []


def test_the_checks_catch_what_they_look_for(fc):
    fig, ax = styled(new_figure, 4, 3)
    ax.plot([1, 2, 3], [1, 2, 3], "o-", label="a")
    ax.plot([1, 2, 3], [1, 2, 3], "o-", label="b")  # exactly on a: hidden
    ax.bar([1.0], [2.5], 0.3, label="bar")
    ax.legend(loc="center", fontsize=12)  # over the data, larger than the axis labels
    ax.set_yscale("log")
    ax.set_ylim(1.5, 3.5)  # no decade: one labelled tick at most
    ax.set_xticks([1, 1.02], ["a long tick label", "another long one"])
    ax.set_title("(a) six SIPs, double-buffered")  # a typed count; the allowed phrase alone would pass
    try:
        assert fc.legend_overlaps(fig) and fc.legend_fonts(fig) and fc.log_axis_labels(fig)
        assert fc.hidden_series(fig) and fc.tick_label_overlaps(fig)
        assert fc.small_text(fig, 0.2)  # squeezed to a fifth of the text width
        assert fc.number_words(fig) == ["text '(a) six SIPs, double-buffered' spells a number as a word (six)"]
    finally:
        plt.close(fig)


def test_log_axes_label_several_ticks_even_within_a_decade(fc):
    from kernbench.studies.figures.common import log_ticks

    fig, ax = styled(new_figure, 4, 3)
    ax.plot(np.linspace(2, 40, 20), np.linspace(2.2, 45, 20))
    ax.set_yscale("log")
    log_ticks(ax.yaxis)
    try:
        assert fc.log_axis_labels(fig) == []
    finally:
        plt.close(fig)
