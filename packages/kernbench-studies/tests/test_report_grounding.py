"""The grounding check (issue 22): number words, the LaTeX the generators write (claims, figure and table captions,
table headers), the check inside the report build, and the earlier report's numbers only from report/reference/."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from kernbench.studies import results as res
from kernbench.studies.base import StudyError
from kernbench.studies.report import build, gemm_tex, gqa_tex, grounding
from kernbench.studies.report.grounding import (
    ALLOWED_PHRASES,
    DATA_BEGIN,
    DATA_END,
    check_generated,
    check_report,
    check_sections,
    check_sources,
    check_text,
)
from kernbench.studies.report.numbers import Numbers, number_word
from kernbench.studies.report.tables import TableData, table

ROOT = Path(__file__).resolve().parents[3]
REPORT = build.PACKAGED_SOURCE
TOPOLOGIES = ROOT / "topologies"
#: The package folder of kernbench.studies: the report generators (report/*.py) and the figures (figures/*.py).
STUDIES = Path(build.__file__).resolve().parents[1]


def _words(text: str) -> list[str]:
    return [v.number for v in check_text(text) if v.kind == "number word"]


# ------------------------------------------------------------------ the rule


@pytest.mark.parametrize(("text", "found"), [
    ("the study runs forty-eight tiles", ["forty-eight"]),
    ("over the eight shapes", ["eight"]),
    ("the four headline panels", ["four"]),
    ("Twenty one payloads and ninety-nine more", ["Twenty one", "ninety-nine"]),
    ("the four-user decode over two-level reductions", ["four", "two"]),
    ("a third of the window, a quarter of it, half the time", ["third", "quarter", "half"]),
    ("the fifth payload, the twelfth tile", ["fifth", "twelfth"]),
    ("it takes twice as long, a tenfold gain, the doubled rate", ["twice", "tenfold", "doubled"]),
    ("a fixed part of tens of cycles, hundreds of ns, a dozen points", ["tens", "hundreds", "dozen"]),
    (r"\textbf{Three panels.} Eleven", ["Three", "Eleven"]),
    ("double buffers", ["double"]),
])
def test_number_words_are_hand_typed_numbers(text, found):
    assert _words(text) == found


@pytest.mark.parametrize("text", [
    "one PE, the first tile, the second run, set to zero, a single read, both enablers, once per tile",
    "many, several, few, all of them, often, someone, a tone, the neighbour, a network",
    "double-buffered staging of half-precision values",  # the allow-list
    r"\kbGqaDispatchTwo{} against \kbGqaPanelDecodeFour, \kbGqaLoops{} loops",  # macro names
    r"\texttt{two\_stage}, \label{sec:four} \ref{fig:gqa-eight} \input{generated/tab-three}",  # code and labels
    r"$\mathrm{two} + n$ and \[ \text{three} \]",  # math
    "% eight shapes in a comment",
])
def test_prose_without_typed_quantities_passes(text):
    assert check_text(text) == []


def test_the_allow_list_is_the_documented_one_and_is_what_lets_its_phrases_pass(monkeypatch):
    assert ALLOWED_PHRASES == ("double-buffered", "half-precision")
    doc = " ".join(grounding.__doc__.split())
    assert all(f'"{p}"' in doc for p in ALLOWED_PHRASES) and "ninety-nine" in doc
    text = "double-buffered staging of half-precision values"
    assert check_text(text) == []
    monkeypatch.setattr(grounding, "_ALLOWED_WORDS", re.compile(r"(?!)"))  # an allow-list that matches nothing
    assert _words(text) == ["double", "half"]


def test_a_violation_names_file_line_and_text():
    text = "Intro.\n\nThe study runs eight shapes,\nat 36.4~\\textmu s each."
    first, second = check_text(text, Path("sections/03-gemm.tex"))
    assert (first.line, first.number, first.kind) == (3, "eight", "number word")
    assert str(first) == "sections/03-gemm.tex:3: hand-typed number word 'eight' in 'The study runs eight shapes,'"
    assert (second.line, second.number, second.kind) == (4, "36.4", "number")


def test_number_words_of_generated_counts():
    assert [number_word(n) for n in (0, 1, 8, 13, 20, 48, 99, 100)] == [
        "zero", "one", "eight", "thirteen", "twenty", "forty-eight", "ninety-nine", "100"]
    nums = Numbers()
    nums.count_word("kbShapes", 8, "a study's points")
    assert nums.items["kbShapes"].text == "eight" and nums.plain_text("kbShapes") == "eight"


# ------------------------------------------------------------------ the sources


def test_the_report_sources_are_grounded():
    assert check_sources(REPORT) == []


def test_a_planted_number_word_in_a_section_is_found(tmp_path):
    sections = tmp_path / "sections"
    shutil.copytree(REPORT / "sections", sections)
    target = sections / "03-gemm.tex"
    lines = target.read_text().splitlines()
    line = lines.index(r"\subsection{Results}") + 2
    lines.insert(line - 1, "It runs eight shapes.")
    target.write_text("\n".join(lines) + "\n")
    (v,) = check_sections(sections)
    assert (v.path, v.line, v.number) == (target, line, "eight")


def test_data_row_markers_count_only_in_generated_files(tmp_path):
    body = f"Prose.\n{DATA_BEGIN}\n16 & 36.4 \\\\\n{DATA_END}\nMore prose.\n"
    assert [v.number for v in check_text(body)] == ["16", "36.4"]  # a section cannot hide numbers
    assert check_text(body, data_rows=True) == []
    (tmp_path / "generated").mkdir()
    typeset = table("tab:x", "Latency over eight shapes at 16 B.", ["shape", "ns"], [["8×8", "36.4"]], "lr")
    (tmp_path / "generated" / "tab-x.tex").write_text(typeset)
    # the rows are results (exempt); the caption is prose and is checked
    assert [v.number for v in check_generated([tmp_path / "generated" / "tab-x.tex"])] == ["eight", "16"]


def test_only_seed_definitions_live_in_the_reference_folder(tmp_path):
    source = tmp_path / "tex"
    shutil.copytree(REPORT, source)
    claims = source / "reference" / "seed-claims.tex"
    claims.write_text(claims.read_text() + "The earlier report says 445 ns.\n")
    section = source / "sections" / "05-gqa.tex"
    section.write_text(section.read_text() + "\\newcommand{\\seedGqaLatency}{445\\,ns}\n")
    found = check_sources(source)
    assert {(v.path.name, v.kind) for v in found} == {
        ("seed-claims.tex", "line outside a \\seed definition"), ("05-gqa.tex", "definition of a reference number"),
        ("05-gqa.tex", "number")}


# ------------------------------------------------------------------ the generators and the build


def _reference_values() -> tuple[set[float], set[float]]:
    """Every number of the earlier report as report/tex/reference/ holds it (seed-claims.tex and gqa.json), and
    those of them that are percentages."""
    values: set[float] = set()
    percents: set[float] = set()
    for line in (REPORT / "reference" / "seed-claims.tex").read_text().splitlines():
        m = re.match(r"\\newcommand\{\\seed[A-Za-z]+\}\{(.*)\}", re.sub(r"(?<!\\)%.*", "", line).strip())
        if m:
            values |= {float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.group(1))}
            percents |= {float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\\,\\%", m.group(1))}

    def walk(o):
        if isinstance(o, dict):
            for v in o.values():
                yield from walk(v)
        elif isinstance(o, (int, float)) and not isinstance(o, bool):
            yield float(o)
    values |= set(walk(json.loads((REPORT / "reference" / "gqa.json").read_text())["panels"]))
    return values, percents


def _distinctive(v: float) -> bool:
    """A reference number unlikely to be a constant of our own: not a small integer, a power of two (or a
    multiple of 1024), nor a round share (a multiple of 5 up to 100)."""
    if v == int(v) and (v <= 16 or v % 1024 == 0 or (v > 0 and int(v) & (int(v) - 1) == 0)):
        return False
    return not (v == int(v) and v <= 100 and v % 5 == 0)


def typed_reference_numbers(source: str, values: set[float], percents: set[float]) -> list[tuple[int, float]]:
    """(line, value) of every numeric literal in Python ``source`` equal to a distinctive reference number, or
    to one hundredth of a distinctive reference percentage (written as a ratio)."""
    targets = {v for v in values if _distinctive(v)} | {p / 100 for p in percents if _distinctive(p)}
    return [(node.lineno, float(node.value)) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool) and any(abs(float(node.value) - t) < 1e-12 for t in targets)]


def test_no_generator_types_a_number_of_the_earlier_report():
    values, percents = _reference_values()
    assert {445.118, 28.8, 1.39, 0.69} <= values and {19.0, 23.0, 78.0} <= percents  # the files are read
    # the check can fail: a latency, a torus advantage and a percentage written as a ratio are found
    assert typed_reference_numbers("LAT = 445.118\ngain = 1.39\nshare = 0.19\nkib = 1024\n", values, percents) == [
        (1, 445.118), (2, 1.39), (3, 0.19)]
    modules = sorted([*(STUDIES / "report").glob("*.py"), *(STUDIES / "figures").glob("*.py")])
    assert len(modules) > 15
    found = {p.name: typed_reference_numbers(p.read_text(), values, percents) for p in modules}
    assert {k: v for k, v in found.items() if v} == {}


def test_no_generator_keeps_reference_numbers_in_a_constant_of_its_own():
    """The earlier report's tile and fill caps were once module constants of gemm_tex; they are read from
    seed-claims.tex now (so a constant named SEED_/REF_... holding numbers fails here)."""
    def seed_constants(source: str) -> list[str]:
        out = []
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and any(isinstance(c, ast.Constant) and isinstance(c.value, (int, float))
                                                    for c in ast.walk(node.value)):
                out += [t.id for t in node.targets if isinstance(t, ast.Name) and re.match(r"(SEED|REF)", t.id)]
        return out

    assert seed_constants("SEED_TILE = (32, 64, 32)\nTILE = 8\n") == ["SEED_TILE"]
    assert {p.name: seed_constants(p.read_text()) for p in (STUDIES / "report").glob("*.py")
            if seed_constants(p.read_text())} == {}
    assert gemm_tex.seed_tile() == (32, 64, 32) and gemm_tex.seed_caps() == {"Cube": 0.5, "SmallM": 0.25,
                                                                              "SmallK": 0.125}


def spelled_numbers(source: str) -> list[tuple[int, str]]:
    """(line, word) of every number word in a string literal of Python ``source`` (docstrings and one-word tags
    such as a macro's ``"Two"`` aside): the generators' claims, captions and sources, including the branches this
    build's results do not take."""
    tree = ast.parse(source)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, v.number) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and not re.fullmatch(r"[A-Z][a-z]+", node.value)
            for v in check_text(node.value) if v.kind == "number word"]


