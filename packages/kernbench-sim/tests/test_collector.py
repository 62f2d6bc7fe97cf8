"""The engine raises the garbage collector's first-generation threshold while it steps, and puts it back."""

from __future__ import annotations

import gc

import pytest

from kernbench.sim import GraphEngine
from kernbench.sim.collector import RUN_GEN0_THRESHOLD, RunCollector


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_raised_inside_and_restored_after(thresholds):
    gc.set_threshold(700, 11, 12)
    with RunCollector():
        assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 11, 12)
    assert gc.get_threshold() == (700, 11, 12)


def test_restored_after_an_error(thresholds):
    gc.set_threshold(701, 10, 10)
    with pytest.raises(RuntimeError), RunCollector():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (701, 10, 10)


@pytest.mark.parametrize("gen0", [0, RUN_GEN0_THRESHOLD - 1, RUN_GEN0_THRESHOLD, RUN_GEN0_THRESHOLD + 1])
def test_only_a_lower_threshold_is_raised(thresholds, gen0):
    """0 (automatic collection off) and a threshold already at or above the run's stay as they are; one below
    it is raised to it."""
    gc.set_threshold(gen0, 10, 10)
    with RunCollector():
        inside = gc.get_threshold()[0]
    assert inside == (RUN_GEN0_THRESHOLD if 0 < gen0 < RUN_GEN0_THRESHOLD else gen0)
    assert gc.get_threshold()[0] == gen0


def test_nested_collectors_restore_in_order(thresholds):
    gc.set_threshold(500, 10, 10)
    with RunCollector():
        with RunCollector():
            assert gc.get_threshold()[0] == RUN_GEN0_THRESHOLD
        assert gc.get_threshold()[0] == RUN_GEN0_THRESHOLD
    assert gc.get_threshold()[0] == 500


def test_the_engine_steps_with_the_raised_threshold(thresholds, small_graph, registry):
    gc.set_threshold(700, 10, 10)
    eng = GraphEngine(small_graph, registry)
    seen = []
    eng.at(5.0, lambda _: seen.append(gc.get_threshold()[0]))
    eng.run()
    assert seen == [RUN_GEN0_THRESHOLD]
    assert gc.get_threshold() == (700, 10, 10)



class _Cycle:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_the_second_engine_on_a_large_graph_collects_then_freezes(small_graph, monkeypatch, unfrozen):
    import weakref

    from kernbench.sim import collector

    monkeypatch.setattr(collector, "FREEZE_MIN_NODES", len(small_graph.nodes))  # the small graph counts as large
    small_graph.forget_memos()
    assert collector.keep_graph(small_graph) is False and gc.get_freeze_count() == 0  # one engine: nothing
    garbage = _Cycle()
    dead = weakref.ref(garbage)
    del garbage
    assert collector.keep_graph(small_graph) is True
    assert dead() is None  # collected before the freeze, not frozen with the rest
    frozen = gc.get_freeze_count()
    assert frozen > len(small_graph.nodes)  # the graph's nodes, at least, are frozen
    assert collector.keep_graph(small_graph) is False and gc.get_freeze_count() == frozen  # once per graph
    small_graph.forget_memos()


def test_a_graph_below_the_size_is_never_frozen(small_graph, monkeypatch, unfrozen):
    from kernbench.sim import collector

    monkeypatch.setattr(collector, "FREEZE_MIN_NODES", len(small_graph.nodes) + 1)
    small_graph.forget_memos()
    assert [collector.keep_graph(small_graph) for _ in range(3)] == [False, False, False]
    assert gc.get_freeze_count() == 0
    small_graph.forget_memos()
