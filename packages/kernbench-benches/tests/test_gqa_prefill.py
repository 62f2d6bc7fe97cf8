"""gqa_prefill: short and ring modes against numpy (causal, bottom-right aligned), and the ring's structure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.layers.attention import attention_reference, gqa_prefill
from kernbench.layers.attention.benchkit import TOLERANCE, inputs
from kernbench.layers.attention.geometry import cube_groups, ring_order
from kernbench.layers.attention.problem import DEFAULT_TILE, check_problem
from kernbench.layers.attention.ring_plan import plan_ring
from kernbench.runtime import RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _causal_loop(q, k, v):
    """Independent causal reference: row i of Tq sees keys 0 .. S - Tq + i, float64, one row at a time."""
    c, hq, tq, d = q.shape
    s = k.shape[2]
    g = hq // k.shape[1]
    out = np.zeros(q.shape, np.float64)
    for u in range(c):
        for h in range(hq):
            for i in range(tq):
                last = s - tq + i
                kk, vv = k[u, h // g, :last + 1].astype(np.float64), v[u, h // g, :last + 1].astype(np.float64)
                z = kk @ q[u, h, i].astype(np.float64) / math.sqrt(d)
                w = np.exp(z - z.max())
                out[u, h, i] = (w / w.sum()) @ vv
    return out


@pytest.mark.parametrize(("tq", "s"), [(5, 5), (3, 11), (11, 11)])
def test_the_causal_reference_is_bottom_right_aligned(tq, s):
    q, k, v = inputs(2, 4, 2, tq, s, 8, seed=20)
    np.testing.assert_allclose(attention_reference(q, k, v, causal=True), _causal_loop(q, k, v), rtol=1e-5,
                               atol=1e-6)


CASES = [
    # users, Hq, Hkv, Tq, S, d, mode, pes, cubes
    (1, 8, 1, 4, 16, 64, "short", 1, 1),
    (1, 8, 1, 16, 64, 64, "short", 4, 1),
    (2, 8, 2, 100, 100, 64, "short", 3, 2),   # the full triangle, heads split over 2 cubes, S split over 3 PEs
    (1, 2, 2, 200, 230, 32, "short", 2, 1),   # G = 1, row blocks of 128 cross a query-head boundary
    (1, 8, 1, 4, 16, 64, "ring", 1, 4),
    (2, 8, 2, 100, 100, 64, "ring", 2, 2),
    (1, 4, 1, 50, 130, 128, "ring", 3, 8),    # a snake ring through 4 x 2 cubes, 3 parallel rings, d = 128
    (1, 6, 2, 33, 70, 64, "ring", 1, 4),      # 6 query heads over 4 cubes: cubes own parts of heads
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[6]}-C{c[0]}-Tq{c[3]}-S{c[4]}-p{c[7]}-c{c[8]}" for c in CASES])
def test_prefill_matches_numpy(graph, case):
    users, hq, hkv, tq, s, d, mode, pes, cubes = case
    q, k, v = inputs(users, hq, hkv, tq, s, d, seed=21)
    r = gqa_prefill(RuntimeContext(graph, data=True), q, k, v, mode=mode, pes=pes, cubes=cubes)
    assert r.out.shape == (users, hq, tq, d)
    assert np.abs(r.out - attention_reference(q, k, v, causal=True)).max() < TOLERANCE


def _tile_starts_at_a_block_end(graph, q, k, v, pes, cubes) -> int:
    """How many (row block, tile) pairs of the ring plan have the tile's first key at the block's last position:
    the only key such a block sees of that tile, the edge case of the causal skip."""
    problem = check_problem(q, k, v, what="test", decode=False)
    plan = plan_ring(graph.spec, problem, pes=pes, cubes=cubes, tile=DEFAULT_TILE, causal=True, what="test")
    hits = 0
    for user in plan.users:
        for pe in user.pes.values():
            starts = {a.k0 for a in pe.actions}
            hits += sum(rb.pmax in starts for head in pe.passes for blocks in head for rb in blocks)
    return hits


EDGE_CASES = [
    # users, Hq, Hkv, Tq, S, d, pes, cubes
    (1, 1, 1, 201, 202, 32, 1, 2),  # cube 0's rows end at position 101, where cube 1's keys begin
    (1, 2, 1, 65, 65, 32, 1, 1),    # one block spans both query heads, positions 0..64; the second tile starts at 64
    (2, 4, 2, 65, 130, 32, 2, 2),   # two users, two rings of two PEs
    (1, 4, 2, 20, 45, 32, 2, 4),    # four cubes with short key blocks
]


@pytest.mark.parametrize("case", EDGE_CASES, ids=[f"C{c[0]}-Hq{c[1]}-Tq{c[3]}-S{c[4]}-p{c[6]}-c{c[7]}"
                                                  for c in EDGE_CASES])
def test_ring_keeps_a_tile_whose_first_key_is_a_blocks_last_position(graph, case):
    """A row block whose last query position equals a tile's first key sees exactly one key of that tile; the
    causal skip must keep the tile, or the block's last row loses its diagonal key."""
    users, hq, hkv, tq, s, d, pes, cubes = case
    q, k, v = inputs(users, hq, hkv, tq, s, d, seed=31)
    assert _tile_starts_at_a_block_end(graph, q, k, v, pes, cubes) > 0  # the case does reach the edge
    r = gqa_prefill(RuntimeContext(graph, data=True), q, k, v, mode="ring", pes=pes, cubes=cubes)
    assert np.abs(r.out - _causal_loop(q, k, v)).max() < TOLERANCE