def test_no_generator_spells_a_number_in_any_branch():
    assert spelled_numbers('x = "the ring"\ny = f"{a} and the two others"\nTAGS = {"opt2": "Two"}\n') == [(2, "two")]
    modules = sorted([*(STUDIES / "report").glob("*.py"), *(STUDIES / "figures").glob("*.py")])
    found = {p.name: spelled_numbers(p.read_text()) for p in modules
             if p.name not in ("grounding.py", "numbers.py")}  # the rule and the words of counts themselves
    assert {k: v for k, v in found.items() if v} == {}


def test_table_captions_and_headers_hold_macros_not_digits():
    t = TableData("tab:x", r"Latency over \kbArSips{} SIPs.", ["payload", r"within ±\kbBand{}"], [["16 B", "1.0"]],
                  "lr", values={"kbArSips": "six", "kbBand": "5 %"})
    latex = t.latex()
    assert r"\caption{Latency over \kbArSips{} SIPs.}" in latex and r"within $\pm$\kbBand{} \\" in latex
    assert t.markdown().splitlines()[:3] == ["**Latency over six SIPs.**", "", "| payload | within ±5 % |"]
    with pytest.raises(StudyError, match=r"table tab:x: \\kbBand has no value"):
        dataclasses.replace(t, values={"kbArSips": "six"}).markdown()


