"""Tests of PE block parameter declarations: shipped blocks unchanged, plugin parameters filled and checked.

Everything here runs with the topology package alone (no component is built):
a plugin implementation is a name registered with its declarations.
"""

from __future__ import annotations

import dataclasses
import typing
from types import SimpleNamespace

import pytest

from kernbench.topology import SpecError, compile_spec, spec_from_dict
from kernbench.topology import block_params as bp
from kernbench.topology import naming as nm
from kernbench.topology.block_params import BlockParam, BlockParamError
from kernbench.topology.builtins import builtin
from kernbench.topology.compiler import pe_block_params
from kernbench.topology.spec import TopologySpec

SPARSITY = BlockParam("sparsity", "fraction", 0.0, 0.0, 1.0, "share of zero weights the engine skips")
WAYS = BlockParam("ways", "ways", 4, 1, 16, "parallel tile ways")
PLUGIN = "test_sparse_gemm"


@pytest.fixture
def plugin():
    """A plugin GEMM implementation declaring the shipped GEMM parameters plus two of its own."""
    bp.register(PLUGIN, (*bp.PE_GEMM, SPARSITY, WAYS))
    yield PLUGIN
    bp.unregister(PLUGIN)


def tiny(pe: dict | None = None, components: dict | None = None):
    """A 1-SIP, 1-cube, 1-PE topology (fast to compile)."""
    data = {"system": {"sips": {"count": 1}}, "sip": {"cube_mesh": {"w": 1, "h": 1}},
            "cube": {"pe_layout": {"corners": ["NW"], "pe_per_corner": 1}, "hbm": {"pseudo_channels": 8}}}
    if pe is not None:
        data["pe"] = pe
    if components is not None:
        data["components"] = components
    return spec_from_dict(data, "tiny.yaml")


def gemm_attrs(graph) -> dict:
    return dict(graph.nodes[nm.pe_block(0, 0, 0, "pe_gemm")].attrs)


# --------------------------------------------------------------------------- shipped blocks: a pure refactor


def test_default_topology_block_attributes_are_the_hand_written_ones():
    """The node attributes of every shipped block, values, types and order, as the compiler wrote them before the
    blocks declared them (worked out from the default spec by hand)."""
    g = builtin("default")
    want = {
        "pe_cpu": {"overhead_ns": 2.0, "pe": 3, "clock_ghz": 1.0, "fixed_cycles": 40.0, "r_cycles_per_byte": 0.0625},
        "pe_scheduler": {"overhead_ns": 1.0, "pe": 3, "tile_m": 32, "tile_n": 32, "tile_k": 64},
        "pe_dma": {"overhead_ns": 2.0, "pe": 3, "read_channels": 1, "write_channels": 1},
        "pe_fetch_store": {"overhead_ns": 0.0, "pe": 3},
        "pe_gemm": {"overhead_ns": 0.0, "pe": 3, "tile_m": 32, "tile_n": 32, "tile_k": 64, "peak_tflops": 8.0},
        "pe_math": {"overhead_ns": 0.0, "pe": 3, "lanes": 64, "clock_ghz": 1.0},
        "pe_tcm": {"overhead_ns": 0.0, "pe": 3, "read_bw_gbs": 512.0, "write_bw_gbs": 512.0,
                   "capacity_bytes": 16 << 20, "scratch_bytes": 1 << 20},
        "pe_mmu": {"overhead_ns": 0.0, "pe": 3, "translate_ns": 1.0, "page_bytes": 4096},
        "pe_ipcq": {"overhead_ns": 2.0, "pe": 3, "depth": 2, "slot_bytes": 128 * 1024},
    }
    for block, attrs in want.items():
        got = dict(g.nodes[nm.pe_block(1, 5, 3, block)].attrs)
        assert list(got.items()) == list(attrs.items()), block
        assert [type(v) for v in got.values()] == [type(v) for v in attrs.values()], block


def test_shipped_values_follow_their_topology_fields():
    spec = tiny({"clock_ghz": 2.0, "tcm": {"capacity_mib": 8, "scratch_mib": 0.5}, "ipcq": {"slot_kib": 4}})
    params = pe_block_params(spec)
    assert params["pe_cpu"]["clock_ghz"] == params["pe_math"]["clock_ghz"] == 2.0
    assert params["pe_tcm"]["capacity_bytes"] == 8 << 20
    assert params["pe_tcm"]["scratch_bytes"] == 1 << 19
    assert params["pe_ipcq"]["slot_bytes"] == 4096


