"""matplotlib is the optional ``draw`` extra: the compiler never imports it, and drawing without it says what to
install. Each check runs in a fresh interpreter, because this test process may already have matplotlib loaded."""

from __future__ import annotations

import json
import subprocess
import sys

#: Top-level modules matplotlib brings with it (its own and its dependencies').
DRAWING_MODULES = ("matplotlib", "PIL", "fontTools", "kiwisolver", "contourpy", "cycler", "pyparsing")


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_compiling_a_topology_imports_no_drawing_library():
    code = f"""
import json, sys
import kernbench.topology
import kernbench.topology.diagrams, kernbench.topology.heatmap  # the drawing modules themselves import lazily
from kernbench.topology import PathRouter, builtin
graph = builtin()
PathRouter(graph)
kernbench.topology.heatmap.link_colour(0.5, 1.0)
kernbench.topology.diagrams.box_colour("cube")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {list(DRAWING_MODULES)!r})))
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_drawing_without_matplotlib_names_the_extra_to_install(tmp_path):
    code = f"""
import sys
sys.modules["matplotlib"] = None  # as if it were not installed: `import matplotlib` raises ImportError
from kernbench.topology import builtin, emit_diagrams
from kernbench.topology.diagrams import DrawingUnavailableError
from kernbench.topology.errors import KernbenchError
from kernbench.topology.heatmap import write_heatmap
graph = builtin()
assert issubclass(DrawingUnavailableError, KernbenchError)
for draw in (lambda: emit_diagrams(graph, {str(tmp_path / "d")!r}),
             lambda: write_heatmap(graph, {{}}, {str(tmp_path / "h.svg")!r}, title="t")):
    try:
        draw()
    except DrawingUnavailableError as exc:
        print(exc)
    else:
        raise SystemExit("drew without matplotlib")
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    assert "needs matplotlib, which is not installed" in lines[0]
    assert "pip install 'kernbench-topology[draw]'" in lines[0]
    assert not (tmp_path / "d").exists() and not (tmp_path / "h.svg").exists()
