"""The earlier report's numbers as this report reads them: the ``\\seed…`` macros of ``tex/reference/seed-claims.tex``.

That file (with ``tex/reference/gqa.json``, read by :mod:`kernbench.studies.gqa_reference`) is the only place a
number of the earlier report is written down; a generator that compares with one reads it here rather than
typing it (the grounding check keeps the LaTeX free of typed numbers, and
``tests/test_report_grounding.py`` the generators' Python).
"""

from __future__ import annotations

import re
from pathlib import Path

#: The earlier report's claims, one ``\\newcommand{\\seed…}`` per number, each with its source.
SEED_CLAIMS = Path(__file__).with_name("tex") / "reference" / "seed-claims.tex"
_SEED = re.compile(r"^\\newcommand\{\\(seed[A-Za-z]+)\}\{(.*)\}\s*(?:%.*)?$")
_LEADING_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)")


def seed_claims(path: Path = SEED_CLAIMS) -> dict[str, str]:
    """Macro name -> LaTeX body of every ``\\seed…`` macro of the earlier report's claims file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _SEED.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def seed_number(name: str, claims: dict[str, str] | None = None) -> float:
    """The number a ``\\seed…`` macro starts with (``28.8\\,\\textmu{}s`` -> 28.8)."""
    body = (claims or seed_claims())[name]
    m = _LEADING_NUMBER.match(body)
    if m is None:
        raise ValueError(f"{SEED_CLAIMS}: \\{name} = {body!r} does not start with a number")
    return float(m.group(1))


def seed_numbers(name: str, claims: dict[str, str] | None = None) -> tuple[float, ...]:
    """Every number of a ``\\seed…`` macro in order (``32$\\times$64$\\times$32`` -> (32, 64, 32))."""
    body = (claims or seed_claims())[name]
    found = tuple(float(x) for x in re.findall(r"\d+(?:\.\d+)?", body))
    if not found:
        raise ValueError(f"{SEED_CLAIMS}: \\{name} = {body!r} holds no number")
    return found
