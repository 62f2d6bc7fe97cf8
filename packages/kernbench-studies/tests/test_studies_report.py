"""Results files, figures and the report: schema checks, determinism, grounding, and numbers reaching the PDF."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernbench.studies import results as res
from kernbench.studies.base import SchemaError, StudyError
from kernbench.studies.figures import render_study
from kernbench.studies.report import build
from kernbench.studies.report.grounding import check_sections, check_text
from kernbench.topology.errors import KernbenchError

ROOT = Path(__file__).resolve().parents[3]
REPORT = build.PACKAGED_SOURCE  # the report's LaTeX sources: package data of kernbench-studies
TOPOLOGIES = ROOT / "topologies"


# ------------------------------------------------------------------ results files


def test_results_round_trip_and_csv(synthetic, tmp_path):
    doc = synthetic.synthetic_doc("allreduce")
    j, c = res.write(tmp_path, doc)
    assert res.load(tmp_path) == doc == json.loads(j.read_text())
    header, first = c.read_text().splitlines()[:2]
    assert header.split(",")[:5] == ["panel", "topology", "bytes_per_pe", "buffer_kind", "hbm_channel_gbs"]
    assert first.startswith("topology,6sip_2x3_ring_1d.yaml,16,tcm,,")
    assert doc["fields"]["allreduce_ns"]["unit"] == "ns" and doc["schema_version"] == res.SCHEMA_VERSION


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda d: d.update(schema_version=99), "schema version 99; this kernbench reads version 1"),
    (lambda d: d.update(schema="other"), "has schema 'other'"),
    (lambda d: d.pop("points"), "field 'points' is missing"),
    (lambda d: d["points"][0]["values"].update(mystery=1.0), "value 'mystery' has no unit"),
])
def test_a_bad_results_file_is_a_schema_error(synthetic, tmp_path, mutate, match):
    doc = synthetic.synthetic_doc("gemm")
    mutate(doc)
    (tmp_path / "results.json").write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=match):
        res.load(tmp_path / "results.json")


@pytest.mark.parametrize(("bad", "shown"), [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
def test_a_non_finite_point_value_is_refused_by_name(synthetic, tmp_path, bad, shown):
    """Python's json writes NaN, Infinity and -Infinity and reads them back; a results file holding one is
    refused, naming the point and the field, and saying how to get a good file."""
    doc = synthetic.synthetic_doc("gemm")
    doc["points"][3]["values"]["composite_ns"] = bad
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))  # allow_nan is json's default
    assert "NaN" in path.read_text() or "Infinity" in path.read_text()
    with pytest.raises(SchemaError) as err:
        res.load(path)
    assert isinstance(err.value, KernbenchError)
    assert f"point 3 value 'composite_ns' is {shown};" in str(err.value)
    assert str(path) in str(err.value) and "regenerate it with `kernbench study NAME`" in str(err.value)
    doc["points"][3]["values"]["composite_ns"] = 177.5  # the same file with a finite value loads
    path.write_text(json.dumps(doc))
    assert res.load(path)["points"][3]["values"]["composite_ns"] == 177.5


def test_missing_or_broken_results_files(tmp_path):
    with pytest.raises(SchemaError, match="does not exist; run `kernbench study NAME` first"):
        res.load(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        res.load(tmp_path)


def test_the_figure_step_refuses_a_wrong_schema_version(synthetic, tmp_path):
    doc = synthetic.synthetic_doc("gemm")
    doc["schema_version"] = 2
    with pytest.raises(SchemaError, match="schema version 2"):
        render_study(doc, tmp_path, topology_dir=TOPOLOGIES)
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ figures


def test_figures_are_deterministic_and_undated(synthetic, tmp_path):
    doc = synthetic.synthetic_doc("allreduce")
    a = render_study(doc, tmp_path / "a", topology_dir=TOPOLOGIES)
    b = render_study(copy.deepcopy(doc), tmp_path / "b", topology_dir=TOPOLOGIES)
    assert [p.name for p in a] == [p.name for p in b] and len(a) == 14  # 4 curves + 3 heatmaps, SVG and PDF
    for pa, pb in zip(a, b, strict=True):
        assert pa.read_bytes() == pb.read_bytes(), pa.name
    svg = (tmp_path / "a" / "allreduce_topologies.svg").read_text()
    assert "<dc:date>" not in svg and "µs" in svg and "payload per PE (bytes" in svg  # axis labels with units
    pdf = (tmp_path / "a" / "allreduce_topologies.pdf").read_bytes()
    assert b"/CreationDate" not in pdf and b"/ModDate" not in pdf
    # a changed run record (wall times) does not redraw; a changed value does
    mtime = (tmp_path / "a" / "allreduce_sensitivity.svg").stat().st_mtime_ns
    doc["provenance"]["run"]["wall_s"] = 99.0
    render_study(doc, tmp_path / "a", topology_dir=TOPOLOGIES)
    assert (tmp_path / "a" / "allreduce_sensitivity.svg").stat().st_mtime_ns == mtime
    (sens,) = [p for p in doc["points"] if p["labels"]["panel"] == "sensitivity" and p["params"]["buffer_kind"] == "hbm"
               and p["params"]["hbm_channel_gbs"] == 32.0]
    sens["values"]["allreduce_ns"] *= 1.5
    render_study(doc, tmp_path / "a", topology_dir=TOPOLOGIES)
    assert (tmp_path / "a" / "allreduce_sensitivity.svg").read_bytes() != (
        tmp_path / "b" / "allreduce_sensitivity.svg").read_bytes()


# ------------------------------------------------------------------ grounding


def test_the_report_sections_contain_no_hand_typed_number():
    assert check_sections(REPORT / "sections") == []


def test_grounding_catches_a_planted_latency(tmp_path):
    sections = tmp_path / "sections"
    shutil.copytree(REPORT / "sections", sections)
    target = sections / "04-allreduce.tex"
    target.write_text(target.read_text().replace(r"\textbf{Topology.}", r"\textbf{Topology.} It takes 36.4~\textmu s.",
                                                 1))
    (v,) = check_sections(sections)
    assert v.path == target and v.number == "36.4" and "36.4" in str(v)


@pytest.mark.parametrize(("text", "numbers"), [
    (r"the SIPs as a 2$\times$3 grid on \texttt{torus\_2d}, PE~0, f16", []),
    (r"$T = d + R_1 + (n - 1)\,P$ and \label{fig:x2} \includegraphics[width=0.9\linewidth]{a1}", []),
    (r"the ring is 13.1\,\% slower", ["13.1"]),
    (r"$T = 25$ ns", ["25"]),
    (r"about 25 % % a comment with 99", ["25"]),
])
def test_grounding_allow_list(text, numbers):
    assert [v.number for v in check_text(text)] == numbers


@pytest.mark.parametrize(("text", "numbers"), [
    # an escaped percent sign is text: what follows it on the line is still checked
    (r"the ring is 25\,\% slower, that is 7.5~\textmu s more", ["25", "7.5"]),
    (r"25\% and then 40", ["25", "40"]),
    # a bare percent sign starts a comment: the rest of the line is hidden, the next line is checked again
    ("the ring is slower % 25 and 7.5 are notes\nby 12 ns", ["12"]),
    ("% 99 a whole-line comment", []),
])
def test_grounding_tells_an_escaped_percent_from_a_comment(text, numbers):
    found = check_text(text)
    assert [v.number for v in found] == numbers
    assert [v.line for v in found] == [text[:text.index(n)].count("\n") + 1 for n in numbers]


# ------------------------------------------------------------------ generated LaTeX and the PDF


def _generate(tmp_path: Path, docs: dict) -> build.Generated:
    studies = tmp_path / "studies"
    for name, doc in docs.items():
        res.write(studies / name, doc)
    return build.generate(studies, REPORT, tmp_path / "report", TOPOLOGIES)


@pytest.fixture(scope="module")
def synthetic_report(synthetic, tmp_path_factory, seed_figures):
    """The report generated once for this module from synthetic results: (folder, documents, Generated)."""
    folder = tmp_path_factory.mktemp("report")
    seed_figures(folder / "report")  # the figures of these results, drawn once for the test run
    docs = {n: synthetic.synthetic_doc(n) for n in ("gemm", "allreduce", "gqa", "moe")}
    return folder, docs, _generate(folder, docs)


def test_every_macro_the_sections_use_is_generated(synthetic_report):
    _, _, gen = synthetic_report
    generated = "".join((gen.tex_dir / "generated" / f).read_text()
                        for f in ("numbers.tex", "claims.tex", "figures.tex"))
    defined = set(re.findall(r"\\newcommand\{\\(kb\w+)\}", generated))
    used = set()
    for path in (REPORT / "sections").glob("*.tex"):
        used |= set(re.findall(r"\\(kb[A-Za-z]+)", path.read_text()))
    figures = (gen.tex_dir / "generated" / "figures.tex").read_text()
    in_captions = set(re.findall(r"\\(kb[A-Za-z]+)", figures)) - set(re.findall(r"\\newcommand\{\\(kb\w+)\}", figures))
    assert {"kbArLinksTorusWindow", "kbClaimArLinksMeshPcie"} <= in_captions  # the heatmaps' numbers are macros
    assert used | in_captions <= defined, sorted((used | in_captions) - defined)
    numbers = json.loads((gen.tex_dir / "generated" / "numbers.json").read_text())
    assert len(numbers) == len(re.findall(r"\\newcommand", (gen.tex_dir / "generated" / "numbers.tex").read_text()))
    assert numbers["kbArTorusMax"]["unit"] == r"\textmu{}s" and "allreduce_ns" in numbers["kbArTorusMax"]["source"]
    hw = (gen.tex_dir / "generated" / "hardware.tex").read_text()
    assert r"\texttt{\footnotesize pe.gemm.tile\_k}" in hw and "topologies/topology.yaml" in hw
    assert r"\input{generated/tab-gqa-long}" in (gen.tex_dir / "generated" / "gqa-results.tex").read_text()


def test_without_gqa_results_the_section_says_so_and_has_no_numbers():
    from kernbench.studies.report import gqa_tex
    from kernbench.studies.report.numbers import Numbers

    nums = Numbers()
    claims, files = gqa_tex.generate(None, nums)
    assert not nums.items and set(files) == {"gqa-results.tex"}
    assert "has not been run" in files["gqa-results.tex"] and not any(ch.isdigit() for ch in files["gqa-results.tex"]
                                                                      .split("\n", 1)[1])
    assert "gives no numbers" in claims["kbClaimGqaSummary"]


def test_missing_results_name_the_command(tmp_path):
    with pytest.raises(SchemaError, match="run `kernbench study NAME` first"):
        build.generate(tmp_path / "none", REPORT, tmp_path / "report", TOPOLOGIES)


def test_missing_latexmk_says_what_to_install(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    with pytest.raises(StudyError, match="apt-get install -y latexmk texlive-latex-recommended texlive-latex-extra "
                                         "texlive-science"):
        build.latexmk()


def _pdf_text(pdf: Path) -> str:
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True, check=True)
    return re.sub(r"\s+", " ", out.stdout.replace("\u2212", "-"))


@pytest.mark.skipif(shutil.which("latexmk") is None or shutil.which("pdftotext") is None,
                    reason="TeX (latexmk) and poppler-utils (pdftotext) are needed; .ci/run installs them")
def test_the_pdf_shows_every_generated_number_and_follows_the_results(synthetic_report):
    tmp_path, docs, gen = synthetic_report
    docs = copy.deepcopy(docs)
    pdf = build.build_pdf(gen, tmp_path / "report")
    text = _pdf_text(pdf)
    numbers = json.loads((gen.tex_dir / "generated" / "numbers.json").read_text())
    missing = [name for name, n in numbers.items() if n["text"] not in text]
    assert missing == []
    stats = build.pdf_stats(tmp_path / "report")
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert stats.pages == int(re.search(r"Pages:\s+(\d+)", info).group(1))
    sections = "".join(p.read_text() for p in (REPORT / "sections").glob("*.tex"))
    generated = "".join((gen.tex_dir / "generated" / f).read_text() for f in ("gqa-results.tex", "moe.tex",
                                                                                       "fidelity.tex"))
    assert stats.figures == len(re.findall(r"\\kbFig[A-Z]", sections + generated))
    tables = "".join(p.read_text() for p in (gen.tex_dir / "generated").glob("*.tex"))
    assert stats.tables == tables.count(r"\begin{table}")  # the appendix's two included, no empty table
    assert stats.overfull == 0 and len(list((tmp_path / "report" / "pages").glob("page-*.png"))) == stats.pages
    before = numbers["kbArTorusMax"]["text"]
    # change one result: the torus latency at the largest payload
    (row,) = [p for p in docs["allreduce"]["points"] if p["labels"]["panel"] == "topology"
              and p["params"]["topology"] == "6sip_2x3_torus_2d.yaml" and p["params"]["bytes_per_pe"] == 98304]
    row["values"]["allreduce_ns"] = 77777.0
    # and one link of the torus links record: a PCIe link becomes the busiest the heatmap draws, at 43.21 %
    (links,) = [p for p in docs["allreduce"]["points"] if p["labels"]["panel"] == "links"
                and p["params"]["topology"] == "6sip_2x3_torus_2d.yaml"]
    rows = json.loads(links["values"]["links"])
    pcie = next(r for r in rows if r[2] == "pcie")
    pcie[5] = 0.4321 * links["values"]["window_ns"]
    links["values"]["links"] = json.dumps(rows)
    before_link = numbers["kbArLinksTorusBusiest"]["text"]
    gen = _generate(tmp_path, docs)
    text = _pdf_text(build.build_pdf(gen, tmp_path / "report"))
    after = json.loads((gen.tex_dir / "generated" / "numbers.json").read_text())
    assert after["kbArTorusMax"]["text"] == "77.8" != before
    assert "77.8 µs" in text
    assert after["kbArLinksTorusBusiest"]["text"] == "43.2" != before_link
    assert "the busiest link drawn is busy 43.2 % of it" in text  # the heatmap's caption in the PDF
