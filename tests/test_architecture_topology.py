"""SIP topology families are strategies: no module outside ``kernbench.topology.sip_topologies`` names one.

``system.sips.topology`` used to be compared with ``"ring_1d"``, ``"torus_2d"``
and ``"mesh_2d_no_wrap"`` across the compiler, the spec checks, the
collectives and the studies, so a new family meant editing all of them. Now
every such decision asks the registered strategy
(:func:`kernbench.topology.sip_topologies.get_sip_topology`). This test reads
the source (``ast``) of every package module and fails on a string constant
in code that contains a shipped family's name; docstrings may still mention
them (and YAML files are not read).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("ring_1d", "torus_2d", "mesh_2d_no_wrap")
#: the one package allowed to spell the names: where the families are defined and registered
HOME = Path("kernbench", "topology", "sip_topologies")


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every docstring constant of a module, class or function."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def offending_literals(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every string constant in code, not a docstring, that contains a SIP topology name."""
    tree = ast.parse(source, filename)
    docs = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and any(name in node.value for name in NAMES))


def _source_modules() -> list[tuple[Path, Path]]:
    """(src folder, module) of every package module outside the strategies' home (build copies left out)."""
    out = []
    for src in sorted(ROOT.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            rel = path.relative_to(src)
            if rel.parent == HOME or HOME in rel.parents:
                continue
            out.append((src, path))
    return out


def test_no_module_outside_the_strategies_names_a_sip_topology_family():
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for src, path in _source_modules()
             for line, text in offending_literals(path.read_text(encoding="utf-8"), str(path))]
    assert not found, ("these modules switch on a SIP topology name; ask the strategy "
                       "(kernbench.topology.sip_topologies.get_sip_topology(name)) instead:\n" + "\n".join(found))


def test_the_scan_covers_the_packages_and_skips_only_the_strategies():
    scanned = {path.relative_to(src).as_posix() for src, path in _source_modules()}
    assert "kernbench/topology/compiler.py" in scanned and "kernbench/ccl/neighbours.py" in scanned
    assert not any(p.startswith("kernbench/topology/sip_topologies/") for p in scanned)


def test_the_check_fails_on_a_switch_and_passes_docstrings():
    """The check can fail: a switch like the compiler's former one is caught, in plain strings and f-strings."""
    switch = '''
"""Lays out ring_1d SIPs in one row (a docstring: allowed)."""


def cols(sips):
    """torus_2d and mesh_2d_no_wrap use the grid (a docstring: allowed)."""
    return sips.count if sips.topology == "ring_1d" else sips.grid[1]


WRAP = {"torus_2d": True, "mesh_2d_no_wrap": False}
TITLE = f"relative to torus_2d at {3} SIPs"
'''
    assert offending_literals(switch) == [(7, "ring_1d"), (10, "mesh_2d_no_wrap"), (10, "torus_2d"),
                                          (11, "relative to torus_2d at ")]
    assert offending_literals('"""ring_1d only in a docstring."""\nX = 1\n') == []
