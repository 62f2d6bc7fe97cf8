"""A study is one registration: a made-up study, written as a module in a temporary folder and registered, runs,
has its figure drawn and its report section included, with no edit to the figures package or the report build."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from kernbench.studies import registry
from kernbench.studies import results as res
from kernbench.studies.base import ReportSection, Study, StudyError
from kernbench.studies.figures import figures_of, render_study
from kernbench.studies.report import build
from kernbench.studies.runner import RunOptions, run_studies

TOPOLOGIES = Path(__file__).resolve().parents[3] / "topologies"

#: A whole study in one module: grid, point function, one figure, a report section with a number and a claim.
TINY = '''
    """A made-up study: y = 3 x over three points (no simulation)."""

    from kernbench.studies.base import Field, Point, ReportSection, Study
    from kernbench.studies.figures.common import FigureSpec, new_figure


    def grid():
        return tuple(Point({"panel": "line"}, {"x": x}) for x in (1, 2, 4))


    def point(params, ctx):
        return {"y": 3.0 * params["x"]}


    def draw_line(doc):
        fig, ax = new_figure(3.0, 2.0)
        rows = [p["values"] for p in doc["points"]]
        ax.plot([r["y"] for r in rows], marker="o")
        return fig


    FIGURES = (FigureSpec("tiny_line", "tiny", "y against x.", "kernbench study tiny", draw_line, width=0.5),)


    def generate(doc, nums):
        top = max(p["values"]["y"] for p in doc["points"])
        nums.plain("kbTinyTop", top, "out/studies/tiny/results.json: largest y")
        section = "\\\\section{A tiny study}\\\\label{sec:tiny}\\n\\\\kbClaimTiny{} \\\\kbFigTinyLine\\n"
        return {"kbClaimTiny": r"The largest $y$ is \\kbTinyTop."}, {"tiny-section.tex": section}


    STUDY = Study(
        name="tiny", title="A tiny study", description="y = 3 x at three points", grid=grid, point=point,
        files=lambda params: (), overrides=lambda params: {}, modules=(__name__,),
        fields=(Field("panel", "", "the only panel"), Field("x", "1", "input"), Field("y", "1", "three x")),
        figures=(f"{__name__}:FIGURES",),
        report=ReportSection(f"{__name__}:generate", "generated/tiny-section"),
    )
'''


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The made-up study, imported from a module in a temporary folder and registered; unregistered after."""
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "tiny_study_mod.py").write_text(textwrap.dedent(TINY))
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("tiny_study_mod")
    study = registry.register(module.STUDY)
    yield study
    registry.unregister("tiny")
    sys.modules.pop("tiny_study_mod", None)


def test_a_registered_study_is_run_drawn_and_reported_from_its_registration_alone(tiny, synthetic, tmp_path,
                                                                                 seed_figures):
    assert registry.study_names()[-1] == "tiny" and registry.get_study("tiny") is tiny
    assert [s.name for s in registry.resolve("all")][-1] == "tiny"
    # the runner finds it by name (serial: a study registered from code lives in this process only)
    studies = tmp_path / "studies"
    (done,) = run_studies(registry.resolve("tiny"), RunOptions(executor="serial", out=studies / "tiny",
                                                               topology_dir=TOPOLOGIES, progress=False,
                                                               cache_root=tmp_path / "cache"))
    doc = res.load(done.results)
    assert [p["values"]["y"] for p in doc["points"]] == [3.0, 6.0, 12.0]
    # its figure, found through the registry
    assert [s.name for s in figures_of("tiny")] == ["tiny_line"]
    drawn = render_study(doc, tmp_path / "figures", ("svg",), TOPOLOGIES)
    assert [p.name for p in drawn] == ["tiny_line.svg"] and drawn[0].stat().st_size > 0
    # its report section, beside the built-in studies' (synthetic results), in registry order
    synthetic.write_synthetic(studies)
    seed_figures(tmp_path / "report")  # the built-in studies' figures, drawn once for the test run
    gen = build.generate(studies, None, tmp_path / "report", TOPOLOGIES)
    generated = gen.tex_dir / "generated"
    sections = (generated / "study-sections.tex").read_text().splitlines()
    assert [line for line in sections if line.startswith("\\input")] == [
        r"\input{sections/03-gemm}", r"\input{sections/04-allreduce}", r"\input{sections/05-gqa}",
        r"\input{generated/moe}", r"\input{generated/tiny-section}", r"\input{generated/fidelity}"]
    assert (generated / "tiny-section.tex").read_text().startswith(r"\section{A tiny study}")
    assert r"\newcommand{\kbClaimTiny}" in (generated / "claims.tex").read_text()
    assert gen.numbers.items["kbTinyTop"].text == "12.0"
    assert r"\newcommand{\kbFigTinyLine}" in (generated / "figures.tex").read_text()
    assert (gen.tex_dir / "figures" / "tiny_line.pdf").is_file()
    assert r"\input{generated/study-sections}" in gen.main.read_text()


def test_a_study_name_is_registered_once(tiny):
    with pytest.raises(StudyError, match="already registered"):
        registry.register(tiny.__class__(**{**tiny.__dict__, "title": "another"}))
    with pytest.raises(StudyError, match="already registered"):
        registry.register(registry.get_study("gemm").__class__(**{**registry.get_study("gemm").__dict__}))
    with pytest.raises(StudyError, match="takes a Study"):
        registry.register("tiny")


def test_the_built_in_studies_carry_their_figures_and_report_sections():
    for name in ("gemm", "allreduce", "gqa"):
        study = registry.get_study(name)
        assert isinstance(study.report, ReportSection) and study.report.tex.startswith("sections/")
        assert callable(registry.load_ref(study.report.generate)) and callable(registry.load_ref(study.report.tables))
        assert figures_of(name) and all(spec.study == name for spec in figures_of(name))
    assert Study.__dataclass_fields__["figures"].default == ()  # a study may have no figures or report section
    with pytest.raises(StudyError, match="cannot load"):
        registry.load_ref("kernbench.studies.nowhere:STUDY")
