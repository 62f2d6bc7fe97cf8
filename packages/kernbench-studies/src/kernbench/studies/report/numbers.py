"""The report's numbers: one LaTeX macro per value, with its unit, rounding and source chosen here.

Section files never type a measured number; they write ``\\kbGemmEffBigLoadLoad``
and the generator defines it in ``generated/numbers.tex`` from a results
file. ``numbers.json`` lists the same values as plain text (what
``pdftotext`` shows) with their sources, for tests and for the appendix
that lists every number beside where it came from.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass

from kernbench.studies.base import StudyError

_NAME = re.compile(r"^kb[A-Z][A-Za-z]*$")
_TEX_ESCAPES = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$", "{": r"\{",
                "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "×": r"$\times$",
                "−": "$-$", "–": "--", "—": "---", "±": r"$\pm$", "µ": r"\textmu{}", "α": r"$\alpha$",
                "β": r"$\beta$", "≤": r"$\leq$", "≥": r"$\geq$", "∝": r"$\propto$", "…": r"\ldots{}",
                "→": r"$\rightarrow$", "³": r"\textsuperscript{3}", "Δ": r"$\Delta$", "·": r"$\cdot$"}


def tex_escape(text: str) -> str:
    """Plain text (may hold ×, −, µ, α, β, …) as LaTeX text."""
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in text)


def sig(x: float, digits: int = 3) -> str:
    """``x`` rounded to ``digits`` significant digits, plain decimal (no exponent, no thousands separator)."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def fixed(x: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals."""
    return f"{x:.{decimals}f}"


_SMALL_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS_WORDS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def number_word(n: int) -> str:
    """``n`` as an English word from zero to ninety-nine (``48`` -> ``forty-eight``), else in digits."""
    n = int(n)
    if 0 <= n < 20:
        return _SMALL_WORDS[n]
    if 20 <= n < 100:
        tens, units = divmod(n, 10)
        return _TENS_WORDS[tens - 2] + (f"-{_SMALL_WORDS[units]}" if units else "")
    return str(n)


@dataclass(frozen=True)
class Number:
    """One value of the report: macro name, the number as text, its unit (LaTeX), and where it comes from."""

    name: str
    text: str
    unit: str
    source: str

    @property
    def tex(self) -> str:
        """The macro body: the number (a minus sign typeset as such) and a thin space before the unit."""
        body = "$-$" + tex_escape(self.text[1:]) if self.text.startswith("-") else tex_escape(self.text)
        return body + (rf"\,{self.unit}" if self.unit else "")


