"""Tests of the topology spec: defaults, derived values, validation errors and the shipped variants.

Expected values are taken from the hardware table / ``topologies/topology.yaml`` by hand,
never from the code under test.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest
import yaml

from kernbench.topology import SpecError, TopologySpec, load_spec, spec_from_dict
from kernbench.topology.builtins import topologies_folder
from kernbench.topology.spec import DEFAULT_COMPONENTS
from kernbench.topology.spec_loader import field_docs

TOPOLOGIES = topologies_folder(Path(__file__))
DEFAULT_YAML = TOPOLOGIES / "topology.yaml"

GIB = 1 << 30
MIB = 1 << 20


@pytest.fixture(scope="module")
def spec() -> TopologySpec:
    return load_spec(DEFAULT_YAML)


def _raises(data: dict, *needles: str) -> str:
    """Assert spec_from_dict(data) raises SpecError whose message contains every needle."""
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return msg


# --------------------------------------------------------------------------- the hardware table


def test_default_file_name_and_source(spec):
    assert spec.name == "ahbm-default"
    assert spec.source == str(DEFAULT_YAML)


def test_system_values(spec):
    assert spec.system.sips.count == 2
    assert spec.system.sips.topology == "ring_1d"
    assert spec.system.sips.grid == (1, 2)
    assert spec.system.pcie.bw_gbs == 768.0
    assert spec.system.pcie.latency_ns == 50.0
    assert spec.system.pcie.endpoint_overhead_ns == 10.0
    assert spec.system.pcie.switch_overhead_ns == 20.0
    assert spec.system.pcie.host_overhead_ns == 0.0
    assert spec.system.sip_gap_mm == 10.0


def test_sip_values(spec):
    assert (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h) == (4, 4)
    assert spec.sip.cube_mesh.gap_mm == 2.0
    assert spec.cubes_per_sip == 16
    assert spec.sip.io.attach_cube == 0
    assert spec.sip.io.noc_bw_gbs == 512.0
    assert spec.sip.io.io_cpu_overhead_ns == 20.0
    assert spec.sip.ucie.bw_gbs == 512.0
    assert spec.sip.ucie.latency_ns == 8.0
    assert spec.sip.ucie.routing_weight_mm == 1.0


def test_cube_values(spec):
    cube = spec.cube
    assert (cube.geometry.w_mm, cube.geometry.h_mm) == (12.0, 12.0)
    assert cube.pe_layout.corners == ("NW", "NE", "SW", "SE")
    assert cube.pe_layout.pe_per_corner == 2
    assert spec.pes_per_cube == 8
    assert cube.noc.link_bw_gbs == 256.0
    assert cube.noc.router_overhead_ns == 2.0
    assert cube.noc.ucie_connections == 2
    assert cube.hbm.capacity_gib == 48.0
    assert cube.hbm.bw_gbs == 1024.0
    assert cube.hbm.pseudo_channels == 64
    assert cube.hbm.burst_bytes == 256
    assert cube.hbm.mapping_mode == "per_pe"
    assert cube.sram.capacity_mib == 32.0
    assert cube.sram.link_bw_gbs == 128.0
    assert cube.placement.m_cpu_pos_mm == (1.5, 5.5)
    assert cube.placement.sram_pos_mm == (1.5, 8.5)


def test_pe_values(spec):
    pe = spec.pe
    assert pe.clock_ghz == 1.0
    assert pe.cpu_overhead_ns == 2.0
    assert pe.scheduler_overhead_ns == 1.0
    assert pe.gemm.peak_tflops == 8.0
    assert (pe.gemm.tile_m, pe.gemm.tile_n, pe.gemm.tile_k) == (32, 32, 64)
    assert pe.tcm.capacity_mib == 16.0
    assert pe.tcm.read_bw_gbs == 512.0
    assert pe.tcm.write_bw_gbs == 512.0
    assert pe.tcm.scratch_mib == 1.0
    assert (pe.dma.read_channels, pe.dma.write_channels) == (1, 1)
    assert pe.cost_model.fixed_cycles == 40.0
    assert pe.cost_model.r_cycles_per_byte == 0.0625
    assert pe.cost_model.max_composite_logical_bytes == 1024


def test_fabric_values(spec):
    assert spec.fabric.flit_bytes == 256
    assert spec.fabric.packet_bytes == 4096
    assert spec.fabric.control_bytes == 64


def test_derived_values(spec):
    # 48 GiB split over 8 PEs = 6 GiB per slice.
    assert spec.hbm_slice_bytes == 6 * GIB == 6442450944
    assert spec.channels_per_pe == 8  # 64 / 8
    assert spec.hbm_channel_bw_gbs == 16.0  # 1024 / 64


def test_component_bindings(spec):
    b = spec.component_bindings
    assert b["router"] == "forwarding"
    assert b["hbm_ctrl"] == "hbm_ctrl"
    assert b["pe_dma"] == "pe_dma"
    assert b["pe_gemm"] == "pe_gemm" and b["io_cpu"] == "io_cpu"
    assert b["pe_mmu"] == "pe_mmu" and b["pe_ipcq"] == "pe_ipcq"
    assert len(b) == 20
    b["router"] = "mutated"  # a fresh dict each time
    assert spec.component_bindings["router"] == "forwarding"


def test_builtin_defaults_equal_the_default_file(spec):
    builtin = spec_from_dict({})
    assert builtin.name == "ahbm"
    assert builtin.source == "<dict>"
    assert dataclasses.replace(builtin, name=spec.name, source=spec.source) == spec


def test_derived_values_follow_the_inputs():
    s = spec_from_dict({"cube": {"pe_layout": {"corners": ["NW", "SE"], "pe_per_corner": 3},
                                 "hbm": {"capacity_gib": 12.0, "pseudo_channels": 48, "bw_gbs": 96.0}}})
    assert s.pes_per_cube == 6
    assert s.hbm_slice_bytes == 2 * GIB  # 12 GiB / 6
    assert s.channels_per_pe == 8  # 48 / 6
    assert s.hbm_channel_bw_gbs == 2.0  # 96 / 48
    s2 = spec_from_dict({"sip": {"cube_mesh": {"w": 3, "h": 5}}})
    assert s2.cubes_per_sip == 15


def test_components_merge_over_defaults():
    s = spec_from_dict({"components": {"router": "custom_router"}})
    b = s.component_bindings
    assert b["router"] == "custom_router"
    for k, v in DEFAULT_COMPONENTS:
        if k != "router":
            assert b[k] == v


def test_int_accepted_for_float_field():
    s = spec_from_dict({"cube": {"noc": {"link_bw_gbs": 300}}})
    assert s.cube.noc.link_bw_gbs == 300.0
    assert isinstance(s.cube.noc.link_bw_gbs, float)


def test_disabled_links_parsed_as_tuples():
    s = spec_from_dict({"disabled_links": [["a.b", "c.d"], ["e", "f"]]})
    assert s.disabled_links == (("a.b", "c.d"), ("e", "f"))


def test_field_docs_cover_leaves():
    rows = {path: default for path, _doc, default in field_docs()}
    assert rows["cube.noc.link_bw_gbs"] == 256.0
    assert rows["system.sips.count"] == 2
    assert rows["pe.cost_model.r_cycles_per_byte"] == 0.0625
    assert "source" not in rows
    assert "cube" not in rows  # sections are walked, not listed


# --------------------------------------------------------------------------- variants


@pytest.mark.parametrize("stem, kind", [
    ("6sip_2x3_ring_1d", "ring_1d"),
    ("6sip_2x3_torus_2d", "torus_2d"),
    ("6sip_2x3_mesh_2d_no_wrap", "mesh_2d_no_wrap"),
])
def test_six_sip_variants(stem, kind, spec):
    s = load_spec(TOPOLOGIES / f"{stem}.yaml")
    assert s.system.sips.count == 6
    assert s.system.sips.grid == (2, 3)
    assert s.system.sips.topology == kind
    # "Otherwise identical to topology.yaml"
    same = dataclasses.replace(s, name=spec.name, source=spec.source,
                               system=dataclasses.replace(s.system, sips=spec.system.sips))
    assert same == spec


# --------------------------------------------------------------------------- file errors


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as info:
        load_spec(missing)
    assert str(missing) in str(info.value)
    assert "not found" in str(info.value)


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(SpecError, match="not a file"):
        load_spec(tmp_path)


def test_malformed_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    # The stray second ':' on line 3 is the error.
    bad.write_text("name: ok\nsip:\n  io: w_mm: 6.0\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(bad)
    msg = str(info.value)
    assert str(bad) in msg
    assert "line 3" in msg


@pytest.mark.parametrize("line_no", [11, 41, 71])
def test_malformed_yaml_reports_the_offending_line(tmp_path, line_no):
    lines = DEFAULT_YAML.read_text(encoding="utf-8").splitlines()
    lines.insert(line_no - 1, "\tbogus: 1")  # a tab cannot start a YAML token
    bad = tmp_path / "bad2.yaml"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(bad)
    msg = str(info.value)
    assert str(bad) in msg
    assert "malformed YAML" in msg
    assert f"line {line_no}," in msg


def test_root_must_be_a_mapping(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(SpecError, match="mapping") as info:
        load_spec(bad)
    assert str(bad) in str(info.value)


def test_empty_mapping_gives_defaults(tmp_path):
    """``{}`` asks for every default; an empty file is refused (tests/test_hostile_cli_round2.py)."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n", encoding="utf-8")
    s = load_spec(empty)
    assert s.system.sips.count == 2
    assert s.source == str(empty)


