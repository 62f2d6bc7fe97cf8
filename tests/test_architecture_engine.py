"""The engine seam, checked (ADR 0032): only ``kernbench.sim`` knows SimPy, and the rest uses the engine's protocol.

* no module outside ``kernbench.sim`` imports ``simpy``;
* no module outside it reaches for an engine's ``env`` (SimPy's environment);
* every ``engine.X`` / ``eng.X`` in ``kernbench.components``, ``kernbench.tl``,
  ``kernbench.runtime`` and ``kernbench.ccl`` is a member of
  :class:`kernbench.sim.protocol.Engine`, and ``GraphEngine`` has every member;
* the wire formula stays in ``kernbench.sim.fabric``: the engine does not set a wire's counters.

Like ``tests/test_architecture.py`` these read the source (``ast``), so code under ``TYPE_CHECKING`` or inside a
function counts like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernbench.sim.protocol import ENGINE_MEMBERS

from . import package_chain

ROOT = Path(__file__).resolve().parents[1]
#: Names an engine goes by outside kernbench.sim: ``engine``, ``self.engine``, ``ctx.engine``, ``eng``, ``self.eng``.
ENGINE_NAMES = frozenset({"engine", "eng", "_engine"})
#: The packages that may use the engine only through its protocol.
CLIENTS = ("kernbench.components", "kernbench.tl", "kernbench.runtime", "kernbench.ccl")
#: A wire's counters and state, which only the wire formula (kernbench.sim.fabric) sets.
WIRE_STATE = frozenset({"busy_ns", "bytes", "free_at", "max_wait_ns", "messages", "packets"})


MODULES = package_chain.modules()
OUTSIDE_SIM = sorted(m for m in MODULES if m != "kernbench.sim" and not m.startswith("kernbench.sim."))


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def simpy_imports(tree: ast.AST) -> list[int]:
    """Lines that import ``simpy`` or one of its modules."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            lines += [node.lineno for a in node.names if a.name.split(".")[0] == "simpy"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "simpy":
            lines.append(node.lineno)
    return sorted(lines)


def _is_engine(node: ast.AST) -> bool:
    """Whether an expression names an engine: ``engine``, ``eng``, ``x.engine``, ``self.eng``..."""
    return (isinstance(node, ast.Name) and node.id in ENGINE_NAMES) or \
        (isinstance(node, ast.Attribute) and node.attr in ENGINE_NAMES)


def engine_attributes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, attribute)`` for every ``<engine>.attribute`` in the tree, and every ``getattr(<engine>, "name")``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_engine(node.value):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) >= 2 and _is_engine(node.args[0]) and isinstance(node.args[1], ast.Constant):
            out.append((node.lineno, str(node.args[1].value)))
    return sorted(out)


def wire_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, wire.counter)`` for every assignment to a wire's state (``wire.bytes += n``...)."""
    out = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr in WIRE_STATE and isinstance(t.value, ast.Name) \
                    and t.value.id in ("wire", "w"):
                out.append((t.lineno, f"{t.value.id}.{t.attr}"))
    return sorted(out)


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("module", OUTSIDE_SIM)
def test_only_the_sim_package_imports_simpy(module):
    lines = simpy_imports(_tree(MODULES[module]))
    assert not lines, f"{module} imports simpy (lines {lines}); use kernbench.sim's Engine protocol and Completion"


@pytest.mark.parametrize("module", OUTSIDE_SIM)
def test_no_module_outside_sim_touches_an_engines_env(module):
    lines = [line for line, attr in engine_attributes(_tree(MODULES[module])) if attr == "env"]
    assert not lines, f"{module} uses engine.env (lines {lines}); use engine.completion() / engine.at() / engine.now"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(CLIENTS)))
def test_clients_use_only_the_engine_protocol(module):
    bad = [f"line {line}: .{attr}" for line, attr in engine_attributes(_tree(MODULES[module]))
           if attr not in ENGINE_MEMBERS]
    assert not bad, f"{module} uses engine members outside kernbench.sim.protocol.Engine: {bad}; add them to the " \
                    f"protocol (and ADR 0032's list) or use a member it has"


def test_the_clients_use_the_engine_at_all():
    """The scan sees the engine where it is used (a scanner that finds nothing would pass every rule)."""
    used = {attr for m in MODULES if m.startswith(CLIENTS) for _, attr in engine_attributes(_tree(MODULES[m]))}
    assert {"now", "at", "completion", "send_control", "submit", "oplog"} <= used, sorted(used)


def test_graph_engine_has_every_protocol_member():
    from kernbench.components import default_registry
    from kernbench.sim import GraphEngine
    from kernbench.topology import compile_spec, spec_from_dict

    engine = GraphEngine(compile_spec(spec_from_dict({})), default_registry())
    missing = sorted(m for m in ENGINE_MEMBERS if not hasattr(engine, m))
    assert not missing, f"GraphEngine lacks {missing}"


def test_the_wire_formula_lives_in_the_fabric_module():
    for module, path in MODULES.items():
        if module != "kernbench.sim.fabric":
            found = wire_writes(_tree(path))
            assert not found, f"{module} sets a wire's state {found}; the wire formula is kernbench.sim.fabric.cross"
    assert wire_writes(_tree(MODULES["kernbench.sim.fabric"]))


# --------------------------------------------------------------------------- the scanners can fail


VIOLATIONS = '''
import simpy
from simpy.events import Event

class Block:
    def go(self, eng):
        ev = self.engine.env.event()
        eng.env.timeout(1)
        self.engine._pending.clear()
        getattr(ctx.engine, "wires")
        wire.bytes += 4
        return eng.now
'''


def test_the_scanners_see_each_violation():
    tree = ast.parse(VIOLATIONS)
    assert simpy_imports(tree) == [2, 3]
    attrs = engine_attributes(tree)
    assert [(line, a) for line, a in attrs if a not in ENGINE_MEMBERS] == [(7, "env"), (8, "env"), (9, "_pending"),
                                                                         (10, "wires")]
    assert (12, "now") in attrs
    assert wire_writes(tree) == [(11, "wire.bytes")]