@pytest.fixture(scope="module")
def studies(synthetic, tmp_path_factory):
    """Synthetic results of every study, written once for this module."""
    folder = tmp_path_factory.mktemp("studies")
    for name in ("gemm", "allreduce", "gqa", "moe"):
        res.write(folder / name, synthetic.synthetic_doc(name))
    return folder


@pytest.fixture(scope="module")
def out(tmp_path_factory, seed_figures):
    """One output folder for every build of this module (its figures drawn once for the test run, then reused)."""
    folder = tmp_path_factory.mktemp("report")
    seed_figures(folder)
    return folder


def test_the_generated_report_is_grounded_and_its_tables_mark_their_data_rows(studies, out):
    gen = build.generate(studies, REPORT, out, TOPOLOGIES)  # the build's own check passed
    generated = sorted((gen.tex_dir / "generated").glob("*.tex"))
    assert check_report(REPORT, generated) == []
    tables = [p for p in generated if p.name.startswith("tab-") or p.name == "hardware.tex"]
    prose = {"tab-allreduce-differences.tex"}  # its cells are sentences, checked like the text
    assert len(tables) >= 10 and all((DATA_BEGIN in p.read_text()) == (p.name not in prose) for p in tables)
    assert "numbers.tex" in {p.name for p in generated}  # exempt: where the numbers are defined
    numbers = json.loads((gen.tex_dir / "generated" / "numbers.json").read_text())
    assert numbers["kbGqaPanels"]["text"] == "four" and numbers["kbArSips"]["text"] == "six"
    assert numbers["kbPeBlocks"]["text"] == "nine" and numbers["kbGqaCommandsPerTileTwo"]["text"] == "two"
    assert numbers["kbReportNumbers"]["text"] == str(len(numbers))


