"""The code's shape, checked: the package chain, no import cycles, small language modules, no private reach-ins.

These read the source (``ast``), not the running program, so an import hidden
under ``TYPE_CHECKING`` or inside a function counts like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from . import package_chain

ROOT = Path(__file__).resolve().parents[1]
#: The layers in dependency order, from the packages' pyproject.toml files (package_chain.py)
CHAIN = [package_chain.layer(name) for name in package_chain.distributions()]
#: kernbench sub-package -> its layer (kernbench.tl lives in kernbench-components, beside kernbench.components)
DISTRIBUTION = {sub: package_chain.layer(name) for sub, name in package_chain.owner().items()}


MODULES = package_chain.modules()


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement in the file, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.append((sub if sub in MODULES else node.module, node.lineno))
    return [(m, line) for m, line in found if m in MODULES]


GRAPH = {name: sorted({m for m, _ in _imports(path)} - {name}) for name, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import cycle among the project's modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in GRAPH[m]:
            if state.get(n) == 1:
                return [*stack[stack.index(n):], n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(GRAPH):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_there_is_no_import_cycle_counting_type_checking_and_function_imports():
    assert _cycle() is None, " -> ".join(_cycle())


def test_the_scanner_sees_a_cycle_when_there_is_one():
    GRAPH["kernbench.topology.naming"].append("kernbench.sim.engine")
    try:
        assert _cycle() is not None
    finally:
        GRAPH["kernbench.topology.naming"].remove("kernbench.sim.engine")


def _distribution(module: str) -> str:
    return DISTRIBUTION[module.split(".")[1]]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_imports_upward_in_the_package_chain(module):
    if module == "kernbench":
        return
    here = CHAIN.index(_distribution(module))
    upward = [m for m in GRAPH[module] if m != "kernbench" and CHAIN.index(_distribution(m)) > here]
    assert not upward, f"{module} imports {upward}, above it in {' -> '.join(CHAIN)}"


def test_kernel_language_modules_stay_small():
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()
             if name.startswith("kernbench.tl")}
    assert sizes and max(sizes.values()) <= 500, sizes


# Private attributes of SimPy's own objects that the engine's hot path uses on purpose (pinned by
# packages/kernbench-sim/tests/test_simpy_pin.py): (module, attribute).
SIMPY_INTERNALS = {("kernbench.sim.engine", "_queue"), ("kernbench.sim.engine", "_eid"),
                   ("kernbench.sim.engine", "_now"), ("kernbench.sim.engine", "_value"),
                   ("kernbench.sim.engine", "_ok"),  # GraphEngine.run(until=...) builds SimPy's URGENT stop event
                   # the flow-mode half of the engine (ADR 0039) reads the clock and books on the engine's own
                   # calendar (ADR 0038) on the same hot path as the packet half
                   ("kernbench.sim.flow", "_now"), ("kernbench.sim.flow", "_at")}


def _private_reaches(path: Path) -> list[tuple[int, str]]:
    """``x._name`` accesses where ``x`` is not ``self``/``cls`` (a reach into another object's privates).

    Names of third-party and standard-library modules (``argparse._SubParsersAction`` in an annotation) are
    not the project's objects and are left out."""
    tree = ast.parse(path.read_text(), str(path))
    foreign = {(a.asname or a.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if not a.name.startswith("kernbench")}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in foreign):
                continue
            out.append((node.lineno, f"{ast.unparse(base)}.{node.attr}"))
    return out


def _owner_package(attr_base: str, module: str) -> bool:
    """Whether ``module`` may touch this private: objects of its own distribution only (best effort: the
    kernel language's helper classes reach into their TLContext, which is the same package)."""
    return module.startswith("kernbench.tl.") and attr_base.split(".")[0] in ("self", "ctx", "h", "handle")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "kernbench"))
def test_no_module_reaches_into_another_objects_privates(module):
    bad = []
    for line, expr in _private_reaches(MODULES[module]):
        attr = expr.rsplit(".", 1)[1]
        if (module, attr) in SIMPY_INTERNALS or _owner_package(expr, module):
            continue
        bad.append(f"line {line}: {expr}")
    assert not bad, f"{module} touches private attributes of other objects: {bad}"


_ID_TEMPLATE = __import__("re").compile(r"(^|\.)sip\{\}|\.cube\{\}|\.pe\{\}|\{\}\.pe_[a-z]")


def _id_templates(path: Path) -> list[tuple[int, str]]:
    """f-strings that format node ids (``sip{}``, ``.cube{}``, ``{}.pe_dma``...)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.JoinedStr):
            template = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            if _ID_TEMPLATE.search(template):
                out.append((node.lineno, template))
    return out


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "kernbench.topology.naming"))
def test_node_ids_are_formatted_only_by_the_naming_module(module):
    found = _id_templates(MODULES[module])
    assert not found, f"{module} formats node ids itself (use kernbench.topology.naming): {found}"


def test_the_id_scanner_sees_a_formatted_id(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('pe = 1\nblock = f"{pe}.pe_dma"\nother = f"sip{pe}.cube{pe}"\nfine = f"{pe} bytes"\n')
    assert [line for line, _ in _id_templates(sample)] == [2, 3]
