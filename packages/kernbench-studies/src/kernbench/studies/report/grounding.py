"""The grounding check: a report section may not contain a hand-typed number.

Measured numbers reach the report only through ``generated/numbers.tex``.
This check reads a section file and reports every digit sequence left after
removing what may legitimately hold digits:

* comments, and the arguments of cross-referencing and layout commands
  (``\\label``, ``\\ref``, ``\\input``, ``\\includegraphics``, table column
  specifications, lengths);
* single-digit integers inside math (indices and coefficients of a formula,
  such as ``R_1`` or ``(n - 1)``);
* names that contain digits but are not quantities: the 2×3 SIP grid, the
  registered SIP topology names (``ring_1d``, ``torus_2d``, ...), ``PE~0``, the
  ``f16``/``f32`` dtypes.

Anything else, for example ``36.4~\\textmu s`` or ``25 %``, is a violation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernbench.topology.sip_topologies import sip_topology_names

_COMMENT = re.compile(r"(?<!\\)%.*$", re.MULTILINE)
_COMMAND_ARGS = re.compile(
    r"\\(?:label|ref|eqref|pageref|autoref|input|includegraphics|include|cite|hspace|vspace|setlength|"
    r"addcontentsline|begin\{tabular\}|begin\{longtable\})\*?(?:\[[^\]]*\])?(?:\{[^{}]*\})*")
_LENGTH = re.compile(r"\[[^\]]*\d[^\]]*(?:pt|mm|cm|em|ex|in|linewidth|textwidth)[^\]]*\]")
#: A registered SIP topology name as LaTeX may write it (``ring\_1d`` or ``ring_1d``).
_TOPOLOGY_NAMES = "|".join(re.escape(n).replace("_", r"\\?_") for n in sip_topology_names())
_ALLOWED = re.compile(r"2\s*\$\\times\$\s*3|2\s*\\times\s*3|" + _TOPOLOGY_NAMES + "|"
                      r"PE~0|\bf16\b|\bf32\b|\bopt[123]\b")
_MATH = re.compile(r"\$\$.*?\$\$|\$.*?\$|\\\[.*?\\\]|\\begin\{(align\*?|equation\*?)\}.*?\\end\{\1\}", re.DOTALL)
_SINGLE_DIGIT = re.compile(r"(?<![\d.])\d(?![\d.])")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class Violation:
    """A hand-typed number: file, 1-based line, and the text around it."""

    path: Path
    line: int
    number: str
    context: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: hand-typed number {self.number!r} in '{self.context}'"


def _blank(text: str, span: tuple[int, int]) -> str:
    """``text`` with ``span`` replaced by spaces (keeps offsets and line numbers)."""
    a, b = span
    return text[:a] + "".join("\n" if ch == "\n" else " " for ch in text[a:b]) + text[b:]


def check_text(text: str, path: Path = Path("<text>")) -> list[Violation]:
    """Every hand-typed number in LaTeX ``text``."""
    original = text
    for pattern in (_COMMENT, _COMMAND_ARGS, _LENGTH, _ALLOWED):
        for m in reversed(list(pattern.finditer(text))):
            text = _blank(text, m.span())
    for m in _MATH.finditer(text):
        inner = _SINGLE_DIGIT.sub(" ", text[m.start():m.end()])
        text = text[:m.start()] + inner + text[m.end():]
    out = []
    for m in _NUMBER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        src_line = original.splitlines()[line - 1].strip()
        out.append(Violation(path, line, m.group(), src_line[:100]))
    return out


def check_sections(folder: Path) -> list[Violation]:
    """Every hand-typed number in ``folder/*.tex`` (the report's section files)."""
    found: list[Violation] = []
    for path in sorted(Path(folder).glob("*.tex")):
        found += check_text(path.read_text(encoding="utf-8"), path)
    return found