def test_spec_fields_of_shipped_parameters_are_built_from_the_declarations():
    """Default, range, doc and type of every spec field a shipped block reads come from its declaration."""
    seen = set()
    for params in bp.SHIPPED.values():
        for p in params:
            *parents, leaf = p.field.split(".")
            cls = TopologySpec
            for part in parents:
                cls = typing.get_type_hints(cls)[part]
            f = {f.name: f for f in dataclasses.fields(cls)}[leaf]
            assert f.default == p.default and type(f.default) is type(p.default), p.field
            assert (f.metadata["lo"], f.metadata["hi"], f.metadata["doc"]) == (p.low, p.high, p.doc), p.field
            assert typing.get_type_hints(cls)[leaf] is p.kind, p.field
            seen.add(p.field)
    assert len(seen) == 22


def test_a_shipped_field_out_of_its_declared_bounds_is_refused_at_load():
    with pytest.raises(SpecError, match=r"field 'pe.gemm.tile_m' = 5000 is invalid; expected an integer from 1 "
                                        r"to 4096"):
        tiny({"gemm": {"tile_m": 5000}})


# --------------------------------------------------------------------------- plugin parameters


def test_plugin_parameter_defaults_are_applied(plugin):
    attrs = gemm_attrs(compile_spec(tiny(components={"pe_gemm": plugin})))
    assert attrs["sparsity"] == 0.0 and type(attrs["sparsity"]) is float
    assert attrs["ways"] == 4
    assert attrs["tile_k"] == 64 and attrs["peak_tflops"] == 8.0  # the shipped ones it re-declares


def test_plugin_parameter_values_reach_the_node(plugin):
    spec = tiny({"blocks": {"pe_gemm": {"sparsity": 0.25, "ways": 8}}}, {"pe_gemm": plugin})
    attrs = gemm_attrs(compile_spec(spec))
    assert (attrs["sparsity"], attrs["ways"]) == (0.25, 8)
    assert list(attrs)[:2] == ["overhead_ns", "pe"]


def test_an_integer_written_for_a_number_parameter_becomes_a_number(plugin):
    attrs = gemm_attrs(compile_spec(tiny({"blocks": {"pe_gemm": {"sparsity": 1}}}, {"pe_gemm": plugin})))
    assert attrs["sparsity"] == 1.0 and type(attrs["sparsity"]) is float


def test_out_of_bounds_value_is_refused_naming_block_parameter_and_bound(plugin):
    spec = tiny({"blocks": {"pe_gemm": {"sparsity": 1.5}}}, {"pe_gemm": plugin})
    with pytest.raises(BlockParamError) as exc:
        compile_spec(spec)
    msg = str(exc.value)
    assert msg == ("tiny.yaml: pe.blocks.pe_gemm.sparsity = 1.5 is out of bounds for parameter 'sparsity' of block "
                   "pe_gemm (implementation 'test_sparse_gemm'); expected a number from 0 to 1 (fraction)")
    assert "\n" not in msg and isinstance(exc.value, SpecError)


def test_below_the_lower_bound_is_refused(plugin):
    with pytest.raises(BlockParamError, match=r"pe.blocks.pe_gemm.ways = 0 is out of bounds .* expected an "
                                              r"integer from 1 to 16"):
        compile_spec(tiny({"blocks": {"pe_gemm": {"ways": 0}}}, {"pe_gemm": plugin}))


def test_a_number_for_an_integer_parameter_is_refused(plugin):
    with pytest.raises(BlockParamError, match=r"ways = 2.5 is out of bounds .* expected an integer"):
        compile_spec(tiny({"blocks": {"pe_gemm": {"ways": 2.5}}}, {"pe_gemm": plugin}))


def test_unknown_parameter_is_refused_listing_the_allowed_names(plugin):
    with pytest.raises(BlockParamError) as exc:
        compile_spec(tiny({"blocks": {"pe_gemm": {"sparsty": 0.5}}}, {"pe_gemm": plugin}))
    assert str(exc.value) == ("tiny.yaml: pe.blocks.pe_gemm.sparsty: block pe_gemm (implementation "
                              "'test_sparse_gemm') has no parameter 'sparsty'; did you mean 'sparsity'? its "
                              "parameters: sparsity, ways")


def test_a_shipped_block_has_no_pe_blocks_parameters():
    with pytest.raises(BlockParamError, match=r"pe.blocks.pe_gemm.sparsity: block pe_gemm \(implementation "
                                              r"'pe_gemm'\) has no parameter 'sparsity'; its parameters: none"):
        compile_spec(tiny({"blocks": {"pe_gemm": {"sparsity": 0.5}}}))


