"""gqa_decode: every partitioning and loop variant against numpy, and the structure each partitioning promises."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.components.launch import KernelError
from kernbench.layers.attention import PARTITIONS, VARIANTS, attention_reference, gqa_decode
from kernbench.layers.attention.benchkit import TOLERANCE, inputs
from kernbench.layers.attention.problem import check_problem
from kernbench.layers.attention.tree_plan import plan_tree
from kernbench.runtime import RuntimeContext
from kernbench.tl.scratch import ScratchArena
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _reference_loop(q, k, v):
    """An independent, unvectorised reference: one query row at a time, softmax by hand in float64."""
    c, hq, _, d = q.shape
    g = hq // k.shape[1]
    out = np.zeros(q.shape, np.float64)
    for u in range(c):
        for h in range(hq):
            kk, vv = k[u, h // g].astype(np.float64), v[u, h // g].astype(np.float64)
            s = kk @ q[u, h, 0].astype(np.float64) / math.sqrt(d)
            w = np.exp(s - s.max())
            out[u, h, 0] = (w / w.sum()) @ vv
    return out


def test_the_reference_agrees_with_a_row_by_row_softmax():
    q, k, v = inputs(2, 6, 3, 1, 37, 16, seed=5)
    np.testing.assert_allclose(attention_reference(q, k, v), _reference_loop(q, k, v), rtol=1e-5, atol=1e-6)


def test_the_tolerance_sees_a_dropped_key_and_a_swapped_head():
    """The check used everywhere below would fail a kernel that dropped one key or paired heads wrongly."""
    q, k, v = inputs(1, 8, 2, 1, 100, 64, seed=6)
    ref = attention_reference(q, k, v)
    assert np.abs(attention_reference(q, k[:, :, :-1], v[:, :, :-1]) - ref).max() > 10 * TOLERANCE
    assert np.abs(attention_reference(q, k[:, ::-1], v[:, ::-1]) - ref).max() > 10 * TOLERANCE


CASES = [(p, var) for p in PARTITIONS for var in VARIANTS]


@pytest.mark.parametrize(("partition", "variant"), CASES, ids=[f"{p}-{v}" for p, v in CASES])
def test_every_partition_and_variant_matches_numpy(graph, partition, variant):
    """Two users, 2 KV heads of 4 query heads, S = 100 (not a multiple of the 64-key tile, and split unevenly
    over 2 cubes x 3 PEs), d = 64, random inputs."""
    q, k, v = inputs(2, 8, 2, 1, 100, 64, seed=7)
    cubes = 1 if partition == "single_pe" else 2
    r = gqa_decode(RuntimeContext(graph, data=True), q, k, v, partition=partition, pes=3, cubes=cubes,
                   variant=variant)
    assert r.out.shape == (2, 8, 1, 64) and r.out.dtype == np.float32
    assert np.abs(r.out - attention_reference(q, k, v)).max() < TOLERANCE
    assert r.latency_ns > 0 and len(r.launch) == 2


@pytest.mark.parametrize("tile", [1, 7, 64, 128])
def test_any_tile_size_gives_the_same_numbers(graph, tile):
    q, k, v = inputs(1, 8, 1, 1, 130, 32, seed=8)
    r = gqa_decode(RuntimeContext(graph, data=True), q, k, v, partition="cube_sp_pe_sp", pes=2, cubes=2,
                   tile=tile)
    assert np.abs(r.out - attention_reference(q, k, v)).max() < TOLERANCE


def _split(n: int, parts: int) -> list[int]:
    base, extra = divmod(n, parts)
    return [base + (i < extra) for i in range(parts)]


def test_structure_of_each_partitioning(graph):
    """Message counts from the tree shapes (3 messages m, l, O per tree edge, per KV head, per user), KV
    bytes per cube from the splits, active PEs."""
    users, hkv, s, d, pes, cubes = 2, 2, 100, 64, 3, 2
    q, k, v = inputs(users, 8, hkv, 1, s, d, seed=9)
    row = hkv * d * 2 * 2  # bytes of K and V per key (all heads, f16)
    got = {p: gqa_decode(RuntimeContext(graph), q, k, v, partition=p, pes=pes, cubes=1 if p == "single_pe" else
                         cubes) for p in PARTITIONS}
    per_head = users * hkv * 3

    assert got["cube_repl_pe_tp"].ipcq_messages == {"intra_cube": 0, "inter_cube": 0}
    assert got["single_pe"].ipcq_messages == {"intra_cube": 0, "inter_cube": 0}
    assert got["cube_sp_pe_tp"].ipcq_messages == {"intra_cube": 0, "inter_cube": per_head * (cubes - 1)}
    assert got["cube_repl_pe_sp"].ipcq_messages == {"intra_cube": per_head * cubes * (pes - 1), "inter_cube": 0}
    assert got["cube_sp_pe_sp"].ipcq_messages == {"intra_cube": per_head * cubes * (pes - 1),
                                                  "inter_cube": per_head * (cubes - 1)}
    # short: each cube holds one of the two KV heads, chained over its 3 PEs
    assert got["short"].ipcq_messages == {"intra_cube": users * hkv * 3 * (pes - 1), "inter_cube": 0}

    group = {u: range(u * cubes, (u + 1) * cubes) for u in range(users)}
    sp = {c: n * row for u in range(users) for c, n in zip(group[u], _split(s, cubes), strict=True)}
    assert got["cube_sp_pe_tp"].kv_bytes_per_cube == {c: pes * b for c, b in sp.items()}  # replicated on the PEs
    assert got["cube_sp_pe_sp"].kv_bytes_per_cube == sp
    assert got["cube_repl_pe_sp"].kv_bytes_per_cube == {c: s * row for u in range(users) for c in group[u]}
    assert got["cube_repl_pe_tp"].kv_bytes_per_cube == {c: pes * s * row for u in range(users) for c in group[u]}
    assert got["single_pe"].kv_bytes_per_cube == {0: s * row, 1: s * row}
    assert got["short"].kv_bytes_per_cube == {c: s * row // hkv for u in range(users) for c in group[u]}

    assert {p: r.pes_active for p, r in got.items()} == {
        "single_pe": 2, "cube_sp_pe_tp": 4, "cube_repl_pe_tp": 2, "cube_repl_pe_sp": 12, "cube_sp_pe_sp": 12,
        "short": 12}


def test_users_are_placed_on_disjoint_cube_groups(graph):
    """User u of cube_sp_pe_sp with 4 cubes each runs on cubes 4u..4u+3 and nowhere else."""
    q, k, v = inputs(3, 8, 1, 1, 64, 64, seed=10)
    r = gqa_decode(RuntimeContext(graph), q, k, v, partition="cube_sp_pe_sp", pes=2, cubes=4)
    for u, launch in enumerate(r.launch):
        cubes = {int(pe.split(".")[1][4:]) for pe in launch.reports}
        assert cubes == set(range(4 * u, 4 * u + 4))
        assert len(launch.reports) == 8


def test_the_reduce_is_centre_rooted(graph):
    """cube_sp_pe_sp on 8 cubes x 8 PEs: every block is stored by PE 1 (column (4-1)//2 of the 2 x 4 PE grid) of
    group cube 1 (column (4-1)//2, row 0 of the 4 x 2 group); 7 intra-cube edges per cube and 7 between cubes."""
    q, k, v = inputs(1, 8, 1, 1, 256, 64, seed=11)
    problem = check_problem(q, k, v, what="test", decode=True)
    plan = plan_tree(graph.spec, "cube_sp_pe_sp", problem, pes=8, cubes=8, tile=64, variant="opt2", causal=False,
                     what="test")
    assert set(plan.users[0].stores.values()) == {(1, 1)}
    r = gqa_decode(RuntimeContext(graph), q, k, v, partition="cube_sp_pe_sp", pes=8, cubes=8, variant="opt1")
    assert r.ipcq_messages == {"intra_cube": 8 * 7 * 3, "inter_cube": 7 * 3}


@pytest.fixture(scope="module")
def small_scratch():
    """The default topology with a 256 KiB kernel scratch instead of 1 MiB."""
    return compile_spec(spec_from_dict({"pe": {"tcm": {"scratch_mib": 0.25}}}))


def _peak_scratch(monkeypatch) -> list[int]:
    """Record the scratch cursor after every allocation of any kernel (the arena only grows by allocating)."""
    marks: list[int] = []
    alloc = ScratchArena.alloc

    def recording(self, nbytes):
        addr = alloc(self, nbytes)
        marks.append(self.cursor)
        return addr

    monkeypatch.setattr(ScratchArena, "alloc", recording)
    return marks


@pytest.mark.parametrize("variant", VARIANTS)
def test_scratch_stays_bounded_at_long_context(small_scratch, monkeypatch, variant):
    """S = 16384 on one PE (256 tiles) fits a 256 KiB scratch because the loop reuses its buffers: its peak
    scratch is exactly that of S = 1024 (16 tiles), and every tile after the first costs the same time, so the
    window grows linearly with the keys streamed (ADR 0018): T(16384) = T(1024) + 240 (T(2048) - T(1024)) / 16."""
    marks = _peak_scratch(monkeypatch)
    peak, window = {}, {}
    for s in (1024, 2048, 16384):
        q, k, v = inputs(1, 8, 1, 1, s, 64, seed=12)
        marks.clear()
        window[s] = gqa_decode(RuntimeContext(small_scratch), q, k, v, partition="single_pe",
                               variant=variant).latency_ns
        peak[s] = max(marks)
    assert peak[16384] == peak[2048] == peak[1024] <= 256 * 1024
    per_tile = (window[2048] - window[1024]) / 16
    assert per_tile > 0
    assert window[16384] == pytest.approx(window[1024] + 240 * per_tile, rel=1e-9)


def test_the_scratch_budget_is_enforced():
    """The bound above is a real limit: the same loop in an 8 KiB scratch stops with the overflow error."""
    graph = compile_spec(spec_from_dict({"pe": {"tcm": {"scratch_mib": 8 / 1024}}}))
    q, k, v = inputs(1, 8, 1, 1, 1024, 64, seed=12)
    with pytest.raises(KernelError, match=r"ScratchOverflowError: .* of 8192 are left; .* raise pe\.tcm\.scratch_mib"):
        gqa_decode(RuntimeContext(graph), q, k, v, partition="single_pe")


def test_more_keys_per_pe_take_longer_and_spreading_them_is_faster(graph):
    q, k, v = inputs(1, 8, 1, 1, 4096, 64, seed=13)
    lat = {}
    for part, pes, cubes in (("single_pe", 1, 1), ("cube_sp_pe_tp", 1, 4), ("cube_sp_pe_sp", 4, 4)):
        lat[part] = gqa_decode(RuntimeContext(graph), q, k, v, partition=part, pes=pes, cubes=cubes).latency_ns
    assert lat["cube_sp_pe_sp"] < lat["cube_sp_pe_tp"] < lat["single_pe"]
