"""Tests of DPPolicy validation and shard resolution.

The default topology has 16 cubes per SIP and 8 PEs per cube. Hand-worked and numpy-derived
ranges (np.array_split) serve as the independent reference.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.runtime.placement import DPPolicy, PolicyError, Shard, resolve_shards
from kernbench.topology import KernbenchError, spec_from_dict

CUBES, PES = 16, 8
MODES = ["replicate", "row_wise", "column_wise"]


@pytest.fixture(scope="module")
def spec():
    return spec_from_dict({})


def test_replicate_everywhere_gives_full_shards_on_every_pe(spec):
    shards = resolve_shards((4, 8), 2, DPPolicy(), spec, sip=1)
    assert len(shards) == CUBES * PES
    assert [(s.cube, s.pe) for s in shards] == [(c, p) for c in range(CUBES) for p in range(PES)]
    for s in shards:
        assert (s.sip, s.rows, s.cols, s.nbytes) == (1, (0, 4), (0, 8), 64)


def test_row_wise_cubes_column_wise_pes_by_hand(spec):
    policy = DPPolicy(cube="row_wise", pe="column_wise", num_cubes=4, num_pes=2)
    shards = resolve_shards((10, 6), 2, policy, spec, sip=0)
    # 10 rows over 4 cubes -> 3, 3, 2, 2; 6 columns over 2 PEs -> 3, 3; f16 = 2 bytes.
    expected = [
        Shard(0, 0, 0, (0, 3), (0, 3), 18), Shard(0, 0, 1, (0, 3), (3, 6), 18),
        Shard(0, 1, 0, (3, 6), (0, 3), 18), Shard(0, 1, 1, (3, 6), (3, 6), 18),
        Shard(0, 2, 0, (6, 8), (0, 3), 12), Shard(0, 2, 1, (6, 8), (3, 6), 12),
        Shard(0, 3, 0, (8, 10), (0, 3), 12), Shard(0, 3, 1, (8, 10), (3, 6), 12),
    ]
    assert shards == expected
    assert sum(s.nbytes for s in shards) == 10 * 6 * 2


def test_column_wise_cubes_row_wise_pes_by_hand(spec):
    policy = DPPolicy(cube="column_wise", pe="row_wise", num_cubes=2, num_pes=3)
    shards = resolve_shards((7, 5), 4, policy, spec, sip=0)
    # 5 columns over 2 cubes -> 3, 2; 7 rows over 3 PEs -> 3, 2, 2.
    got = [(s.cube, s.pe, s.rows, s.cols, s.nbytes) for s in shards]
    assert got == [
        (0, 0, (0, 3), (0, 3), 36), (0, 1, (3, 5), (0, 3), 24), (0, 2, (5, 7), (0, 3), 24),
        (1, 0, (0, 3), (3, 5), 24), (1, 1, (3, 5), (3, 5), 16), (1, 2, (5, 7), (3, 5), 16),
    ]


def test_same_axis_twice_nests_the_split(spec):
    policy = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2)
    shards = resolve_shards((9, 1), 1, policy, spec, sip=0)
    # 9 rows -> cubes 5 | 4; cube 0's 5 -> 3 | 2, cube 1's 4 -> 2 | 2.
    assert [s.rows for s in shards] == [(0, 3), (3, 5), (5, 7), (7, 9)]


def test_leading_axes_flatten_into_rows(spec):
    shards = resolve_shards((2, 5, 4), 2, DPPolicy(cube="row_wise", num_cubes=3, num_pes=1), spec, sip=0)
    assert [s.rows for s in shards] == [(0, 4), (4, 7), (7, 10)]
    assert all(s.cols == (0, 4) for s in shards)
    assert [s.nbytes for s in shards] == [32, 24, 24]


def test_one_dimensional_tensor_is_one_row(spec):
    shards = resolve_shards((10,), 4, DPPolicy(pe="column_wise", num_cubes=1, num_pes=4), spec, sip=0)
    assert [(s.rows, s.cols, s.nbytes) for s in shards] == [
        ((0, 1), (0, 3), 12), ((0, 1), (3, 6), 12), ((0, 1), (6, 8), 8), ((0, 1), (8, 10), 8)]
    with pytest.raises(PolicyError, match=r"row dimension \(size 1\)"):
        resolve_shards((10,), 4, DPPolicy(cube="row_wise", num_cubes=2), spec, sip=0)


def test_cube_start_offsets_the_cube_ids(spec):
    shards = resolve_shards((8, 8), 2, DPPolicy(cube="row_wise", num_cubes=8, num_pes=1, cube_start=8), spec, 0)
    assert [s.cube for s in shards] == list(range(8, 16))
    assert [s.rows for s in shards] == [(i, i + 1) for i in range(8)]
    rest = resolve_shards((8, 8), 2, DPPolicy(num_pes=1, cube_start=12), spec, sip=0)
    assert [s.cube for s in rest] == [12, 13, 14, 15]  # default num_cubes: the rest of the SIP


def _array_split_ranges(n, k):
    """Half-open ranges of np.array_split(range(n), k), empty parts included."""
    sizes = [len(p) for p in np.array_split(np.arange(n), k)]
    stops = np.cumsum(sizes)
    return [(int(stop) - size, int(stop)) for stop, size in zip(stops, sizes, strict=True)]


@settings(max_examples=150, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 40), itemsize=st.sampled_from([1, 2, 4, 8]),
       cube_mode=st.sampled_from(MODES), pe_mode=st.sampled_from(MODES),
       num_cubes=st.integers(1, CUBES), num_pes=st.integers(1, PES), lead=st.sampled_from([(), (1,), (2,)]))
def test_shards_match_numpy_and_bytes_add_up(spec, rows, cols, itemsize, cube_mode, pe_mode, num_cubes,
                                             num_pes, lead):
    if lead and rows % lead[0]:
        rows *= lead[0]
    shape = (*lead, rows // lead[0], cols) if lead else (rows, cols)
    policy = DPPolicy(cube=cube_mode, pe=pe_mode, num_cubes=num_cubes, num_pes=num_pes)

    # Reference: the same nested split with numpy.
    def parts(r, c, mode, k):
        if mode == "replicate":
            return [(r, c)] * k
        if mode == "row_wise":
            return [((r[0] + a, r[0] + b), c) for a, b in _array_split_ranges(r[1] - r[0], k)]
        return [(r, (c[0] + a, c[0] + b)) for a, b in _array_split_ranges(c[1] - c[0], k)]

    expected = []
    feasible = True
    for cube, (cr, cc) in enumerate(parts((0, rows), (0, cols), cube_mode, num_cubes)):
        for pe, (r, c) in enumerate(parts(cr, cc, pe_mode, num_pes)):
            feasible &= r[1] > r[0] and c[1] > c[0]
            expected.append(Shard(0, cube, pe, r, c, (r[1] - r[0]) * (c[1] - c[0]) * itemsize))
    if not feasible:
        with pytest.raises(PolicyError, match="would be empty"):
            resolve_shards(shape, itemsize, policy, spec, sip=0)
        return
    shards = resolve_shards(shape, itemsize, policy, spec, sip=0)
    assert shards == expected
    factor = (num_cubes if cube_mode == "replicate" else 1) * (num_pes if pe_mode == "replicate" else 1)
    assert sum(s.nbytes for s in shards) == math.prod(shape) * itemsize * factor


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"cube": "rows"}, "cube"),
    ({"pe": "ROW_WISE"}, "pe"),
    ({"num_cubes": 0}, "num_cubes"),
    ({"num_pes": -1}, "num_pes"),
    ({"num_cubes": True}, "num_cubes"),
    ({"num_pes": 2.0}, "num_pes"),
    ({"cube_start": -1}, "cube_start"),
])
def test_bad_policy_values_name_the_field(kwargs, field):
    with pytest.raises(PolicyError) as info:
        DPPolicy(**kwargs)
    msg = str(info.value)
    assert isinstance(info.value, KernbenchError)
    assert f"'{field}'" in msg
    assert repr(next(iter(kwargs.values()))) in msg
    if field in ("cube", "pe"):
        assert "'replicate', 'row_wise', 'column_wise'" in msg


def test_policy_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DPPolicy().cube = "row_wise"


@pytest.mark.parametrize(("policy", "pattern"), [
    (DPPolicy(cube_start=8, num_cubes=9), r"\[8, 17\).*16 cubes"),
    (DPPolicy(cube_start=16), r"cube_start = 16.*16 cubes"),
    (DPPolicy(num_cubes=17), r"16 cubes"),
    (DPPolicy(num_pes=9), r"num_pes = 9.*8 PEs"),
])
def test_ranges_beyond_the_sip_are_errors(spec, policy, pattern):
    with pytest.raises(PolicyError, match=pattern):
        resolve_shards((64, 64), 2, policy, spec, sip=0)


def test_zero_size_cube_part_is_an_error(spec):
    with pytest.raises(PolicyError) as info:
        resolve_shards((3, 6), 2, DPPolicy(cube="row_wise", num_cubes=4), spec, sip=0)
    msg = str(info.value)
    assert "size 3" in msg and "4 cube parts" in msg and "at most 3 cubes" in msg


def test_zero_size_pe_part_is_an_error(spec):
    # 4 rows over 4 cubes leaves one row per cube, which cannot be split over 2 PEs.
    with pytest.raises(PolicyError) as info:
        resolve_shards((4, 2), 2, DPPolicy(cube="row_wise", pe="row_wise", num_cubes=4, num_pes=2), spec, 0)
    msg = str(info.value)
    assert "size 1" in msg and "2 PE parts" in msg and "cube 0" in msg and "at most 1 PEs" in msg


@pytest.mark.parametrize(("shape", "itemsize", "sip"), [((0, 4), 2, 0), ((4, -1), 2, 0), ((4, 4), 0, 0),
                                                        ((4, 4), 2, 2), ((4, 4), 2, -1)])
def test_bad_shape_itemsize_or_sip(spec, shape, itemsize, sip):
    with pytest.raises(PolicyError):
        resolve_shards(shape, itemsize, DPPolicy(), spec, sip=sip)