def test_file_error_names_the_file(tmp_path):
    data = yaml.safe_load(DEFAULT_YAML.read_text(encoding="utf-8"))
    data["cube"]["noc"]["link_bw_gbs"] = "fast"
    p = tmp_path / "typo.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert str(info.value).startswith(str(p))
    assert "cube.noc.link_bw_gbs" in str(info.value)


def test_copy_of_default_loads_identically(tmp_path, spec):
    p = tmp_path / "copy.yaml"
    shutil.copy(DEFAULT_YAML, p)
    assert dataclasses.replace(load_spec(p), source=spec.source) == spec


# --------------------------------------------------------------------------- value errors


def test_wrong_type_message():
    _raises({"cube": {"noc": {"link_bw_gbs": "fast"}}}, "cube.noc.link_bw_gbs", "'fast'",
            "a number from 0.001 to 1000000")


def test_bool_is_not_an_integer():
    _raises({"system": {"sips": {"count": True}}}, "system.sips.count", "True", "an integer")


def test_float_is_not_an_integer():
    _raises({"cube": {"hbm": {"burst_bytes": 256.0}}}, "cube.hbm.burst_bytes", "256.0", "an integer from 16 to 65536")


@pytest.mark.parametrize("data, path, value, allowed", [
    ({"system": {"sips": {"count": 17}}}, "system.sips.count", "17", ("from 1 to 16",)),
    ({"system": {"sips": {"count": 0}}}, "system.sips.count", "0", ("from 1 to 16",)),
    ({"cube": {"noc": {"ucie_connections": 9}}}, "cube.noc.ucie_connections", "9", ("from 1 to 8",)),
    ({"pe": {"gemm": {"peak_tflops": 0}}}, "pe.gemm.peak_tflops", "0", ("from 0.001 to 10000",)),
    ({"pe": {"clock_ghz": -1.0}}, "pe.clock_ghz", "-1.0", ("from 0.001 to 100",)),
    ({"system": {"pcie": {"latency_ns": -1}}}, "system.pcie.latency_ns", "-1", ("from 0 to 1000000000",)),
    ({"cube": {"hbm": {"burst_bytes": 8}}}, "cube.hbm.burst_bytes", "8", ("from 16 to 65536",)),
    ({"cube": {"pe_layout": {"pe_per_corner": 5}}}, "cube.pe_layout.pe_per_corner", "5", ("from 1 to 4",)),
    ({"sip": {"cube_mesh": {"w": 0}}}, "sip.cube_mesh.w", "0", ("from 1 to 16",)),
])
def test_out_of_range(data, path, value, allowed):
    _raises(data, f"'{path}'", f"= {value}", *allowed)


