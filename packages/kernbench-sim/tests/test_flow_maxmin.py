"""The max-min solver of flow fidelity (``kernbench.sim.flow.max_min_rates``) against hand-computed cases.

Every expected rate below is worked out by hand in the comment beside it with
progressive filling: all unfrozen flows grow together; the first link to fill
(smallest remaining capacity / unfrozen flows on it) freezes its flows at that
share; repeat on what is left.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.sim.flow import check_fidelity, max_min_rates


def test_two_flows_sharing_one_link_get_half_each():
    # one link of 10 shared by two flows: 10 / 2 = 5 each
    assert max_min_rates([["L"], ["L"]], {"L": 10.0}) == [5.0, 5.0]


def test_a_lone_flow_gets_its_slowest_link():
    # a flow over links of 10 and 4 is limited by the 4
    assert max_min_rates([["A", "B"]], {"A": 10.0, "B": 4.0}) == [4.0]


def test_classic_three_flows_one_bottlenecked_elsewhere():
    # f0 crosses A (cap 10) only, f1 crosses A and B, f2 crosses B (cap 4) only.
    # Fair shares: A 10/2 = 5, B 4/2 = 2 -> B fills first: f1 = f2 = 2.
    # A then has 10 - 2 = 8 left for f0 alone: f0 = 8 (not the naive 5).
    rates = max_min_rates([["A"], ["A", "B"], ["B"]], {"A": 10.0, "B": 4.0})
    assert rates == pytest.approx([8.0, 2.0, 2.0])


def test_parking_lot():
    # f0 crosses L1, L2, L3 (each cap 1); f1, f2, f3 cross one each: every link has 2 flows, 1/2 each.
    rates = max_min_rates([["L1", "L2", "L3"], ["L1"], ["L2"], ["L3"]], {"L1": 1.0, "L2": 1.0, "L3": 1.0})
    assert rates == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_a_capped_flow_leaves_the_rest_to_the_others():
    # three flows on a link of 12; f0 may not exceed 1 (its source is slow): 1, then (12 - 1) / 2 = 5.5 each
    rates = max_min_rates([["L"], ["L"], ["L"]], {"L": 12.0}, [1.0, None, None])
    assert rates == pytest.approx([1.0, 5.5, 5.5])
    # a cap above the fair share changes nothing: 12 / 3 = 4 each
    assert max_min_rates([["L"], ["L"], ["L"]], {"L": 12.0}, [7.0, None, None]) == pytest.approx([4.0] * 3)


def test_two_level_bottlenecks():
    # links: X cap 6 (f0, f1, f2), Y cap 2 (f2, f3), Z cap 9 (f1, f4).
    # round 1 shares: X 6/3 = 2, Y 2/2 = 1, Z 9/2 = 4.5 -> Y fills: f2 = f3 = 1.
    # round 2: X has 6 - 1 = 5 for f0, f1 -> 2.5; Z 9/2 = 4.5 -> X fills: f0 = f1 = 2.5.
    # round 3: Z has 9 - 2.5 = 6.5 for f4 -> 6.5.
    rates = max_min_rates([["X"], ["X", "Z"], ["X", "Y"], ["Y"], ["Z"]], {"X": 6.0, "Y": 2.0, "Z": 9.0})
    assert rates == pytest.approx([2.5, 2.5, 1.0, 1.0, 6.5])


def test_no_flows_and_linkless_flows():
    assert max_min_rates([], {}) == []
    assert max_min_rates([[]], {}) == [float("inf")]
    assert max_min_rates([[]], {}, [3.0]) == [3.0]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_rate_is_feasible_and_max_min_fair(data):
    """The max-min characterisation: no link is over capacity, and every flow is at its cap or crosses a full
    link on which no flow gets more than it (its bottleneck)."""
    n_links = data.draw(st.integers(1, 5))
    caps = {f"L{i}": data.draw(st.floats(0.5, 100.0)) for i in range(n_links)}
    n = data.draw(st.integers(1, 7))
    paths = [data.draw(st.lists(st.sampled_from(sorted(caps)), min_size=1, max_size=n_links, unique=True))
             for _ in range(n)]
    limits = [data.draw(st.one_of(st.none(), st.floats(0.1, 50.0))) for _ in range(n)]
    rates = max_min_rates(paths, caps, limits)
    load = dict.fromkeys(caps, 0.0)
    for p, r in zip(paths, rates, strict=True):
        for link in p:
            load[link] += r
    for link, c in caps.items():
        assert load[link] <= c * (1 + 1e-9) + 1e-9
    for i, (p, r) in enumerate(zip(paths, rates, strict=True)):
        if limits[i] is not None and r == pytest.approx(limits[i]):
            continue
        bottleneck = [link for link in p if load[link] == pytest.approx(caps[link])
                      and all(rates[j] <= r * (1 + 1e-9) + 1e-12 for j in range(n) if link in paths[j])]
        assert bottleneck, f"flow {i} at {r} has no bottleneck link"


def test_fidelity_names():
    assert check_fidelity("packet") == "packet" and check_fidelity("flow") == "flow"
    with pytest.raises(ValueError, match="packet, flow"):
        check_fidelity("fluid")
