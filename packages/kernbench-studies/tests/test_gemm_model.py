"""The GEMM model is an independent check: its imports never reach the timing code, and its numbers are the
closed forms of its docstring, recomputed here by hand from the spec's constants.

Default constants (``topologies/topology.yaml``, the spec's defaults): peak 8 TFLOP/s, tile M32 x N32 x K64,
TCM 512 GB/s each way, 8 pseudo-channels of 16 GB/s per PE, 256 B bursts, NoC links 256 GB/s, DMA overhead 2 ns,
router 2 ns, HBM controller 10 ns, 64 B commands, 256 B flits. Hence (h = 2 links between a PE and its slice):

* G = 2*32*32*64 / 8000 = 16.384 ns;
* read latency  2 + 2*2 + 10 + (2*64 + 1*256)/256 + 256/512 = 16 + 1.5 + 0.5 = 18.0 ns;
* write latency 2 + 2 + 10 + 256/512 + 1*256/256 = 14 + 0.5 + 1 = 15.5 ns.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from kernbench.studies import gemm_model
from kernbench.studies.gemm_model import Constants, channels_touched, predict
from kernbench.topology import spec_from_dict

#: What the model may never reach: the simulator's timing code and everything built on it.
FORBIDDEN = ("kernbench.components", "kernbench.sim", "kernbench.runtime", "kernbench.tl")


# --------------------------------------------------------------------------- the import closure


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` (a package's ``__init__.py``), or None for a namespace package or a
    name that is not a module (an attribute imported with ``from x import name``)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _imported(path: Path, name: str) -> list[str]:
    """Every module name an import statement of ``path`` (module ``name``) may load, wherever the statement stands
    (module level, functions, ``if TYPE_CHECKING``): ``import a.b`` -> a, a.b; ``from a import b`` -> a and a.b
    (b may be a submodule); relative imports resolved against ``name``'s package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            targets = [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            found += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]  # importing a.b.c runs a, a.b first
    return found


def import_closure(module: str, follow: tuple[str, ...] = ("kernbench",),
                   forbidden: tuple[str, ...] = FORBIDDEN) -> dict[str, list[str]]:
    """Walk the imports of ``module`` transitively through every module under a ``follow`` prefix; return each
    forbidden module reached with the import chain that reaches it (empty: the closure is clean). A forbidden
    module is reported, never located or imported."""
    def under(name: str, prefixes: tuple[str, ...]) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    reached: dict[str, list[str]] = {}
    seen = {module}
    stack = [(module, [module])]
    while stack:
        name, chain = stack.pop()
        path = _module_file(name)
        if path is None:
            continue
        for target in _imported(path, name):
            if under(target, forbidden):
                reached.setdefault(target, [*chain, target])
            elif under(target, follow) and target not in seen:
                seen.add(target)
                stack.append((target, [*chain, target]))
    return reached


def test_the_model_imports_nothing_from_the_simulator_components_runtime_or_kernel_language():
    """The whole closure of kernbench.studies.gemm_model within kernbench.* (kernbench.topology and what it
    imports) stays clear of the timing code."""
    assert import_closure("kernbench.studies.gemm_model") == {}