def test_unknown_field_suggests_close_name():
    _raises({"cube": {"noc": {"link_bw_gb": 1}}}, "unknown field 'cube.noc.link_bw_gb'", "did you mean 'link_bw_gbs'")


def test_unknown_top_level_field_lists_known_fields():
    msg = _raises({"zzzz": 1}, "unknown field 'zzzz'", "known fields")
    for name in ("system", "sip", "cube", "pe", "fabric"):
        assert name in msg


def test_choices_field_lists_allowed_values():
    _raises({"system": {"sips": {"topology": "star"}}}, "system.sips.topology", "'star'",
            "'ring_1d'", "'torus_2d'", "'mesh_2d_no_wrap'")


def test_choices_in_a_list_field():
    _raises({"emit_views": ["sip", "foo"]}, "emit_views[1]", "'foo'", "'system'", "'pe'")


def test_mapping_mode_choices():
    _raises({"cube": {"hbm": {"mapping_mode": "interleaved"}}}, "cube.hbm.mapping_mode", "'per_pe'")


def test_section_must_be_a_mapping():
    _raises({"cube": 5}, "'cube'", "mapping")


def test_tuple_length_checked():
    _raises({"system": {"sips": {"grid": [1, 2, 3]}}}, "system.sips.grid", "a list of 2")