def test_a_parameter_written_in_a_topology_field_is_not_set_under_pe_blocks(plugin):
    with pytest.raises(BlockParamError, match=r"parameter 'tile_m' of block pe_gemm is set by the topology field "
                                              r"'pe.gemm.tile_m', not under pe.blocks"):
        compile_spec(tiny({"blocks": {"pe_gemm": {"tile_m": 16}}}, {"pe_gemm": plugin}))


def test_pe_blocks_names_pe_blocks_and_numbers():
    with pytest.raises(SpecError, match=r"pe.blocks: 'pe_gem' is not a PE block; did you mean 'pe_gemm'\?"):
        tiny({"blocks": {"pe_gem": {"x": 1}}})
    with pytest.raises(SpecError, match=r"field 'pe.blocks.pe_gemm.x' = 'fast' is invalid; expected a finite number"):
        tiny({"blocks": {"pe_gemm": {"x": "fast"}}})
    with pytest.raises(SpecError, match=r"field 'pe.blocks' = \[1\] is invalid"):
        tiny({"blocks": [1]})


def test_an_implementation_without_declarations_gets_its_blocks_shipped_parameters():
    spec = tiny(components={"pe_gemm": "no_such_impl_declared"})
    assert pe_block_params(spec)["pe_gemm"] == pe_block_params(tiny())["pe_gemm"]


def test_an_installed_plugins_params_are_found_through_its_entry_point(monkeypatch):
    cls = SimpleNamespace(PARAMS=(*bp.PE_MATH, WAYS))
    ep = SimpleNamespace(load=lambda: cls)
    calls = []

    def entry_points(group, name):
        calls.append((group, name))
        return [ep] if name == "ep_math" else []

    monkeypatch.setattr(bp.metadata, "entry_points", entry_points)
    try:
        spec = tiny({"blocks": {"pe_math": {"ways": 2}}}, {"pe_math": "ep_math"})
        assert pe_block_params(spec)["pe_math"] == {"lanes": 64, "clock_ghz": 1.0, "ways": 2}
        assert ("kernbench.components", "ep_math") in calls
    finally:
        bp.unregister("ep_math")


# --------------------------------------------------------------------------- declarations


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "x", "unit": "", "default": 5, "low": 0, "high": 1}, "the default 5 is outside its bounds"),
    ({"name": "Bad-Name", "unit": "", "default": 0}, "lowercase snake_case"),
    ({"name": "pe", "unit": "", "default": 0}, "the name is reserved"),
    ({"name": "x", "unit": "", "default": True}, "the default must be an int or a float"),
    ({"name": "x", "unit": "", "default": 1, "scale": 0}, "scale must be a positive integer"),
    ({"name": "x", "unit": "", "default": 1.0, "high": float("inf")}, "bounds must be finite"),
])
def test_bad_declarations_are_refused(kwargs, match):
    with pytest.raises(BlockParamError, match=match):
        BlockParam(**kwargs)


def test_registration_refuses_duplicates_and_taken_names(plugin):
    with pytest.raises(BlockParamError, match="declares parameter\\(s\\) ways twice"):
        bp.register("test_twice", (WAYS, WAYS))
    with pytest.raises(BlockParamError, match="'pe_gemm' already declares parameters"):
        bp.register("pe_gemm", (SPARSITY,))
    with pytest.raises(BlockParamError, match=f"'{PLUGIN}' already declares parameters"):
        bp.register(PLUGIN, (SPARSITY,))
    assert bp.register(PLUGIN, (*bp.PE_GEMM, SPARSITY, WAYS))  # the same again is harmless
    with pytest.raises(BlockParamError, match="PARAMS must hold BlockParam"):
        bp.register("test_bad", ("sparsity",))


def test_param_docs_list_every_declaration(plugin):
    rows = {(impl, name): (unit, doc) for impl, name, unit, _default, doc in bp.param_docs()}
    assert rows[("pe_tcm", "capacity_bytes")][0] == "MiB"
    assert "set at pe.tcm.capacity_mib; the node carries x 1048576" in rows[("pe_tcm", "capacity_bytes")][1]
    assert rows[(PLUGIN, "sparsity")] == ("fraction", "share of zero weights the engine skips (a number from 0 "
                                                      "to 1; set at pe.blocks.<block>.sparsity)")
    assert {impl for impl, _ in rows} >= set(nm.PE_BLOCKS) - {"pe_fetch_store"}
