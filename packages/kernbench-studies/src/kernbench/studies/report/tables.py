"""LaTeX tables (booktabs) built from result rows; cells are escaped here, numbers rounded by the caller."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernbench.studies.base import StudyError
from kernbench.studies.report.grounding import DATA_BEGIN, DATA_END
from kernbench.studies.report.numbers import tex_escape

#: A report macro inside a table's caption or header text (``\kbArSips{}``): kept as the macro in LaTeX.
MACRO = re.compile(r"\\((?:kb|seed)[A-Za-z]+)(?:\{\})?")


def tex_text(text: str) -> str:
    """Plain ``text`` as LaTeX (:func:`~kernbench.studies.report.numbers.tex_escape`), its report macros kept."""
    out, pos = [], 0
    for m in MACRO.finditer(text):
        out += [tex_escape(text[pos:m.start()]), m.group()]
        pos = m.end()
    return "".join(out) + tex_escape(text[pos:])


@dataclass(frozen=True)
class TableData:
    """A results table before typesetting: label, caption (plain text), header, rows of plain-text cells, LaTeX
    column alignment. The report typesets it with :func:`latex`, the docs with :func:`markdown`.

    A number in the caption or the header is written as its report macro (``"over \\kbArSips{} SIPs"``), never
    in digits or words (the grounding check reads captions and headers; only the rows are numbers by design);
    ``values`` gives each such macro's plain text for the Markdown table."""

    label: str
    caption: str
    header: list[str]
    rows: list[list[str]]
    align: str
    #: LaTeX only: a header row above ``header`` of (label, columns spanned), and the lower header's cells to
    #: show under it (shorter, since the group names the rest), e.g. ("ring_1d", 2) over "µs", "model µs".
    groups: tuple[tuple[str, int], ...] = ()
    sub_header: tuple[str, ...] = ()
    #: Macro name -> plain text of every macro the caption or header uses (for :meth:`markdown`).
    values: Mapping[str, str] = field(default_factory=dict)

    def plain(self, text: str) -> str:
        """``text`` with its macros replaced by their values (a macro without one is an error)."""
        def value(m: re.Match) -> str:
            if m.group(1) not in self.values:
                raise StudyError(f"table {self.label}: \\{m.group(1)} has no value for the plain-text table")
            return self.values[m.group(1)]
        return MACRO.sub(value, text)

    def latex(self) -> str:
        """The table as a LaTeX float."""
        return table(self.label, self.caption, list(self.sub_header) or self.header, self.rows, self.align,
                     groups=self.groups)

    def markdown(self) -> str:
        """The table as a Markdown (MyST) table with its caption above."""
        right = [c == "r" for c in columns(self.align)]
        lines = [f"**{self.plain(self.caption)}**", "", "| " + " | ".join(self.plain(h) for h in self.header) + " |",
                 "|" + "|".join("---:" if r else "---" for r in right[:len(self.header)]) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"


#: The text width of the report (A4, 22 mm margins), pt, and the rough width of one character of the table font
#: (\\small), pt: enough to tell a table that fits from one that would run past the margin.
TEXT_WIDTH_PT = 471.0
CHAR_PT = 5.0
#: Columns from which a table is typeset at \\footnotesize with stretching, wrapping numeric columns.
WIDE_COLUMNS = 7


def columns(align: str) -> list[str]:
    """The column specs of a LaTeX alignment string (``l``, ``r``, ``c`` or ``p{...}``)."""
    return re.findall(r"p\{[^}]*\}|[lrc]", align)


def natural_width_pt(header: list[str], rows: list[list[str]]) -> float:
    """A rough natural width of a table at \\small: the longest cell of each column plus the column gaps."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    return sum(CHAR_PT * w + 12.0 for w in widths)


def is_wide(align: str, header: list[str], rows: list[list[str]]) -> bool:
    """Whether a table is typeset as a full-width ``tabularx`` (many columns, or wider than the text)."""
    return len(columns(align)) >= WIDE_COLUMNS or natural_width_pt(header, rows) > 0.95 * TEXT_WIDTH_PT


def _group_row(groups: tuple[tuple[str, int], ...]) -> list[str]:
    cells, rules, col = [], [], 1
    for text, span in groups:
        cells.append(rf"\multicolumn{{{span}}}{{c}}{{{tex_text(text)}}}" if text else "")
        if text:
            rules.append(rf"\cmidrule(lr){{{col}-{col + span - 1}}}")
        col += span
    row = []
    for (text, span), cell in zip(groups, cells, strict=True):
        row += [cell] if text else [""] * span
    return [" & ".join(row) + r" \\", " ".join(rules)]


def table(label: str, caption: str, header: list[str], rows: list[list[str]], align: str,
          note: str = "", small: bool = True, groups: tuple[tuple[str, int], ...] = ()) -> str:
    """A floating ``table`` with a caption (plain text, escaped), a header row and body rows (plain text cells).

    A wide table (:func:`is_wide`) becomes a ``tabularx`` of the text width at ``\\footnotesize``: its numeric
    (``r``) columns turn into stretching right-aligned ``R`` columns whose headers wrap, and ``p{}`` columns into
    wrapping ``L`` columns, so nothing runs past the margin (the build fails on an overfull box, ADR 0040)."""
    if any(len(r) != len(header) for r in rows):
        raise ValueError(f"table {label}: every row needs {len(header)} cells")
    wide = is_wide(align, header, rows)
    if wide:
        spec = "".join("R" if c == "r" else "L" if c.startswith("p") else c for c in columns(align))
        begin, end = rf"\begin{{tabularx}}{{\linewidth}}{{@{{}}{spec}@{{}}}}", r"\end{tabularx}"
        size = r"\footnotesize\setlength{\tabcolsep}{4pt}"
    else:
        begin, end = rf"\begin{{tabular}}{{@{{}}{align}@{{}}}}", r"\end{tabular}"
        size = r"\small" if small else ""
    lines = [
        "% Generated by kernbench report from study results; do not edit.",
        r"\begin{table}[tbp]",
        r"\centering" + size,
        rf"\caption{{{tex_text(caption)}}}",
        rf"\label{{{label}}}",
        begin,
        r"\toprule",
        *(_group_row(groups) if groups else []),
        " & ".join(tex_text(h) for h in header) + r" \\",
        r"\midrule",
    ]
    # the body rows are formatted from results: numbers by design, exempt from the grounding check (its markers)
    lines += [DATA_BEGIN, *(" & ".join(tex_escape(c) for c in r) + r" \\" for r in rows), DATA_END]
    lines += [r"\bottomrule", end]
    if note:
        lines.append(rf"\par\smallskip\footnotesize {tex_escape(note)}")
    lines += [r"\end{table}", ""]
    return "\n".join(lines)