def test_bad_disabled_links():
    _raises({"disabled_links": [["a"]]}, "disabled_links", "[src, dst]")
    _raises({"disabled_links": "a,b"}, "disabled_links")


def test_bad_components():
    _raises({"components": {"router": 3}}, "components")


# --------------------------------------------------------------------------- consistency errors


def test_grid_count_mismatch_torus():
    _raises({"system": {"sips": {"count": 6, "topology": "torus_2d", "grid": [2, 2]}}},
            "system.sips.grid", "4 SIPs", "count = 6")


def test_grid_count_mismatch_mesh():
    _raises({"system": {"sips": {"count": 4, "topology": "mesh_2d_no_wrap", "grid": [1, 3]}}},
            "system.sips.grid", "3 SIPs", "count = 4")


def test_grid_matching_count_ok():
    s = spec_from_dict({"system": {"sips": {"count": 4, "topology": "torus_2d", "grid": [2, 2]}}})
    assert s.system.sips.grid == (2, 2)


def test_ring_ignores_grid():
    s = spec_from_dict({"system": {"sips": {"count": 5, "topology": "ring_1d", "grid": [1, 2]}}})
    assert s.system.sips.count == 5


@pytest.mark.parametrize("attach", [1, 3, 16, 20])
def test_attach_cube_must_be_in_west_column(attach):
    _raises({"sip": {"io": {"attach_cube": attach}}}, "sip.io.attach_cube", f"= {attach}")


def test_attach_cube_west_column_ok():
    assert spec_from_dict({"sip": {"io": {"attach_cube": 12}}}).sip.io.attach_cube == 12


def test_pseudo_channels_multiple_of_pes():
    _raises({"cube": {"hbm": {"pseudo_channels": 60}}}, "cube.hbm.pseudo_channels", "60", "8 PEs")


def test_packet_multiple_of_flit():
    _raises({"fabric": {"packet_bytes": 1000}}, "fabric.packet_bytes", "1000", "256")


