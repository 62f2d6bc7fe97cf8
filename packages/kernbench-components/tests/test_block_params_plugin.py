"""A plugin PE block declares a parameter of its own: the topology sets it, the compiler checks it, the block reads
it, and neither the compiler, the naming module nor the runtime is edited for it."""

from __future__ import annotations

import importlib
import sys
import textwrap
from types import SimpleNamespace

import pytest

from kernbench.components import registry as reg
from kernbench.components.pe.cpu import PeCpu
from kernbench.components.pe.dma import PeDma
from kernbench.components.pe.engines import PeFetchStore, PeGemm, PeMath
from kernbench.components.pe.ipcq import PeIpcq
from kernbench.components.pe.mmu import PeMmu
from kernbench.components.pe.scheduler import PeScheduler
from kernbench.components.pe.tcm import PeTcm
from kernbench.sim import GraphEngine
from kernbench.topology import block_params as bp
from kernbench.topology import compile_spec, spec_from_dict
from kernbench.topology import naming as nm
from kernbench.topology.block_params import BlockParamError

PLUGIN_SOURCE = '''
from kernbench.components.pe.engines import PeGemm
from kernbench.topology.block_params import BlockParam


class SparseGemm(PeGemm):
    """A GEMM engine that skips a share of zero weights: each tile takes (1 - sparsity) of the dense time."""

    PARAMS = (*PeGemm.PARAMS,
              BlockParam("sparsity", "fraction", 0.0, 0.0, 0.9, "share of zero weights the engine skips"))
    __slots__ = ("sparsity",)

    def __init__(self, engine, node):
        super().__init__(engine, node)
        self.sparsity = node.attrs["sparsity"]
        self.tile_ns *= 1.0 - self.sparsity
'''

TINY = {"system": {"sips": {"count": 1}}, "sip": {"cube_mesh": {"w": 1, "h": 1}},
        "cube": {"pe_layout": {"corners": ["NW"], "pe_per_corner": 1}, "hbm": {"pseudo_channels": 8}}}


@pytest.fixture
def sparse_gemm(tmp_path, monkeypatch):
    """The plugin class, defined in a module written for this test."""
    (tmp_path / "kb_test_sparse_gemm.py").write_text(textwrap.dedent(PLUGIN_SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("kb_test_sparse_gemm")
    yield module.SparseGemm
    bp.unregister("sparse_gemm")
    sys.modules.pop("kb_test_sparse_gemm", None)


def _spec(pe: dict | None = None):
    return spec_from_dict({**TINY, "components": {"pe_gemm": "sparse_gemm"}, **({"pe": pe} if pe else {})}, "t.yaml")


def test_a_plugin_block_sees_the_parameter_its_topology_sets(sparse_gemm):
    registry = reg.register_block(reg.default_registry(plugins=False), "sparse_gemm", sparse_gemm, ("pe_gemm",))
    graph = compile_spec(_spec({"blocks": {"pe_gemm": {"sparsity": 0.5}}}))
    engine = GraphEngine(graph, registry)
    gemm = engine.components[nm.pe_block(0, 0, 0, "pe_gemm")]
    assert type(gemm) is sparse_gemm
    assert gemm.sparsity == 0.5
    dense = GraphEngine(compile_spec(spec_from_dict(TINY)), reg.default_registry(plugins=False))
    assert gemm.tile_ns == pytest.approx(dense.components[nm.pe_block(0, 0, 0, "pe_gemm")].tile_ns / 2)


def test_a_plugin_block_left_unset_takes_its_default(sparse_gemm):
    registry = reg.register_block(reg.default_registry(plugins=False), "sparse_gemm", sparse_gemm, ("pe_gemm",))
    engine = GraphEngine(compile_spec(_spec()), registry)
    assert engine.components[nm.pe_block(0, 0, 0, "pe_gemm")].sparsity == 0.0


def test_a_plugin_parameter_out_of_bounds_is_refused(sparse_gemm):
    reg.register_block(reg.default_registry(plugins=False), "sparse_gemm", sparse_gemm, ("pe_gemm",))
    with pytest.raises(BlockParamError, match=r"pe.blocks.pe_gemm.sparsity = 0.95 is out of bounds for parameter "
                                              r"'sparsity' of block pe_gemm \(implementation 'sparse_gemm'\); "
                                              r"expected a number from 0 to 0.9"):
        compile_spec(_spec({"blocks": {"pe_gemm": {"sparsity": 0.95}}}))


def test_an_installed_plugin_registers_its_declarations(sparse_gemm, monkeypatch):
    ep = SimpleNamespace(name="sparse_gemm", value="kb_test_sparse_gemm:SparseGemm", load=lambda: sparse_gemm)
    bad = SimpleNamespace(name="bad_gemm", value="x:Y", load=lambda: SimpleNamespace(PARAMS=("not a param",)))
    monkeypatch.setattr(reg.metadata, "entry_points", lambda group: [ep, bad])
    reg.plugin_components.cache_clear()
    try:
        found, problems = reg.plugin_components()
    finally:
        reg.plugin_components.cache_clear()
    assert [name for name, _ in found] == ["sparse_gemm"]
    assert bp.declared("sparse_gemm") == sparse_gemm.PARAMS
    assert len(problems) == 1 and "'bad_gemm'" in problems[0] and "PARAMS must hold BlockParam" in problems[0]


@pytest.mark.parametrize("cls, params", [
    (PeCpu, bp.PE_CPU), (PeScheduler, bp.PE_SCHEDULER), (PeDma, bp.PE_DMA), (PeTcm, bp.PE_TCM),
    (PeFetchStore, bp.PE_FETCH_STORE), (PeGemm, bp.PE_GEMM), (PeMath, bp.PE_MATH), (PeMmu, bp.PE_MMU),
    (PeIpcq, bp.PE_IPCQ),
])
def test_each_shipped_block_declares_the_parameters_the_compiler_gives_it(cls, params, graph):
    assert cls.PARAMS is params
    block = next(b for b, p in bp.SHIPPED.items() if p is params)
    node = graph.nodes[nm.pe_block(0, 0, 0, block)]
    assert set(node.attrs) - {"overhead_ns", "pe"} == {p.name for p in params} - {"overhead_ns"}
