"""The grounding check: no number of the report is typed by hand, in digits or in words.

Measured numbers, counts of the study design (panels, shapes, points, cubes) and numbers of the earlier report
reach the PDF only through macros: ``\\kb…`` defined in ``generated/numbers.tex`` (each with its source, also in
``numbers.csv``) or generated claims, and ``\\seed…`` defined in ``reference/seed-claims.tex`` (the earlier
report's numbers, each with its source; ``reference/gqa.json`` holds the rest, read by
:mod:`kernbench.studies.gqa_reference`). ``kernbench report`` runs :func:`require_grounded` on the report
sources before it generates anything and on the LaTeX it generated before ``latexmk``: a violation fails the build
with one line naming the file, the line and the text (the command line prints it and exits with status 2).

**What is checked** (:func:`check_report`):

* the report sources: ``main.tex`` and ``sections/*.tex``;
* the generated LaTeX under ``generated/``: claims (``claims.tex``), figure captions and sub-captions
  (``figures.tex``, from :class:`~kernbench.studies.figures.common.FigureSpec`), the study parts
  (``gqa-results.tex``, ...), the appendix, and every table's caption, header rows and prose cells;
* ``reference/*.tex`` only for its form: nothing but comments and ``\\newcommand{\\seed…}`` definitions (so that
  a number of the earlier report has no other way into the text than a ``\\seed`` macro).

**What is exempt**

* ``generated/numbers.tex`` (it is where the numbers are defined) and the bodies of ``reference/*.tex``;
* in generated files only, the rows between the comment lines ``% grounding: data rows`` and
  ``% grounding: end data rows``, which :func:`kernbench.studies.report.tables.table` and the hardware table put
  around table rows formatted from results or topology fields (those cells are numbers by design; captions,
  headers and prose cells such as the differences table's stay checked). A section file cannot use the markers;
* comments, and the arguments of cross-referencing and layout commands (``\\label``, ``\\ref``, ``\\input``,
  ``\\includegraphics``, column specifications, ``\\multicolumn``/``\\cmidrule`` spans, lengths, the preamble's
  class and package options, counters and float fractions);
* single-digit integers inside math (indices and coefficients of a formula, such as ``R_1`` or ``(n - 1)``);
* names that contain digits but are not quantities: the 2×3 SIP grid, the registered SIP topology names
  (``ring_1d``, ``torus_2d``, ...), ``PE~0``, the ``f16``/``f32`` dtypes, the ``opt1``–``opt3`` loop names.

**Number words.** Outside math, control sequences and ``\\texttt{}`` (code names), these English words are
flagged, case-insensitively and also as the first part of a hyphenated word ("four-user", "two-level"):

* cardinals from *two* to *ninety-nine* (*two* ... *nineteen*, *twenty* ... *ninety*, and compounds such as
  "forty-eight" or "twenty one"), and *hundred*, *thousand*, *million*, *billion*, *dozen* (also plural:
  "tens of cycles" is a hand-typed magnitude);
* fractions: *half*/*halves*, *third(s)*, *quarter(s)*, and every ordinal from *fourth* on ("a fifth of the
  time", "the eighth payload": a fraction, or a position that depends on the results);
* multiplicatives: *twice*, *thrice*, *double*, *triple*, *quadruple* (and their -d/-s forms), *twofold* ...
  *tenfold*, *hundredfold*.

Not flagged: *zero*, *one*, *first*, *second*, *once*, *single*, *both*, *either*, *pair*, *few*, *several*,
*many*, *all* (a condition or a structure of the prose rather than a quantity, as "set to zero", "one PE",
"first tile"). Where prose states a count of the results or of the study design, the generator defines it
(:meth:`Numbers.count <kernbench.studies.report.numbers.Numbers.count>`, or
:meth:`Numbers.count_word <kernbench.studies.report.numbers.Numbers.count_word>` to print it as a word) or the
sentence does without it.

The allow-list of fixed phrases, which name a technique or a format rather than state a quantity
(:data:`ALLOWED_PHRASES`): "double-buffered" (the staging technique of the composite pipeline) and
"half-precision" (the f16 number format).

The text drawn inside the figures (titles, axis labels, legends) is not LaTeX; the figure checks of the tests
(``tests/figure_checks.py``) hold it to the same rule for number words, and its digits are formatted from the
results or the study's definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernbench.studies.base import StudyError
from kernbench.topology.sip_topologies import sip_topology_names

_COMMENT = re.compile(r"(?<!\\)%.*$", re.MULTILINE)
_COMMAND_ARGS = re.compile(
    r"\\(?:label|ref|eqref|pageref|autoref|input|includegraphics|include|cite|hspace|vspace|setlength|"
    r"addcontentsline|setcounter|documentclass|usepackage|newcolumntype|"
    r"begin\{(?:tabularx?|longtable|xltabular)\})\*?(?:\[[^\]]*\])?(?:\{(?:[^{}]|\{[^{}]*\})*\})*")
_LAYOUT = re.compile(
    r"\\multicolumn\{\d+\}|\\cmidrule(?:\([a-z]*\))?\{\d+-\d+\}|"
    r"\\renewcommand\{\\(?:top|bottom|text|floatpage|dbltop|dblfloatpage)fraction\}\{[\d.]+\}|"
    r"\\pdf[a-z]+=-?\d+")
_LENGTH = re.compile(r"\[[^\]]*\d[^\]]*(?:pt|mm|cm|em|ex|in|linewidth|textwidth)[^\]]*\]")
#: A registered SIP topology name as LaTeX may write it (``ring\_1d`` or ``ring_1d``).
_TOPOLOGY_NAMES = "|".join(re.escape(n).replace("_", r"\\?_") for n in sip_topology_names())
_ALLOWED = re.compile(r"2\s*\$\\times\$\s*3|2\s*\\times\s*3|" + _TOPOLOGY_NAMES + "|"
                      r"PE~0|\bf16\b|\bf32\b|\bopt[123]\b")
_MATH = re.compile(r"\$\$.*?\$\$|\$.*?\$|\\\[.*?\\\]|\\begin\{(align\*?|equation\*?)\}.*?\\end\{\1\}", re.DOTALL)
_SINGLE_DIGIT = re.compile(r"(?<![\d.])\d(?![\d.])")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: Rows of a generated table formatted from results: exempt in generated files (see the module docstring).
DATA_BEGIN, DATA_END = "% grounding: data rows", "% grounding: end data rows"
_DATA_ROWS = re.compile(rf"^{re.escape(DATA_BEGIN)}$.*?^{re.escape(DATA_END)}$", re.MULTILINE | re.DOTALL)

_UNITS = "two|three|four|five|six|seven|eight|nine"
_TEENS = "ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
_ORDINALS = ("fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|"
             "sixteenth|seventeenth|eighteenth|nineteenth|twentieth|thirtieth|fortieth|fiftieth|sixtieth|"
             "seventieth|eightieth|ninetieth|hundredth|thousandth|millionth")
#: A number word (see the module docstring); ``\b`` on both sides, so "often" or "someone" never match, while
#: the first part of "four-user" does.
NUMBER_WORD = re.compile(
    rf"\b(?:(?:{_TENS})(?:[- ](?:one|{_UNITS}|first|second|third|{_ORDINALS}))?"
    rf"|(?:{_UNITS}|{_TEENS}|{_TENS}|ten|hundred|thousand)fold"
    rf"|{_UNITS}|{_TEENS}|(?:hundred|thousand|million|billion|dozen)s?|tens"
    rf"|half|halves|thirds?|quarters?|(?:{_ORDINALS})s?"
    rf"|twice|thrice|(?:double|triple|quadruple)[ds]?)\b", re.IGNORECASE)
#: Fixed phrases holding a number word that name a technique or a format, not a quantity.
ALLOWED_PHRASES: tuple[str, ...] = ("double-buffered", "half-precision")
_ALLOWED_WORDS = re.compile("|".join(rf"\b{re.escape(p)}\b" for p in ALLOWED_PHRASES), re.IGNORECASE)
_CONTROL = re.compile(r"\\(?:[A-Za-z@]+|.)")
_TEXTTT = re.compile(r"\\texttt\{(?:[^{}]|\{[^{}]*\})*\}")
_SEED_DEFINITION = re.compile(r"^\\newcommand\{\\seed[A-Za-z]+\}\{.*\}\s*$")


@dataclass(frozen=True)
class Violation:
    """A hand-typed number: file, 1-based line, the number (digits or a number word) and the text around it."""

    path: Path
    line: int
    number: str
    context: str
    kind: str = "number"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: hand-typed {self.kind} {self.number!r} in '{self.context}'"


def _blank(text: str, span: tuple[int, int]) -> str:
    """``text`` with ``span`` replaced by spaces (keeps offsets and line numbers)."""
    a, b = span
    return text[:a] + "".join("\n" if ch == "\n" else " " for ch in text[a:b]) + text[b:]


def _blank_all(text: str, pattern: re.Pattern) -> str:
    for m in reversed(list(pattern.finditer(text))):
        text = _blank(text, m.span())
    return text


def _violations(original: str, text: str, pattern: re.Pattern, path: Path, kind: str) -> list[Violation]:
    lines = original.splitlines()
    out = []
    for m in pattern.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(Violation(path, line, m.group(), lines[line - 1].strip()[:100], kind))
    return out


def check_text(text: str, path: Path = Path("<text>"), words: bool = True,
               data_rows: bool = False) -> list[Violation]:
    """Every hand-typed number in LaTeX ``text``: digit sequences, and number words when ``words``.
    ``data_rows`` True (generated files only) exempts the rows between the data-row markers."""
    original = text
    if data_rows:
        text = _blank_all(text, _DATA_ROWS)
    for pattern in (_COMMENT, _COMMAND_ARGS, _LAYOUT, _LENGTH, _ALLOWED):
        text = _blank_all(text, pattern)
    digits = text
    for m in _MATH.finditer(digits):
        inner = _SINGLE_DIGIT.sub(" ", digits[m.start():m.end()])
        digits = digits[:m.start()] + inner + digits[m.end():]
    found = _violations(original, digits, _NUMBER, path, "number")
    if words:
        prose = text
        for pattern in (_MATH, _TEXTTT, _CONTROL, _ALLOWED_WORDS):
            prose = _blank_all(prose, pattern)
        found += _violations(original, prose, NUMBER_WORD, path, "number word")
    return sorted(found, key=lambda v: (v.line, original.splitlines()[v.line - 1].find(v.number)))


def check_sections(folder: Path) -> list[Violation]:
    """Every hand-typed number in ``folder/*.tex`` (the report's section files)."""
    found: list[Violation] = []
    for path in sorted(Path(folder).glob("*.tex")):
        found += check_text(path.read_text(encoding="utf-8"), path)
    return found


def check_generated(paths: Iterable[Path]) -> list[Violation]:
    """Every hand-typed number in the generated LaTeX files ``paths`` (under ``OUT/tex/generated``), but
    ``numbers.tex`` and files that are not ``.tex``, with the marked data rows of tables exempt."""
    found: list[Violation] = []
    for path in sorted(Path(p) for p in paths):
        if path.suffix == ".tex" and path.name != "numbers.tex":
            found += check_text(path.read_text(encoding="utf-8"), path, data_rows=True)
    return found


def check_reference(folder: Path) -> list[Violation]:
    """Every line of ``folder/*.tex`` (the earlier report's numbers) that is neither a comment nor a
    ``\\newcommand{\\seed…}{…}`` definition."""
    found = []
    for path in sorted(Path(folder).glob("*.tex")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = _COMMENT.sub("", line).strip()
            if code and not _SEED_DEFINITION.match(code):
                found.append(Violation(path, i, code[:40], line.strip()[:100], "line outside a \\seed definition"))
    return found


def check_sources(source: Path) -> list[Violation]:
    """Every violation of the report sources in ``source``: ``main.tex``, ``sections/*.tex`` (digits and number
    words, and no ``\\seed`` definition), ``reference/*.tex`` (only comments and ``\\seed`` definitions)."""
    source = Path(source)
    found = check_text((source / "main.tex").read_text(encoding="utf-8"), source / "main.tex")
    found += check_sections(source / "sections")
    found += check_reference(source / "reference")
    for path in sorted((source / "sections").glob("*.tex")):
        found += [Violation(path, n, "\\seed", ln.strip()[:100], "definition of a reference number")
                  for n, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                  if re.search(r"\\(?:re)?newcommand\*?\{?\\seed", _COMMENT.sub("", ln))]
    return found


def check_report(source: Path | None = None, generated: Iterable[Path] = ()) -> list[Violation]:
    """Every violation of the report sources in ``source`` (:func:`check_sources`; None: not checked) and of the
    generated LaTeX files ``generated`` (:func:`check_generated`)."""
    return (check_sources(source) if source is not None else []) + check_generated(generated)


def describe(found: Iterable[Violation], shown: int = 3) -> str:
    """One line naming the first ``shown`` violations and how many there are."""
    found = list(found)
    more = f" (and {len(found) - shown} more)" if len(found) > shown else ""
    return "; ".join(str(v) for v in found[:shown]) + more


def require_grounded(source: Path | None = None, generated: Iterable[Path] = ()) -> None:
    """:class:`StudyError` in one line when :func:`check_report` finds anything: the first violations, each as
    ``file:line: hand-typed number word 'eight' in '<the line>'``."""
    found = check_report(source, generated)
    if found:
        raise StudyError(f"the report has {len(found)} hand-typed number(s); a number reaches the text only as a "
                         f"generated macro (kernbench.studies.report.grounding): {describe(found)}")
