"""MoE routing on the host: top-k and softmax, the token-to-expert distributions, capacity and drops, the dispatch
plan and the numpy reference, each against hand values or a brute-force loop, and every error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.layers.moe.routing import (
    DISTRIBUTIONS,
    DispatchPlan,
    MoeRoutingError,
    Routing,
    RoutingFileError,
    apply_capacity,
    assign,
    capacity,
    plan_dispatch,
    reference_moe,
    route,
    router_topk,
    weights_for,
    zipf_popularity,
)
from kernbench.topology.errors import KernbenchError


def _brute_topk(row, k: int) -> list[int]:
    return sorted(range(len(row)), key=lambda e: (-float(row[e]), e))[:k]


def _distinct_rows(experts: np.ndarray) -> bool:
    return all(len(set(r)) == len(r) for r in experts.tolist())


# --- router_topk and weights_for ----------------------------------------------------------------------------------


def test_topk_hand_cases_with_ties():
    logits = np.array([[1, 3, 2, 3], [0, 0, 0, 0], [5, -1, 5, 4]], dtype=np.float32)
    experts, _ = router_topk(logits, 3)
    assert experts.tolist() == [[1, 3, 2], [0, 1, 2], [0, 2, 3]]
    assert router_topk(logits, 1)[0].tolist() == [[1], [0], [0]]
    assert experts.dtype == np.int64


def test_topk_matches_brute_force_sort():
    rng = np.random.default_rng(3)
    logits = rng.integers(-2, 3, size=(60, 6)).astype(np.float32)  # many ties
    for k in range(1, 7):
        experts, weights = router_topk(logits, k)
        assert experts.tolist() == [_brute_topk(row, k) for row in logits]
        assert weights.shape == (60, k) and weights.dtype == np.float32


def test_softmax_hand_value_and_rows_sum_to_one():
    _, w = router_topk(np.array([[2.0, 1.0, 0.0]], dtype=np.float32), 2)
    e = math.e
    np.testing.assert_allclose(w[0], [e / (e + 1), 1 / (e + 1)], rtol=1e-6)
    logits = np.random.default_rng(0).standard_normal((100, 16)).astype(np.float32) * 10
    _, w = router_topk(logits, 4)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-6)
    assert (np.diff(w, axis=1) <= 0).all()  # descending logits give descending weights


def test_softmax_is_stable_for_huge_logits():
    _, w = router_topk(np.array([[1000.0, 999.0, -1000.0]], dtype=np.float32), 2)
    np.testing.assert_allclose(w[0], [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))], rtol=1e-6)


def test_weights_for_arbitrary_choice():
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]], dtype=np.float32)
    w = weights_for(logits, np.array([[2, 1], [0, 1]]))
    np.testing.assert_allclose(w[0], [1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-6)
    np.testing.assert_allclose(w[1], [0.5, 0.5])
    experts, top = router_topk(logits, 2)
    np.testing.assert_array_equal(weights_for(logits, experts), top)


@pytest.mark.parametrize("k", [0, 4, -1])
def test_topk_rejects_bad_k(k):
    with pytest.raises(MoeRoutingError, match="k = "):
        router_topk(np.zeros((2, 3), dtype=np.float32), k)


def test_topk_rejects_nan_and_bad_shape():
    with pytest.raises(MoeRoutingError, match="NaN"):
        router_topk(np.array([[0.0, np.nan]]), 1)
    with pytest.raises(MoeRoutingError, match="shape"):
        router_topk(np.zeros(4), 1)


def test_weights_for_rejects_mismatch():
    with pytest.raises(MoeRoutingError, match="token"):
        weights_for(np.zeros((3, 4)), np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(MoeRoutingError, match=r"\[0, 4\)"):
        weights_for(np.zeros((1, 4)), np.array([[4]]))


# --- distributions ------------------------------------------------------------------------------------------------


def test_balanced_hand_counts():
    experts = assign("balanced", 10, 4, 3)
    assert experts[:3].tolist() == [[0, 1, 2], [3, 0, 1], [2, 3, 0]]
    assert np.bincount(experts.ravel(), minlength=4).tolist() == [8, 8, 7, 7]


@pytest.mark.parametrize(("m", "e", "k"), [(7, 5, 2), (16, 8, 2), (1, 3, 3), (13, 6, 4), (5, 64, 8)])
def test_balanced_is_floor_or_ceil(m, e, k):
    experts = assign("balanced", m, e, k)
    counts = np.bincount(experts.ravel(), minlength=e)
    assert counts.sum() == m * k
    assert set(counts.tolist()) <= {m * k // e, -(-m * k // e)}
    assert _distinct_rows(experts)


@pytest.mark.parametrize("dist", ["uniform", "zipf"])
def test_random_distributions_are_seeded(dist):
    a = assign(dist, 200, 8, 3, seed=5)
    np.testing.assert_array_equal(a, assign(dist, 200, 8, 3, seed=5))
    assert not np.array_equal(a, assign(dist, 200, 8, 3, seed=6))
    assert a.dtype == np.int64 and a.shape == (200, 3)
    assert a.min() >= 0 and a.max() < 8
    assert _distinct_rows(a)


def test_uniform_k_equals_e_is_a_permutation():
    a = assign("uniform", 50, 5, 5, seed=1)
    assert all(sorted(r) == [0, 1, 2, 3, 4] for r in a.tolist())


def test_uniform_marginal():
    a = assign("uniform", 20000, 8, 2, seed=0)
    freq = np.bincount(a.ravel(), minlength=8) / 20000  # each expert is in a token's 2 picks with chance 2/8
    np.testing.assert_allclose(freq, 0.25, atol=0.01)


def test_zipf_expert_zero_is_hottest():
    counts = np.bincount(assign("zipf", 2000, 8, 2, seed=0, skew=2.0).ravel(), minlength=8)
    assert counts[0] > counts[7]
    assert counts[0] == counts.max()


def test_zipf_k1_matches_analytic_marginal():
    analytic = np.array([1 / (e + 1) ** 2 for e in range(8)])
    analytic /= analytic.sum()
    np.testing.assert_allclose(zipf_popularity(8, 2.0), analytic)
    freq = np.bincount(assign("zipf", 20000, 8, 1, seed=0, skew=2.0).ravel(), minlength=8) / 20000
    np.testing.assert_allclose(freq, analytic, atol=0.01)
    assert analytic[0] > 0.6  # a test that could fail: the marginal is far from uniform


def test_zipf_skew_zero_is_uniform():
    np.testing.assert_allclose(zipf_popularity(8, 0), np.full(8, 1 / 8))
    freq = np.bincount(assign("zipf", 20000, 8, 1, seed=2, skew=0.0).ravel(), minlength=8) / 20000
    np.testing.assert_allclose(freq, 1 / 8, atol=0.01)


def test_router_distribution_is_topk():
    logits = np.random.default_rng(1).standard_normal((20, 6)).astype(np.float32)
    np.testing.assert_array_equal(assign("router", 20, 6, 2, logits=logits), router_topk(logits, 2)[0])


# --- file distribution --------------------------------------------------------------------------------------------


def test_file_text(tmp_path):
    path = tmp_path / "route.txt"
    path.write_text("0 3\n2  1\n\t3 0\n\n")  # whitespace-separated, trailing blank line
    np.testing.assert_array_equal(assign("file", 3, 4, 2, path=str(path)), [[0, 3], [2, 1], [3, 0]])


def test_file_npy(tmp_path):
    path = tmp_path / "route.npy"
    ids = np.array([[1, 0], [3, 2]], dtype=np.int32)
    np.save(path, ids)
    got = assign("file", 2, 4, 2, path=path)
    np.testing.assert_array_equal(got, ids)
    assert got.dtype == np.int64


def test_route_with_file_uses_logit_weights(tmp_path):
    path = tmp_path / "route.txt"
    path.write_text("2 1\n0 1\n")
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]], dtype=np.float32)
    r = route(logits, 2, distribution="file", path=path)
    np.testing.assert_allclose(r.weights[0], [1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-6)


@pytest.mark.parametrize(("text", "match"), [
    ("0 1\n2 3\n", r"has 2 line\(s\) but there are 3 token"),
    ("0 1\n2 3\n1 2 3\n", r"line 3: 3 expert id\(s\), need k = 2"),
    ("0 1\n2 4\n1 2\n", r"line 2: expert id 4 is out of range"),
    ("0 1\n2 3\n1 -1\n", r"line 3: expert id -1 is out of range"),
    ("0 1\n2 3\n1 1\n", r"line 3: expert ids \[1, 1\] repeat an id"),
    ("0 1\nx 3\n1 2\n", r"line 2: .* integer"),
])
def test_file_text_errors(tmp_path, text, match):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(RoutingFileError, match=match) as info:
        assign("file", 3, 4, 2, path=path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_file_npy_errors(tmp_path):
    path = tmp_path / "bad.npy"
    np.save(path, np.array([[0, 1], [2, 2]]))
    with pytest.raises(RoutingFileError, match=r"row 1 \(token 1\): expert ids \[2, 2\] repeat"):
        assign("file", 2, 4, 2, path=path)
    np.save(path, np.array([[0, 1, 2]]))
    with pytest.raises(RoutingFileError, match=r"shape \(1, 3\).*\(2, 2\)"):
        assign("file", 2, 4, 2, path=path)
    np.save(path, np.array([[0.0, 1.0], [2.0, 3.0]]))
    with pytest.raises(RoutingFileError, match="integer array"):
        assign("file", 2, 4, 2, path=path)


def test_file_missing_or_not_given(tmp_path):
    with pytest.raises(RoutingFileError, match="does not exist"):
        assign("file", 2, 4, 2, path=tmp_path / "nope.txt")
    with pytest.raises(MoeRoutingError, match="needs path="):
        assign("file", 2, 4, 2)


# --- argument errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    (("gaussian", 4, 4, 1), {}, "unknown distribution 'gaussian'"),
    (("balanced", 4, 4, 5), {}, "k = 5 is more than the 4 expert"),
    (("balanced", 4, 4, 0), {}, "k = 0"),
    (("balanced", 0, 4, 1), {}, "tokens = 0"),
    (("balanced", 4, 0, 1), {}, "experts = 0"),
    (("zipf", 4, 4, 1), {"skew": -0.5}, "skew = -0.5"),
    (("zipf", 4, 4, 1), {"skew": float("nan")}, "skew = nan"),
    (("zipf", 4, 8, 3), {"skew": 1000.0}, "smaller skew"),
    (("uniform", 4, 4, 1), {"seed": -1}, "seed = -1"),
    (("router", 4, 4, 1), {}, "needs logits="),
    (("router", 4, 4, 1), {"logits": np.zeros((3, 4))}, r"\(4, 4\)"),
    (("uniform", 4, 4, 1), {"path": "x.txt"}, "distribution='file'"),
])
def test_assign_errors(args, kwargs, match):
    with pytest.raises(MoeRoutingError, match=match) as info:
        assign(*args, **kwargs)
    assert isinstance(info.value, KernbenchError)


def test_distributions_listed():
    assert DISTRIBUTIONS == ("router", "balanced", "uniform", "zipf", "file")


# --- capacity -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    ((10, 4, 2, 1.0), 5),      # 20 / 4 exactly
    ((10, 4, 1, 1.0), 3),      # ceil(2.5)
    ((7, 3, 2, 1.25), 6),      # ceil(5.833...)
    ((50, 1, 1, 1.1), 55),     # 1.1 * 50 is 55, not ceil(55.00000000000001) = 56 as in float arithmetic
    ((100, 4, 2, 1.1), 55),
    ((3, 8, 1, 1.0), 1),       # ceil(0.375)
    ((16, 8, 2, 2), 8),
])
def test_capacity_formula(args, expected):
    assert capacity(*args) == expected


def test_capacity_unlimited_and_errors():
    assert capacity(10, 4, 2, None) is None
    assert capacity(10, 4, 2, math.inf) is None
    for bad in (0, -1.0, float("nan"), -math.inf, "2"):
        with pytest.raises(MoeRoutingError, match="capacity factor"):
            capacity(10, 4, 2, bad)


def test_capacity_exactly_full_keeps_all_and_one_past_drops_the_last():
    experts = np.array([[0, 1], [2, 0], [1, 3], [0, 2]])  # expert 0 at (0,0), (1,1), (3,0): 3 tokens
    keep, counts, dropped = apply_capacity(experts, 3, num_experts=4)
    assert keep.all() and dropped == 0
    assert counts.tolist() == [3, 2, 2, 1]
    keep, counts, dropped = apply_capacity(experts, 2, num_experts=4)
    assert dropped == 1
    assert np.argwhere(~keep).tolist() == [[3, 0]]  # the last of expert 0's tokens in token order
    assert counts.tolist() == [2, 2, 2, 1]


def test_capacity_matches_brute_force():
    experts = assign("zipf", 40, 6, 3, seed=4, skew=1.5)
    for cap in (0, 1, 3, 7, 40):
        keep, counts, dropped = apply_capacity(experts, cap, num_experts=6)
        seen = [0] * 6
        want = np.zeros_like(keep)
        for t in range(40):
            for j in range(3):
                e = experts[t, j]
                if seen[e] < cap:
                    seen[e] += 1
                    want[t, j] = True
        np.testing.assert_array_equal(keep, want)
        assert counts.tolist() == seen and dropped == int((~want).sum())


def test_apply_capacity_none_and_errors():
    keep, counts, dropped = apply_capacity(np.array([[0], [0]]), None, num_experts=3)
    assert keep.all() and counts.tolist() == [2, 0, 0] and dropped == 0
    with pytest.raises(MoeRoutingError, match="capacity = -1"):
        apply_capacity(np.array([[0]]), -1, num_experts=1)
    with pytest.raises(MoeRoutingError, match=r"\[0, 2\)"):
        apply_capacity(np.array([[2]]), 1, num_experts=2)


# --- route and Routing --------------------------------------------------------------------------------------------


def test_route_all_tokens_to_one_expert_drops_beyond_capacity():
    logits = np.tile(np.array([[5.0, 0.0]], dtype=np.float32), (5, 1))
    r = route(logits, 1, capacity_factor=1.0)
    assert r.capacity == 3  # ceil(5 / 2)
    assert r.keep[:, 0].tolist() == [True, True, True, False, False]
    assert r.counts.tolist() == [3, 0] and r.dropped == 2
    assert r.max_load == 3 and r.mean_load == 1.5 and r.imbalance == 2.0
    np.testing.assert_allclose(r.weights, 1.0)  # dropped slots keep their (not renormalised) weights
    assert r.kept == 3 and r.tokens == 5 and r.k == 1 and r.num_experts == 2


def test_route_balanced_is_perfectly_balanced():
    r = route(np.zeros((16, 8), dtype=np.float32), 2, distribution="balanced", capacity_factor=1.0)
    assert r.capacity == 4 and r.dropped == 0
    assert r.histogram().tolist() == [4] * 8
    assert r.imbalance == 1.0
    np.testing.assert_allclose(r.weights, 0.5)


def test_routing_without_load_has_imbalance_one_and_is_read_only():
    r = Routing(np.array([[0]]), np.array([[1.0]]), np.array([[False]]), np.zeros(3, dtype=np.int64), 1, 0)
    assert r.mean_load == 0.0 and r.imbalance == 1.0
    with pytest.raises(ValueError, match="read-only"):
        r.experts[0, 0] = 1
    hist = r.histogram()
    hist[0] = 9
    assert r.counts[0] == 0
    with pytest.raises(MoeRoutingError, match="share one"):
        Routing(np.array([[0]]), np.array([[1.0, 0.0]]), np.array([[True]]), np.zeros(1), 0, None)


def test_route_unlimited_keeps_everything():
    logits = np.random.default_rng(7).standard_normal((30, 5)).astype(np.float32)
    r = route(logits, 2, distribution="zipf", seed=3, skew=3.0)
    assert r.capacity is None and r.dropped == 0 and r.keep.all()
    assert r.counts.sum() == 60
    np.testing.assert_allclose(r.weights.sum(axis=1), 1.0, atol=1e-6)


# --- dispatch plan ------------------------------------------------------------------------------------------------


def _dispatch_case() -> tuple[Routing, list[int]]:
    logits = np.random.default_rng(11).standard_normal((13, 6)).astype(np.float32)
    routing = route(logits, 2, distribution="zipf", seed=1, skew=1.0, capacity_factor=1.0)
    return routing, [2, 0, 1, 2, 0, 1]


def test_dispatch_order_is_sorted_by_rank_expert_token_slot():
    routing, owners = _dispatch_case()
    assert routing.dropped > 0  # the case exercises drops
    plan = plan_dispatch(routing, owners, 4)
    want = sorted((owners[e], e, t, j) for (t, j), e in np.ndenumerate(routing.experts) if routing.keep[t, j])
    got = [(owners[e], e, t, j) for e, t, j in zip(plan.expert_of_row, plan.token_of_row, plan.slot_of_row,
                                                   strict=True)]
    assert got == want
    assert plan.order.tolist() == [t * 2 + j for _, _, t, j in want]
    assert isinstance(plan, DispatchPlan) and plan.rows == routing.kept


def test_dispatch_counts():
    routing, owners = _dispatch_case()
    plan = plan_dispatch(routing, np.array(owners), 4)
    assert plan.send_counts.sum() == routing.kept == routing.tokens * routing.k - routing.dropped
    want = [sum(int(routing.counts[e]) for e in range(6) if owners[e] == r) for r in range(4)]
    assert plan.send_counts.tolist() == want and want[3] == 0
    assert plan.input_split_sizes() == want
    np.testing.assert_array_equal(plan.rows_per_expert, routing.counts)


def test_dispatch_errors():
    routing, owners = _dispatch_case()
    with pytest.raises(MoeRoutingError, match="one integer rank per expert"):
        plan_dispatch(routing, owners[:5], 3)
    with pytest.raises(MoeRoutingError, match=r"expert 0 is owned by rank 2; use ranks in \[0, 2\)"):
        plan_dispatch(routing, owners, 2)
    with pytest.raises(MoeRoutingError, match="ranks = 0"):
        plan_dispatch(routing, owners, 0)


# --- reference ----------------------------------------------------------------------------------------------------


def test_reference_moe_matches_per_token_loop():
    rng = np.random.default_rng(5)
    m, e, h = 12, 4, 6
    x = rng.standard_normal((m, h)).astype(np.float16)
    w = rng.standard_normal((e, h, h)).astype(np.float32)
    routing = route(rng.standard_normal((m, e)).astype(np.float32), 2, capacity_factor=1.0)
    calls = []

    def expert_fn(ex, rows):
        calls.append((ex, rows.shape[0]))
        return np.tanh(rows @ w[ex])

    out = reference_moe(x, routing, expert_fn)
    want = np.zeros((m, h), dtype=np.float32)
    for t in range(m):
        for j in range(2):
            if routing.keep[t, j]:
                ex = routing.experts[t, j]
                want[t] += routing.weights[t, j] * np.tanh(x[t:t + 1].astype(np.float32) @ w[ex])[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert sorted(calls) == [(ex, int(c)) for ex, c in enumerate(routing.counts) if c]
    assert routing.dropped > 0 and not np.allclose(out, 0)


def test_reference_moe_dropped_token_is_zero():
    logits = np.tile(np.array([[5.0, 0.0]], dtype=np.float32), (3, 1))
    routing = route(logits, 1, capacity_factor=1.0)  # capacity 2: token 2 dropped
    out = reference_moe(np.ones((3, 2)), routing, lambda ex, rows: rows * 3)
    np.testing.assert_array_equal(out, [[3, 3], [3, 3], [0, 0]])


def test_reference_moe_errors():
    routing = route(np.zeros((2, 2), dtype=np.float32), 1)
    with pytest.raises(MoeRoutingError, match="x has shape"):
        reference_moe(np.zeros((3, 2)), routing, lambda ex, rows: rows)
    with pytest.raises(MoeRoutingError, match="returned shape"):
        reference_moe(np.zeros((2, 2)), routing, lambda ex, rows: rows[:, :1])
