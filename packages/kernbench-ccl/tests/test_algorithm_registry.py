"""A ``ccl.yaml`` names registered algorithm modules only, and an unregistered one is refused before any import.

Registered: the modules shipped in ``kernbench.ccl.algorithms``, the modules of the ``kernbench.ccl_algorithms``
entry-point group, and what a script passed to ``register_algorithm``. Importing a module runs its code, so an
unregistered name must never reach ``importlib`` (``module: this`` printed the Zen of Python into ``--json``).
"""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

import kernbench.ccl.config as config
from kernbench.ccl import CclConfigError, register_algorithm
from kernbench.runtime import RuntimeContext

SHIPPED = "kernbench.ccl.algorithms.lrab_hierarchical_allreduce"
SHIPPED_ALL = [f"kernbench.ccl.algorithms.{m}" for m in ("grid_all_gather", "grid_all_to_all_hierarchical",
                                                          "grid_all_to_all_pairwise", "grid_barrier", "grid_broadcast",
                                                          "grid_reduce_scatter", "lrab_hierarchical_allreduce")]
BODY = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")


def launch_spec(call):
    raise NotImplementedError
"""


@pytest.fixture
def registry(monkeypatch):
    """A private registry, so registrations made by a test do not outlive it."""
    monkeypatch.setattr(config, "_REGISTERED", {})
    return config._REGISTERED


def side_effect_module(tmp_path, monkeypatch, name: str):
    """A module ``name`` on sys.path whose import writes a marker file; returns the marker's path."""
    marker = tmp_path / f"{name}.imported"
    (tmp_path / f"{name}.py").write_text(BODY.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return marker


def ccl_yaml(tmp_path, module: str) -> str:
    path = tmp_path / "ccl.yaml"
    path.write_text(f"defaults: {{algorithm: mine}}\nalgorithms: {{mine: {{module: {module}}}}}\n")
    return str(path)


def test_an_unregistered_module_is_refused_by_name_and_never_imported(default_graph, tmp_path, monkeypatch,
                                                                        registry):
    marker = side_effect_module(tmp_path, monkeypatch, "ccl_reg_side_effect")
    path = ccl_yaml(tmp_path, "ccl_reg_side_effect")
    ctx = RuntimeContext(default_graph)
    with pytest.raises(CclConfigError) as exc:
        ctx.distributed.init_process_group(config=path)
    assert str(exc.value) == (
        f"{path}: algorithm 'mine' names module 'ccl_reg_side_effect', which is not a registered algorithm module, "
        f"so it is not imported (known: {', '.join(SHIPPED_ALL)}); register your own with "
        "kernbench.ccl.register_algorithm(module) "
        "before init_process_group, or in the 'kernbench.ccl_algorithms' entry-point group of an installed package")
    assert not marker.exists() and "ccl_reg_side_effect" not in sys.modules
    assert not ctx.distributed.is_initialized()


@pytest.mark.parametrize("module", ["this", "os", "antigravity", "kernbench.ccl.algorithms",
                                    "kernbench.ccl.algorithms.lrab_hierarchical_allreduce.x"])
def test_standard_library_and_lookalike_modules_are_refused_by_config_load(tmp_path, module, registry):
    with pytest.raises(CclConfigError, match=f"names module '{module}', which is not a registered algorithm module"):
        config.load(ccl_yaml(tmp_path, module))


def test_the_shipped_algorithm_is_known_without_being_imported():
    assert config.shipped_algorithms() == SHIPPED_ALL
    assert config.load(config.PACKAGED).module == SHIPPED


def test_a_registered_module_object_is_used_as_given(default_graph, tmp_path, monkeypatch, registry):
    marker = side_effect_module(tmp_path, monkeypatch, "ccl_reg_object")
    import ccl_reg_object

    assert register_algorithm(ccl_reg_object) == "ccl_reg_object"
    assert config.known_algorithms() == ["ccl_reg_object", *SHIPPED_ALL]
    ctx = RuntimeContext(default_graph)
    ctx.distributed.init_process_group(config=ccl_yaml(tmp_path, "ccl_reg_object"))
    assert ctx.distributed.is_initialized() and marker.read_text() == "imported"
    ctx.distributed.destroy_process_group()


def test_a_registered_name_is_imported_only_when_a_group_uses_it(default_graph, tmp_path, monkeypatch, registry):
    marker = side_effect_module(tmp_path, monkeypatch, "ccl_reg_by_name")
    assert register_algorithm("ccl_reg_by_name") == "ccl_reg_by_name"
    assert not marker.exists()
    assert config.load(ccl_yaml(tmp_path, "ccl_reg_by_name")).module == "ccl_reg_by_name"
    assert not marker.exists()  # loading the config imports nothing
    ctx = RuntimeContext(default_graph)
    ctx.distributed.init_process_group(config=ccl_yaml(tmp_path, "ccl_reg_by_name"))
    assert marker.read_text() == "imported"
    ctx.distributed.destroy_process_group()


def test_an_entry_point_module_is_known(tmp_path, monkeypatch, registry):
    eps = metadata.EntryPoints([metadata.EntryPoint("mine", "my_plugin.algo", config.ENTRY_POINT_GROUP)])
    monkeypatch.setattr(config.metadata, "entry_points",
                        lambda group: eps if group == config.ENTRY_POINT_GROUP else metadata.EntryPoints([]))
    assert config.entry_point_algorithms() == ["my_plugin.algo"]
    assert config.load(ccl_yaml(tmp_path, "my_plugin.algo")).module == "my_plugin.algo"


@pytest.mark.parametrize("bad", ["", "a..b", "os; rm", 3, None])
def test_register_algorithm_refuses_what_is_not_a_module_name(bad, registry):
    with pytest.raises(CclConfigError, match="register_algorithm: expected a module or a dotted module name, got "):
        register_algorithm(bad)
    assert registry == {}
