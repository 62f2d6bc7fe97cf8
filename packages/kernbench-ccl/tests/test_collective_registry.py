"""ccl.yaml maps each collective to an algorithm; an algorithm module returns a launch spec with named arguments."""

from __future__ import annotations

import pytest

import kernbench.ccl.config as config
from kernbench.ccl import CclConfigError, CollectiveCall, LaunchSpec, LaunchSpecError
from kernbench.ccl.algorithms import lrab_hierarchical_allreduce as lrab
from kernbench.topology.sip_topologies import MESH_2D_NO_WRAP, RING_1D, TORUS_2D

ALGO = "lrab_hierarchical_allreduce"
MODULE = "kernbench.ccl.algorithms.lrab_hierarchical_allreduce"


def write(tmp_path, text: str) -> str:
    path = tmp_path / "ccl.yaml"
    path.write_text(text)
    return str(path)


def test_the_packaged_file_maps_all_reduce_in_the_collectives_format():
    cfg = config.load(config.PACKAGED)
    assert (cfg.name, cfg.module, cfg.buffer_kind, cfg.world_size, cfg.collective) == \
        (ALGO, MODULE, "tcm", None, "all_reduce")
    assert "collectives:" in config.PACKAGED.read_text()


def test_the_former_defaults_format_still_reads_the_same(tmp_path):
    old = config.load(write(tmp_path, f"defaults: {{algorithm: {ALGO}, buffer_kind: sram, world_size: 2}}\n"
                                      f"algorithms: {{{ALGO}: {{module: {MODULE}}}}}\n"))
    new = config.load(write(tmp_path, f"collectives: {{all_reduce: {{algorithm: {ALGO}, buffer_kind: sram, "
                                      f"world_size: 2}}}}\nalgorithms: {{{ALGO}: {{module: {MODULE}}}}}\n"))
    assert old == new and (old.buffer_kind, old.world_size) == ("sram", 2)


def test_settings_resolve_entry_then_collective_then_defaults(tmp_path):
    cfg = config.load(write(tmp_path, "defaults: {buffer_kind: hbm, world_size: 3}\n"
                                      f"collectives: {{all_reduce: {{algorithm: {ALGO}, buffer_kind: sram}}}}\n"
                                      f"algorithms: {{{ALGO}: {{module: {MODULE}, world_size: 6}}}}\n"))
    assert (cfg.buffer_kind, cfg.world_size) == ("sram", 6)


def test_other_collectives_may_be_configured_and_typos_are_refused(tmp_path):
    text = (f"collectives:\n  all_reduce: {{algorithm: {ALGO}}}\n  all_gather: {{algorithm: {ALGO}}}\n"
            f"algorithms: {{{ALGO}: {{module: {MODULE}}}}}\n")
    assert config.load(write(tmp_path, text), collective="all_gather").collective == "all_gather"
    with pytest.raises(CclConfigError, match="'all_reduec' is not a collective; use one of all_reduce, all_gather"):
        config.load(write(tmp_path, f"collectives: {{all_reduec: {{algorithm: {ALGO}}}}}\n"))
    with pytest.raises(CclConfigError, match=r"collectives\.all_reduce must be a mapping"):
        config.load(write(tmp_path, "collectives: {all_reduce: 3}\n"))
    with pytest.raises(CclConfigError, match=r"no algorithm chosen for broadcast; set collectives\.broadcast"):
        config.load(write(tmp_path, text), collective="broadcast")


def test_an_algorithm_for_another_collective_is_refused_at_init(default_graph, tmp_path):
    from kernbench.runtime import RuntimeContext

    text = (f"collectives: {{all_gather: {{algorithm: {ALGO}}}, all_reduce: {{algorithm: {ALGO}}}}}\n"
            f"algorithms: {{{ALGO}: {{module: {MODULE}}}}}\n")
    cfg = config.load(write(tmp_path, text), collective="all_gather")
    from kernbench.ccl.distributed import _import_algorithm

    with pytest.raises(CclConfigError, match="runs all_reduce, not all_gather"):
        _import_algorithm(cfg)
    ctx = RuntimeContext(default_graph)
    with pytest.raises(CclConfigError, match="runs all_reduce, not all_gather; choose another algorithm for "
                                             r"collectives\.all_gather"):
        ctx.distributed.init_process_group(config=str(tmp_path / "ccl.yaml"))  # all_gather runs now: checked
    assert not ctx.distributed.is_initialized()


@pytest.mark.parametrize(("topo", "grid", "wrap"), [(RING_1D, (1, 6), 3), (TORUS_2D, (2, 3), 3),
                                                    (MESH_2D_NO_WRAP, (2, 3), 0)])
def test_the_all_reduce_launch_spec_names_its_arguments(topo, grid, wrap):
    spec = lrab.launch_spec(CollectiveCall("all_reduce", 6, 4, 32, 4, 4, topo, grid))
    assert spec.kernel is lrab.lrab_hierarchical_allreduce and spec.tensor == "t"
    assert dict(spec.kwargs) == {"n_elem": 32, "cube_w": 4, "cube_h": 4, "n_sips": 6, "sip_rank": 4,
                                 "sip_wrap": wrap, "sip_topo_w": grid[1], "sip_topo_h": grid[0]}
    assert spec.arguments("T") == ("T", 32, 4, 4, 6, 4, wrap, grid[1], grid[0])  # the kernel's parameter order


def test_a_launch_spec_refuses_arguments_its_kernel_does_not_take():
    def kernel(tl, t, n_elem, cube_w=4):
        pass

    assert LaunchSpec(kernel, {"n_elem": 8}).arguments("T") == ("T", 8, 4)
    with pytest.raises(LaunchSpecError, match="does not accept"):
        LaunchSpec(kernel, {"n_elme": 8}).arguments("T")
    with pytest.raises(LaunchSpecError, match="receives the tensor"):
        LaunchSpec(kernel, {"t": 1})
    with pytest.raises(LaunchSpecError, match="keyword-only"):
        LaunchSpec(lambda tl, t, *, n: None, {"n": 1}).arguments("T")
    spec = LaunchSpec(kernel, {"n_elem": 8})
    with pytest.raises(TypeError):
        spec.kwargs["n_elem"] = 9  # read-only
