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