def test_a_planted_number_word_in_a_section_fails_the_build_naming_file_and_line(studies, out, tmp_path):
    source = tmp_path / "tex"
    shutil.copytree(REPORT, source)
    target = source / "sections" / "06-discussion.tex"
    lines = target.read_text().splitlines()
    lines[3] = "All eight shapes " + lines[3]
    target.write_text("\n".join(lines) + "\n")
    with pytest.raises(StudyError) as err:
        build.generate(studies, source, out, TOPOLOGIES)
    message = str(err.value)
    assert "\n" not in message and "1 hand-typed number(s)" in message
    assert f"{target}:4: hand-typed number word 'eight' in 'All eight shapes" in message


def _plant_figure_caption(monkeypatch):
    real = build.figures_of

    def planted(study):
        return tuple(dataclasses.replace(s, caption=s.caption + " One run takes 12 ns.") if s.name == "gemm_tiles"
                     else s for s in real(study))
    monkeypatch.setattr(build, "figures_of", planted)


def _plant_claim(monkeypatch):
    monkeypatch.setattr(gqa_tex, "CONCLUSION", gqa_tex.CONCLUSION + " It covers eight shapes.")


def _plant_table_caption(monkeypatch):
    real = gemm_tex._points_table
    monkeypatch.setattr(gemm_tex, "_points_table",
                        lambda rows: dataclasses.replace(real(rows), caption=real(rows).caption + " At 7.5 ns."))


@pytest.mark.parametrize(("plant", "file", "number"), [
    (_plant_figure_caption, "figures.tex", "'12'"),
    (_plant_claim, "claims.tex", "'eight'"),
    (_plant_table_caption, "tab-gemm-points.tex", "'7.5'"),
])
def test_a_planted_number_in_python_generated_latex_fails_the_build(studies, out, monkeypatch, plant, file, number):
    plant(monkeypatch)
    with pytest.raises(StudyError) as err:
        build.generate(studies, REPORT, out, TOPOLOGIES)
    message = str(err.value)
    (where,) = re.findall(r"(\S+):(\d+): hand-typed number", message)
    path, line = Path(where[0]), int(where[1])
    assert path == out / "tex" / "generated" / file and number in message
    assert number.strip("'") in path.read_text().splitlines()[line - 1]  # the line it names holds the number