class Numbers:
    """The collection of report numbers, in the order they are added."""

    def __init__(self) -> None:
        self.items: dict[str, Number] = {}

    def add(self, name: str, text: str, unit: str, source: str) -> None:
        """Add the macro ``\\name`` (``kb`` + letters) = ``text`` ``unit``; a name twice is an error."""
        if not _NAME.match(name):
            raise StudyError(f"report number name {name!r} must be 'kb' followed by letters only (a LaTeX macro)")
        if name in self.items:
            raise StudyError(f"report number {name!r} defined twice")
        self.items[name] = Number(name, text, unit, source)

    def pct(self, name: str, ratio: float, source: str, decimals: int = 1) -> None:
        """A ratio shown as a percentage."""
        self.add(name, fixed(100 * ratio, decimals), r"\%", source)

    def ns(self, name: str, value: float, source: str, decimals: int = 1) -> None:
        """A time in ns."""
        self.add(name, fixed(value, decimals), "ns", source)

    def us(self, name: str, value_ns: float, source: str) -> None:
        """A time given in ns, shown in µs to three significant digits."""
        self.add(name, sig(value_ns / 1e3, 3), r"\textmu{}s", source)

    def count(self, name: str, value: int, source: str, unit: str = "") -> None:
        """An integer."""
        self.add(name, str(int(value)), unit, source)

    def count_word(self, name: str, value: int, source: str) -> None:
        """An integer printed as a word up to ninety-nine (:func:`number_word`): a count of the study design or
        of the results that the prose states ("the \\kbGqaPanels{} headline panels" reads "the four headline
        panels"), so that the grounding check's ban on typed number words never forces digits into a sentence."""
        self.add(name, number_word(value), "", source)

    def plain(self, name: str, value: float, source: str, unit: str = "", digits: int = 3) -> None:
        """A number to ``digits`` significant digits."""
        self.add(name, sig(value, digits), unit, source)

    def text(self, name: str, value: str, source: str) -> None:
        """A word or label taken from results (escaped for LaTeX); kept out of the number check."""
        self.add(name, value, "", source)

    def tex_file(self) -> str:
        """``numbers.tex``: one ``\\newcommand`` per number, with its source in a comment."""
        lines = ["% Generated by kernbench report from study results and topology files; do not edit.", ""]
        for n in self.items.values():
            lines.append(f"% {n.source}")
            lines.append(rf"\newcommand{{\{n.name}}}{{{n.tex}}}")
        return "\n".join(lines) + "\n"

    def json_file(self) -> str:
        """``numbers.json``: name -> text, unit, source."""
        return json.dumps({n.name: {"text": n.text, "unit": n.unit, "source": n.source}
                           for n in self.items.values()}, indent=1) + "\n"

    def plain_text(self, name: str) -> str:
        """The number ``name`` as plain text with its unit (``64 KiB``, ``5 %``), for text outside LaTeX."""
        n = self.items[name]
        return n.text + (f" {plain_unit(n.unit)}" if n.unit else "")

    def appendix_rows(self) -> list[tuple[str, str, str]]:
        """(macro, value as typeset, source) for every number."""
        return [(n.name, n.tex, n.source) for n in self.items.values()]

    def csv_file(self) -> str:
        """``numbers.csv``: one row per number with :data:`CSV_COLUMNS` (the full list the PDF's provenance
        appendix points to)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for n in self.items.values():
            w.writerow([f"\\{n.name}", n.text, plain_unit(n.unit), *split_source(n.source)])
        return buf.getvalue()

    def by_source_file(self) -> dict[str, int]:
        """How many numbers come from each source file (in first-seen order)."""
        out: dict[str, int] = {}
        for n in self.items.values():
            f = split_source(n.source)[0]
            out[f] = out.get(f, 0) + 1
        return out


#: The columns of ``numbers.csv``.
CSV_COLUMNS = ("macro", "value", "unit", "source file", "field", "point")
_PLAIN_UNITS = {r"\textmu{}s": "µs", r"\%": "%", r"$\times$": "×"}
_FIELD = re.compile(r"^(?P<field>[a-z][a-z0-9_.]*)(?:$|[ ,;:](?P<point>.*)$)")


def plain_unit(unit: str) -> str:
    """A unit as plain text (``\\textmu{}s`` -> ``µs``, ``\\%`` -> ``%``)."""
    return _PLAIN_UNITS.get(unit, unit)


def split_source(source: str) -> tuple[str, str, str]:
    """A number's source as (file, field, point): ``out/studies/gemm/results.json: mac_efficiency 512x512x512
    load_load`` -> (``out/studies/gemm/results.json``, ``mac_efficiency``, ``512x512x512 load_load``). A source
    without a file (a module constant, a band the report sets) keeps its text as the file; a derived value keeps
    its expression as the field and no point."""
    file, sep, rest = source.partition(": ")
    if not sep:
        return source, "", ""
    rest = rest.strip()
    m = _FIELD.match(rest)
    if m is None or not re.search(r"[_.]", m["field"]) or any(op in rest for op in (" / ", " - ", "sum ")):
        # a described quantity (no field name first) or a value derived from several fields
        return file, rest, ""
    return file, m["field"], (m["point"] or "").strip(" ,;")