def test_scratch_within_tcm():
    _raises({"pe": {"tcm": {"scratch_mib": 17.0}}}, "pe.tcm.scratch_mib", "17.0", "16.0")


def test_placement_inside_cube():
    _raises({"cube": {"placement": {"sram_pos_mm": [13.0, 1.0]}}}, "cube.placement.sram_pos_mm", "13.0")
    _raises({"cube": {"placement": {"m_cpu_pos_mm": [1.0, -0.5]}}}, "cube.placement.m_cpu_pos_mm")


def test_repeated_corner():
    _raises({"cube": {"pe_layout": {"corners": ["NW", "NW"]}}}, "cube.pe_layout.corners", "repeats")


# --------------------------------------------------------------------------- element checks


def test_invalid_corner_name_rejected():
    _raises({"cube": {"pe_layout": {"corners": ["NW", "XX"]}}}, "cube.pe_layout.corners[1]", "'XX'",
            "'NW'", "'NE'", "'SW'", "'SE'")
    _raises({"cube": {"pe_layout": {"corners": ["N"]}}}, "cube.pe_layout.corners[0]", "'N'")


@pytest.mark.parametrize("grid, index", [([-2, -3], 0), ([0, 2], 0), ([2, 0], 1)])
def test_grid_elements_range_checked(grid, index):
    # [-2, -3] would satisfy rows * cols == count; each element must be >= 1 on its own.
    _raises({"system": {"sips": {"count": 6, "topology": "torus_2d", "grid": grid}}},
            f"system.sips.grid[{index}]", "from 1 to 16")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_rejected(value):
    _raises({"cube": {"noc": {"link_bw_gbs": value}}}, "cube.noc.link_bw_gbs")
    _raises({"system": {"pcie": {"latency_ns": value}}}, "system.pcie.latency_ns")


def test_empty_corners_rejected():
    _raises({"cube": {"pe_layout": {"corners": []}}}, "cube.pe_layout.corners")


# --------------------------------------------------------------------------- address-layout limits (adr/0003)


def test_cube_count_limit():
    # 5 bits of cube id: 32 cubes per SIP fit, 36 do not.
    assert spec_from_dict({"sip": {"cube_mesh": {"w": 8, "h": 4}}}).cubes_per_sip == 32
    _raises({"sip": {"cube_mesh": {"w": 6, "h": 6}}}, "36", "32")


def test_hbm_capacity_limit():
    # 39-bit HBM offset: 512 GiB fits exactly, 513 GiB does not.
    assert spec_from_dict({"cube": {"hbm": {"capacity_gib": 512.0}}}).hbm_slice_bytes == 64 * GIB
    _raises({"cube": {"hbm": {"capacity_gib": 513.0}}}, "cube.hbm.capacity_gib", str(1 << 39))


def test_tcm_and_sram_capacity_limits():
    # 34-bit unit offset: 16384 MiB = 2**34 bytes fits, one MiB more does not.
    assert spec_from_dict({"pe": {"tcm": {"capacity_mib": 16384.0}}}).pe.tcm.capacity_mib == 16384.0
    _raises({"pe": {"tcm": {"capacity_mib": 16385.0}}}, "pe.tcm.capacity_mib", str(1 << 34))
    _raises({"cube": {"sram": {"capacity_mib": 16385.0}}}, "cube.sram.capacity_mib", str(1 << 34))


def test_scratch_must_leave_room_for_the_composite_staging_buffers():
    # 16 MiB TCM, tile tm 32 x tn 32 x tk 64: staging is 6 buffers of 32 * 64 * 4 bytes = 48 KiB
    spec_from_dict({"pe": {"tcm": {"scratch_mib": 16.0 - 48 / 1024}}})
    _raises({"pe": {"tcm": {"scratch_mib": 16.0 - 47 / 1024}}}, "pe.tcm.scratch_mib",
            "49152 bytes of composite staging")


