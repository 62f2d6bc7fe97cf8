"""Bad input to the attention library raises an AttentionError subclass that says what, where and how to fix."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.layers.attention import (
    AttentionConfigError,
    AttentionError,
    AttentionShapeError,
    gqa_decode,
    gqa_prefill,
)
from kernbench.layers.attention.benchkit import inputs
from kernbench.runtime import RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict
from kernbench.topology.errors import KernbenchError


@pytest.fixture(scope="module")
def torch():
    return RuntimeContext(compile_spec(spec_from_dict({})))


def _raises(kind, fn, *words):
    with pytest.raises(kind) as info:
        fn()
    assert isinstance(info.value, AttentionError) and isinstance(info.value, KernbenchError)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_query_heads_must_be_a_multiple_of_kv_heads(torch):
    q, k, v = inputs(1, 6, 4, 1, 32, 16)
    _raises(AttentionShapeError, lambda: gqa_decode(torch, q, k, v, partition="single_pe"),
            "Hq=6", "Hkv=4", "multiple")


@pytest.mark.parametrize(("change", "words"), [
    (lambda q, k, v: (q, k, v[:, :, :-1]), ("k has shape", "v has")),
    (lambda q, k, v: (q[:, :, :, :8], k, v), ("head dimension 8", "16")),
    (lambda q, k, v: (q[:1], k, v), ("1 users", "hold 2")),
    (lambda q, k, v: (q[0], k, v), ("4 axes",)),
    (lambda q, k, v: (q.astype(np.float32), k, v), ("float32", "float16")),
    (lambda q, k, v: (np.concatenate([q, q], axis=2), k, v), ("Tq=2", "gqa_prefill")),
])
def test_shapes_that_disagree(torch, change, words):
    q, k, v = change(*inputs(2, 4, 2, 1, 32, 16))
    _raises(AttentionShapeError, lambda: gqa_decode(torch, q, k, v, partition="cube_sp_pe_sp", pes=2, cubes=2),
            "gqa_decode", *words)


def test_prefill_needs_no_more_query_rows_than_keys(torch):
    q, k, v = inputs(1, 4, 1, 40, 32, 16)
    _raises(AttentionShapeError, lambda: gqa_prefill(torch, q, k, v, mode="ring", cubes=2), "Tq=40", "S=32")


def test_more_users_than_cube_groups(torch):
    q, k, v = inputs(3, 4, 1, 1, 32, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="cube_sp_pe_sp", pes=1, cubes=8),
            "3 users", "2 such group", "fewer")
    _raises(AttentionConfigError, lambda: gqa_prefill(torch, q, k, v, mode="ring", cubes=8), "3 users")


@pytest.mark.parametrize("pes", [0, 9, -1, 2.0, True])
def test_pes_must_be_1_to_8(torch, pes):
    q, k, v = inputs(1, 4, 1, 1, 32, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="cube_sp_pe_sp", pes=pes, cubes=2),
            f"pes={pes!r}", "1..8")
    _raises(AttentionConfigError, lambda: gqa_prefill(torch, q, k, v, mode="ring", pes=pes, cubes=2), "1..8")


def test_unknown_partition_and_mode(torch):
    q, k, v = inputs(1, 4, 1, 1, 32, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="cube_sp"), "unknown partition",
            "'cube_sp'", "cube_sp_pe_sp")
    _raises(AttentionConfigError, lambda: gqa_prefill(torch, q, k, v, mode="long"), "unknown mode", "ring")
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="single_pe", variant="opt9"),
            "unknown variant", "opt2")


def test_a_ring_wider_than_the_sip(torch):
    q, k, v = inputs(1, 4, 1, 8, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_prefill(torch, q, k, v, mode="ring", cubes=17), "ring of 17 cubes",
            "wider than the SIP", "16")
    q1, k1, v1 = inputs(1, 4, 1, 1, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q1, k1, v1, partition="cube_sp_pe_tp", cubes=32),
            "cubes=32", "wider than the SIP")


@pytest.mark.parametrize("cubes", [3, 5, 6])
def test_cube_groups_must_be_rectangles(torch, cubes):
    q, k, v = inputs(1, 4, 1, 1, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="cube_sp_pe_sp", pes=1, cubes=cubes),
            f"cubes={cubes}", "rectangles", "1, 2, 4, 8, 12, 16")


def test_placement_that_leaves_a_pe_without_keys_or_rows(torch):
    q, k, v = inputs(1, 4, 1, 1, 10, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="cube_sp_pe_sp", pes=8, cubes=2),
            "10 key rows", "fewer cubes or pes")
    q, k, v = inputs(1, 2, 1, 3, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_prefill(torch, q, k, v, mode="ring", pes=4, cubes=2),
            "6 query rows", "fewer cubes or pes")


def test_short_needs_whole_kv_heads_per_cube(torch):
    q, k, v = inputs(1, 6, 3, 1, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="short", pes=2, cubes=2),
            "Hkv=3", "cubes=2", "divides")


def test_single_pe_runs_on_one_cube(torch):
    q, k, v = inputs(1, 4, 1, 1, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="single_pe", cubes=2), "cubes=2")


@pytest.mark.parametrize("tile", [0, -4, 1.5])
def test_tile_must_be_a_positive_integer(torch, tile):
    q, k, v = inputs(1, 4, 1, 1, 64, 16)
    _raises(AttentionConfigError, lambda: gqa_decode(torch, q, k, v, partition="single_pe", tile=tile), "tile=")
