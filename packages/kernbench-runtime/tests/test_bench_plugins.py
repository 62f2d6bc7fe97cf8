"""Bench plugins found through entry points: benches in a package's ``__init__`` count, and an entry that registers
nothing is reported (one line naming the entry point and the fix) instead of vanishing silently.

Entry points are faked: ``kernbench.runtime.bench.metadata`` is replaced by an object whose ``entry_points``
returns :class:`importlib.metadata.EntryPoint` objects naming throwaway packages on ``sys.path``."""

from __future__ import annotations

import textwrap
import types
import uuid
from importlib import metadata

import pytest

from kernbench.runtime import bench as bench_mod
from kernbench.runtime.bench import ENTRY_POINT_GROUP, BenchError, discover

BENCH = """
    from kernbench.runtime.bench import bench

    @bench(name="{name}", description="does {name}")
    def run(torch):
        torch.zeros((4, 4))
"""


def _package(tmp_path, monkeypatch, init: str, modules: dict[str, str] | None = None) -> str:
    """A package on ``sys.path`` with ``init`` as its ``__init__.py`` and the given modules; returns its name."""
    name = f"plugpkg_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent(init))
    for mod, body in (modules or {}).items():
        (root / f"{mod}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _entry_points(monkeypatch, **entries: str) -> None:
    """Make ``discover()`` see exactly these entry points (name = target) in ``kernbench.benches``."""
    eps = [metadata.EntryPoint(name, target, ENTRY_POINT_GROUP) for name, target in entries.items()]
    monkeypatch.setattr(bench_mod, "metadata",
                        types.SimpleNamespace(entry_points=lambda group: eps if group == ENTRY_POINT_GROUP else []))


def test_benches_defined_in_a_package_init_are_found(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, BENCH.format(name="in-init"), {"more": BENCH.format(name="in-module")})
    _entry_points(monkeypatch, mine=pkg)
    reg = discover()
    assert [(b.name, b.module) for b in reg.benches] == [("in-init", pkg), ("in-module", f"{pkg}.more")]
    assert reg.problems == []
    assert [b.name for b in discover(pkg).benches] == ["in-init", "in-module"]  # the explicit form agrees


def test_a_package_with_benches_only_in_its_init_is_found(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, BENCH.format(name="only-init"))
    _entry_points(monkeypatch, solo=pkg)
    reg = discover()
    assert [b.name for b in reg.benches] == ["only-init"] and reg.problems == []


def test_a_bench_imported_into_the_init_is_not_counted_twice(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "from .real import run\n", {"real": BENCH.format(name="real")})
    assert [b.name for b in discover(pkg).benches] == ["real"]


def test_an_entry_point_that_registers_nothing_is_reported(tmp_path, monkeypatch):
    empty = _package(tmp_path, monkeypatch, "'''Nothing decorated here.'''\n\ndef run(torch):\n    pass\n")
    good = _package(tmp_path, monkeypatch, BENCH.format(name="fine"))
    _entry_points(monkeypatch, empty=empty, good=good)
    reg = discover()
    assert [b.name for b in reg.benches] == ["fine"]  # the other plugin still works
    assert reg.problems == [
        f"bench plugin 'empty' (entry point empty = {empty} in group kernbench.benches) registers no bench and was "
        f"skipped; decorate a run(torch) in {empty}'s __init__.py or one of its modules with @bench from "
        f"kernbench.runtime.bench"]


def test_a_module_entry_point_that_registers_nothing_is_reported(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "", {"plain": "def run(torch):\n    pass\n"})
    _entry_points(monkeypatch, plain=f"{pkg}.plain")
    reg = discover()
    assert reg.benches == []
    assert reg.problems == [
        f"bench plugin 'plain' (entry point plain = {pkg}.plain in group kernbench.benches) registers no bench and "
        f"was skipped; decorate a run(torch) in {pkg}.plain with @bench from kernbench.runtime.bench"]


def test_an_explicit_package_without_benches_is_an_error(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, "X = 1\n")
    with pytest.raises(BenchError) as err:
        discover(pkg)
    assert str(err.value) == (f"{pkg} registers no bench; decorate a run(torch) in {pkg}'s __init__.py or one of "
                              f"its modules with @bench from kernbench.runtime.bench")


def test_a_plugin_that_fails_to_import_still_names_its_entry_point(monkeypatch):
    _entry_points(monkeypatch, broken="no_such_package_kernbench_test")
    (problem,) = discover().problems
    assert problem.startswith("bench plugin 'broken' (entry point broken = no_such_package_kernbench_test in group "
                              "kernbench.benches) was skipped: BenchError: bench package "
                              "'no_such_package_kernbench_test' cannot be imported: ")


def test_metric_notes_and_rows_are_declared_with_the_bench():
    @bench_mod.bench(name="noted", description="x", metrics={"latency_ns": "window"}, metric_rows="panel")
    def run(torch):
        pass

    module = types.ModuleType("noted_mod")
    run.__module__ = "noted_mod"
    module.run = run
    (info,) = bench_mod._benches_of(module)
    assert info.metric_notes == (("latency_ns", "window"),) and info.metric_rows == "panel"
    with pytest.raises(BenchError, match="metrics must map metric names to non-empty notes"):
        bench_mod.bench(name="bad", description="x", metrics={"latency_ns": " "})