# --------------------------------------------------------------------------- bounds on work and memory (issue 12)


@pytest.mark.parametrize("data, needles", [
    ({"cube": {"geometry": {"max_spacing_mm": 0.0001}}}, ("'cube.geometry.max_spacing_mm' = 0.0001",
                                                         "a number from 0.1 to 100")),
    ({"cube": {"geometry": {"w_mm": 1e6}}}, ("'cube.geometry.w_mm' = 1000000.0", "a number from 1 to 100")),
    ({"cube": {"hbm": {"pseudo_channels": 800000000}}}, ("= 800000000", "an integer from 1 to 1024")),
    ({"cube": {"noc": {"link_bw_gbs": 1.0e-300}}}, ("= 1e-300", "a number from 0.001 to 1000000")),
    ({"system": {"pcie": {"latency_ns": 1e300}}}, ("= 1e+300", "a number from 0 to 1000000000")),
    ({"pe": {"gemm": {"tile_m": 100000}}}, ("'pe.gemm.tile_m' = 100000", "an integer from 1 to 4096")),
    ({"fabric": {"flit_bytes": 1}}, ("'fabric.flit_bytes' = 1", "an integer from 16 to 65536")),
    ({"pe": {"ipcq": {"depth": 10 ** 9}}}, ("'pe.ipcq.depth'", "an integer from 1 to 1024")),
])
def test_fields_that_scale_work_or_memory_are_bounded(data, needles):
    _raises(data, *needles)


def test_packet_must_hold_a_control_message():
    # packet_bytes below control_bytes used to crash the engine with KeyError: 1.
    _raises({"fabric": {"flit_bytes": 32, "packet_bytes": 32}}, "'fabric.packet_bytes' = 32 is invalid",
            "at least fabric.control_bytes = 64")
    assert spec_from_dict({"fabric": {"flit_bytes": 32, "packet_bytes": 64}}).fabric.packet_bytes == 64


def test_pes_must_lie_on_the_die():
    _raises({"cube": {"geometry": {"pe_inset_mm": 50}}}, "'cube.geometry.pe_inset_mm' = 50",
            "puts PEs outside the 12 x 12 mm cube", "= 53 below w_mm = 12")
    _raises({"cube": {"geometry": {"pe_pitch_mm": 11}}}, "= 12.5 below w_mm = 12")
    spec_from_dict({"cube": {"geometry": {"pe_pitch_mm": 10}}})  # 1.5 + 10 = 11.5 mm: on the die


def test_hbm_rows_must_lie_inside_the_cube():
    _raises({"cube": {"geometry": {"hbm_gap_mm": 6}}}, "'cube.geometry.hbm_gap_mm' = 6", "below h_mm / 2 = 6")


def test_router_columns_are_bounded():
    _raises({"cube": {"geometry": {"w_mm": 100, "max_spacing_mm": 1}}}, "about 100 router columns",
            "max_spacing_mm >= w_mm / 64 = 1.5625")
    spec_from_dict({"cube": {"geometry": {"w_mm": 100, "max_spacing_mm": 1.6}}})


def test_unknown_component_node_type_is_refused():
    _raises({"components": {"routr": "forwarding"}}, "components: 'routr' is not a node type",
            "did you mean 'router'?")
    _raises({"components": {"zzz": "forwarding"}}, "node types: host_cpu, switch")


def test_field_docs_state_every_numeric_range():
    rows = {path: doc for path, doc, _ in field_docs()}
    assert rows["cube.hbm.pseudo_channels"].endswith("(an integer from 1 to 1024)")
    assert rows["cube.noc.link_bw_gbs"].endswith("(a number from 0.001 to 1000000)")
    numeric = [p for p, d in rows.items() if "(an integer" in d or "(a number" in d or "(a list of" in d]
    assert all(" from " in rows[p] or ">=" in rows[p] for p in numeric), [p for p in numeric if " from " not in rows[p]]