def test_the_closure_walk_sees_the_study_module_reach_the_runtime():
    """A real positive: the study module that runs the simulator beside the model does reach it."""
    reached = import_closure("kernbench.studies.gemm")
    assert any(m.startswith("kernbench.runtime") for m in reached), reached


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A temporary package ``kb_planted`` whose modules import the timing code in the ways a model might."""
    pkg = tmp_path / "kb_planted"
    pkg.mkdir()
    files = {
        "__init__.py": "",
        "clean.py": "import math\nfrom kernbench.topology import TopologySpec\n",
        "top.py": "from kb_planted import clean\nfrom . import middle\n",  # reaches sim two imports down
        "middle.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                pass
            def later():
                from kernbench.sim import engine  # a function-level import counts too
                return engine
        """,
        "typed.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from kernbench.components.pe import engines
        """,
        "plain.py": "import kernbench.tl\n",
        "runtime.py": "from kernbench import runtime\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield "kb_planted"
    for name in [m for m in sys.modules if m == "kb_planted" or m.startswith("kb_planted.")]:
        del sys.modules[name]


def test_the_closure_walk_fails_on_a_planted_import_of_the_simulator(planted):
    follow = ("kernbench", planted)
    assert import_closure(f"{planted}.clean", follow) == {}
    reached = import_closure(f"{planted}.top", follow)
    assert reached == {"kernbench.sim": [f"{planted}.top", f"{planted}.middle", "kernbench.sim"],
                       "kernbench.sim.engine": [f"{planted}.top", f"{planted}.middle", "kernbench.sim.engine"]}
    assert set(import_closure(f"{planted}.typed", follow)) >= {"kernbench.components", "kernbench.components.pe"}
    assert set(import_closure(f"{planted}.plain", follow)) == {"kernbench.tl"}
    assert set(import_closure(f"{planted}.runtime", follow)) == {"kernbench.runtime"}


# --------------------------------------------------------------------------- hand computations

DEFAULT = spec_from_dict({})


def test_the_default_constants_give_the_docstring_latencies():
    c = Constants.from_spec(DEFAULT)
    assert c.gemm_tile_ns == pytest.approx(16.384)
    assert c.read_latency_ns == pytest.approx(18.0)
    assert c.write_latency_ns == pytest.approx(15.5)
    assert (c.channels, c.channel_gbs, c.burst_bytes, c.link_gbs) == (8, 16.0, 256, 256.0)


def test_channels_follow_the_burst_interleave():
    """32 rows of 64 B: a 6144 B pitch is 24 bursts, a multiple of the 8 channels, so every row is on one channel;
    a 6400 B pitch is 25 bursts and walks all 8; 2048 contiguous bytes are 8 bursts on 8 channels, 512 B are 2."""
    assert channels_touched(32, 64, 6144, 0, 8, 256) == 1
    assert channels_touched(32, 64, 6400, 0, 8, 256) == 8
    assert channels_touched(32, 64, 1024, 0, 8, 256) == 2  # 4 bursts apart: channels 0 and 4
    assert channels_touched(1, 2048, 0, 0, 8, 256) == 8
    assert channels_touched(1, 512, 0, 0, 8, 256) == 2
    assert channels_touched(1, 64, 0, 300, 8, 256) == 1


def test_the_data_term_takes_the_slower_stage_plus_one_unit_of_the_other():
    """D(B, c, p) = max(B/(c·b) + min(B, c·p)/β, B/β + min(B, p)/b) with b = 16, β = 256 (GB/s)."""
    c = Constants.from_spec(DEFAULT)
    assert c.data_ns(2048, 8, 256, 512.0) == pytest.approx(max(2048 / 128 + 2048 / 256, 2048 / 256 + 256 / 16))  # 24
    assert c.data_ns(4096, 8, 256, 512.0) == pytest.approx(4096 / 128 + 2048 / 256)  # 40: the second wave drains
    assert c.data_ns(2048, 1, 64, 512.0) == pytest.approx(2048 / 16 + 64 / 256)  # one hot channel: 128.25
    assert c.data_ns(64, 1, 256, 512.0) == pytest.approx(64 / 16 + 64 / 256)  # 4.25


def test_one_tile_passes_every_stage_once():
    """ref_ref 32x64x32, exactly one tile: A and B are contiguous 4096 B blocks on all 8 channels,
    R = 2 * (18 + max(4096/128 + 2048/256, 4096/256 + 256/16)) = 2 * 58 = 116; F = 8192/512 = 16; S = 2048/512 = 4;
    W = 15.5 + max(16 + 8, 8 + 16) = 39.5; every stage bound is their sum."""
    st = predict(DEFAULT, 32, 64, 32, "ref_ref")
    assert (st.read_ns, st.fetch_ns, st.gemm_ns, st.store_ns, st.write_ns) == (
        pytest.approx(116.0), pytest.approx(16.0), pytest.approx(16.384), pytest.approx(4.0), pytest.approx(39.5))
    assert st.total_ns == pytest.approx(116 + 16 + 16.384 + 4 + 39.5)  # 191.884
    assert st.bottleneck == "DMA_READ"  # a tie of every bound goes to the stage with the most work


def test_the_gemm_engine_paces_the_tiles_when_the_operands_are_in_tcm():
    """load_load 32x256x32: four K tiles of F = 16, G = 16.384; one store (4) and write-back (39.5) at the end.
    Bounds: FETCH 4*16 + 16.384 + 4 + 39.5 = 123.884; GEMM 16 + 4*16.384 + 4 + 39.5 = 125.036; the GEMM wins."""
    st = predict(DEFAULT, 32, 256, 32, "load_load")
    assert st.read_ns == 0.0 and st.store_ns == pytest.approx(1.0) and st.write_ns == pytest.approx(39.5 / 4)
    assert st.total_ns == pytest.approx(125.036)
    assert st.bottleneck == "GEMM"
    assert st.compute_bound_ns == pytest.approx(16 + 4 * 16.384 + 4)


@pytest.mark.parametrize(("m", "expected", "bottleneck"), [
    # exactly one tile along M: F 16 + G 16.384 + S 4 + W 39.5
    (32, 75.884, "DMA_WRITE"),
    # one row past it: a second, one-row tile: F = (64 + 2048)*2/512 = 8.25, S = 64/512 = 0.125, and a 64 B write
    # on one channel, W = 15.5 + max(64/16 + 64/256, 64/256 + 64/16) = 19.75. The write stage's bound is
    # F1 + G + S1 (first tile) + 39.5 + 19.75 = 36.384 + 59.25 = 95.634; the GEMM's only 16 + 32.768 + 19.875.
    (33, 95.634, "DMA_WRITE"),
])
def test_a_dimension_exactly_one_tile_and_one_past_it(m, expected, bottleneck):
    st = predict(DEFAULT, m, 64, 32, "load_load")
    assert st.total_ns == pytest.approx(expected)
    assert st.bottleneck == bottleneck


#: Non-default hardware: a 16x16x32 tile (M, N, K), 2 TFLOP/s, a 2 GHz clock.
SMALL = {"pe": {"clock_ghz": 2.0, "gemm": {"peak_tflops": 2.0, "tile_m": 16, "tile_n": 16, "tile_k": 32}}}


def test_a_smaller_tile_and_a_slower_engine_move_every_term():
    """ref_ref 16x64x16 on the SMALL spec: two K tiles, G = 2*16*16*32 / 2000 = 8.192.
    A block 16x32 of a 64-wide matrix: rows of 64 B, 128 B apart, bursts 0..7 -> 8 channels, pieces of 64 B:
    R_A = 18 + max(1024/128 + 512/256, 1024/256 + 64/16) = 28. B block 32x16 of a 16-wide matrix: 1024
    contiguous bytes, 4 bursts -> 4 channels: R_B = 18 + max(1024/64 + 1024/256, 1024/256 + 256/16) = 38.
    R = 66 per tile, F = (512 + 512)*2/512 = 4, S = 512/512 = 1, W = 15.5 + max(512/32 + 512/256, 2 + 16) = 33.5.
    The read bound: 2*66 + (4 + 8.192 + 1 + 33.5) = 178.692."""
    spec = spec_from_dict(SMALL)
    st = predict(spec, 16, 64, 16, "ref_ref")
    assert st.gemm_ns == pytest.approx(8.192)
    assert (st.read_ns, st.fetch_ns, st.store_ns, st.write_ns) == (
        pytest.approx(66.0), pytest.approx(4.0), pytest.approx(0.5), pytest.approx(33.5 / 2))
    assert st.total_ns == pytest.approx(178.692)
    assert st.bottleneck == "DMA_READ"


def test_the_clock_does_not_enter_the_gemm_model():
    """The engine's rate is published in TFLOP/s and every other constant in ns or GB/s, so the PE clock moves
    nothing (a 1 GHz and a 2 GHz spec predict the same)."""
    one_ghz = spec_from_dict({"pe": {**SMALL["pe"], "clock_ghz": 1.0}})
    assert predict(one_ghz, 16, 64, 16, "ref_ref") == predict(spec_from_dict(SMALL), 16, 64, 16, "ref_ref")


def test_a_second_read_channel_halves_the_read_stage():
    """The same case with pe.dma.read_channels = 2: a tile's A and B reads overlap (66 / 2 = 33 for the first),
    the read stage serves 132 / 2 = 66, so its bound is 66 + 46.692 = 112.692, above the GEMM's
    33 + 4 + 2*8.192 + 1 + 33.5 = 87.884."""
    spec = spec_from_dict({"pe": {**SMALL["pe"], "dma": {"read_channels": 2}}})
    st = predict(spec, 16, 64, 16, "ref_ref")
    assert st.read_ns == pytest.approx(33.0)
    assert st.total_ns == pytest.approx(112.692)


def test_an_unknown_staging_is_refused():
    with pytest.raises(ValueError, match="variant 'ref_load'"):
        predict(DEFAULT, 32, 32, 32, "ref_load")


def test_the_model_reads_only_the_spec():
    """predict takes a TopologySpec, not a compiled graph: no route of the compiled topology enters it."""
    assert "graph" not in predict.__code__.co_varnames
    assert not hasattr(gemm_model, "PathRouter") and not hasattr(gemm_model, "TopologyGraph")