@pytest.mark.parametrize("mode", ["short", "ring"])
def test_without_the_mask_every_row_sees_every_key(graph, mode):
    q, k, v = inputs(1, 8, 1, 24, 70, 64, seed=22)
    r = gqa_prefill(RuntimeContext(graph, data=True), q, k, v, mode=mode, pes=2, cubes=1 if mode == "short" else 2,
                    causal=False)
    assert np.abs(r.out - attention_reference(q, k, v)).max() < TOLERANCE
    assert np.abs(r.out - attention_reference(q, k, v, causal=True)).max() > 10 * TOLERANCE


@pytest.mark.parametrize("mode", ["short", "ring"])
def test_a_row_does_not_depend_on_keys_after_its_position(graph, mode):
    """Changing the keys and values after position S - Tq leaves query row 0 exactly as it was."""
    tq, s = 20, 60
    q, k, v = inputs(1, 8, 1, tq, s, 64, seed=23)
    k2, v2 = k.copy(), v.copy()
    k2[:, :, s - tq + 1:] *= -3
    v2[:, :, s - tq + 1:] += 2
    cubes = 1 if mode == "short" else 4
    a = gqa_prefill(RuntimeContext(graph, data=True), q, k, v, mode=mode, pes=2, cubes=cubes).out
    b = gqa_prefill(RuntimeContext(graph, data=True), q, k2, v2, mode=mode, pes=2, cubes=cubes).out
    assert np.array_equal(a[:, :, 0], b[:, :, 0])
    assert not np.array_equal(a[:, :, -1], b[:, :, -1])


def _tiles(n: int, tile: int = 64) -> int:
    return -(-n // tile)


def test_ring_sends_every_tile_cubes_minus_one_steps_to_its_ring_successor(graph):
    users, hkv, tq, s, pes, cubes = 2, 2, 10, 300, 2, 4
    q, k, v = inputs(users, 4, hkv, tq, s, 64, seed=24)
    torch = RuntimeContext(graph)
    r = gqa_prefill(torch, q, k, v, mode="ring", pes=pes, cubes=cubes)
    blocks = [len(b) for b in np.array_split(np.arange(s), cubes)]
    per_ring = 2 * hkv * sum(_tiles(b) for b in blocks) * (cubes - 1)  # K and V tiles, each block's tiles
    assert r.ipcq_messages == {"intra_cube": 0, "inter_cube": users * pes * per_ring}
    successor = {}
    for group in cube_groups(graph.spec, users, cubes, what="test"):
        order = ring_order(graph.spec, group)
        successor.update({order[i]: order[(i + 1) % cubes] for i in range(cubes)})
    sends = [rec for rec in torch.oplog.records if rec.op_name == "ipcq_send"]
    assert len(sends) == users * pes * per_ring
    for rec in sends:
        src, dst = rec.component_id.split("."), rec.params["peer"].split(".")
        assert int(dst[1][4:]) == successor[int(src[1][4:])] and dst[2] == src[2]  # next cube, same PE index
        assert rec.params["nbytes"] in (64 * 64 * 2, (300 // 4 - 64) * 64 * 2)  # a whole or the short tile


def test_causal_ring_skips_the_tiles_no_row_sees(graph):
    """Full triangle, Tq = S = 512 over 4 cubes: each cube holds 128 keys (two 64-key tiles) and owns 2 query
    heads, 4 row blocks of 128 positions each; a block at positions [a, a + 128) sees the tiles starting below
    a + 128, so it computes 2, 4, 6 and 8 of the 8 tiles: 20/32 of the unmasked GEMM work, every (block, tile)
    pair having the same shape. (1024 rows per PE also take two passes round the ring.)"""
    q, k, v = inputs(1, 8, 1, 512, 512, 64, seed=25)
    causal = gqa_prefill(RuntimeContext(graph), q, k, v, mode="ring", pes=1, cubes=4)
    full = gqa_prefill(RuntimeContext(graph), q, k, v, mode="ring", pes=1, cubes=4, causal=False)
    assert causal.ipcq_messages == full.ipcq_messages  # tiles still travel the whole ring
    assert causal.op_counts["gemm"] * 32 == full.op_counts["gemm"] * 20
    assert causal.latency_ns < full.latency_ns


def test_short_prefill_keeps_heads_inside_their_cube(graph):
    q, k, v = inputs(1, 16, 4, 8, 64, 64, seed=26)
    r = gqa_prefill(RuntimeContext(graph), q, k, v, mode="short", pes=4, cubes=4)
    assert r.ipcq_messages["inter_cube"] == 0 and r.ipcq_messages["intra_cube"] > 0
    assert r.kv_bytes_per_cube == {c: 64 * 64 * 2 * 2 for c in range(4)}  # one KV head (K and V) per cube
