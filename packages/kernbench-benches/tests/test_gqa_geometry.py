"""Placement and reduce geometry of the attention library, checked against the mesh and the splits directly."""

from __future__ import annotations

import pytest

from kernbench.layers.attention.benchkit import inputs
from kernbench.layers.attention.geometry import cube_groups, grid_tree, group_sizes, ring_order
from kernbench.layers.attention.problem import check_problem
from kernbench.layers.attention.ring_plan import plan_ring
from kernbench.layers.attention.tree_plan import PARTITIONS, plan_tree
from kernbench.topology import spec_from_dict

SPEC = spec_from_dict({})
STEP = {"E": (1, 0), "W": (-1, 0), "N": (0, -1), "S": (0, 1)}


@pytest.mark.parametrize(("n", "width"), [(1, 4), (2, 4), (3, 4), (4, 4), (5, 4), (7, 4), (8, 4), (16, 4), (8, 2),
                                          (6, 3), (12, 4)])
def test_grid_trees_are_centre_rooted_trees_of_single_hops(n, width):
    nodes, root = grid_tree(n, width)
    w = min(width, n)
    pos = {i: (i % w, i // w) for i in range(n)}
    at = {p: i for i, p in pos.items()}
    rows = -(-n // w)
    assert pos[root] == ((w - 1) // 2, (rows - 1) // 2)  # the centre: column (w-1)//2 of row (rows-1)//2
    for i, node in enumerate(nodes):
        if node.parent is None:
            assert i == root
            continue
        dx, dy = STEP[node.parent]
        parent = at[(pos[i][0] + dx, pos[i][1] + dy)]  # a mesh neighbour that exists
        back = {"E": "W", "W": "E", "N": "S", "S": "N"}[node.parent]
        assert back in nodes[parent].children
    for i in range(n):  # every node reaches the root without a cycle, within half the width plus half the height
        seen, j, hops = set(), i, 0
        while nodes[j].parent is not None:
            assert j not in seen
            seen.add(j)
            dx, dy = STEP[nodes[j].parent]
            j, hops = at[(pos[j][0] + dx, pos[j][1] + dy)], hops + 1
        assert j == root and hops <= w // 2 + rows // 2 + 1
    assert sum(len(nd.children) for nd in nodes) == n - 1


def test_groups_tile_the_mesh_into_rectangles():
    assert group_sizes(SPEC) == (1, 2, 4, 8, 12, 16)
    groups = cube_groups(SPEC, 2, 8, what="t")
    assert [g.cubes for g in groups] == [tuple(range(8)), tuple(range(8, 16))]
    assert [(g.x0, g.y0, g.w, g.h) for g in groups] == [(0, 0, 4, 2), (0, 2, 4, 2)]
    assert [(g.x0, g.y0, g.w, g.h) for g in cube_groups(SPEC, 3, 2, what="t")] == [(0, 0, 2, 1), (2, 0, 2, 1),
                                                                                   (0, 1, 2, 1)]


def test_rings_are_single_hops_except_the_closing_link_of_a_row():
    for cubes in (2, 4, 8, 16):
        order = ring_order(SPEC, cube_groups(SPEC, 1, cubes, what="t")[0])
        assert sorted(order) == list(range(cubes))
        hops = [abs(a % 4 - b % 4) + abs(a // 4 - b // 4) for a, b in zip(order, order[1:] + order[:1], strict=True)]
        if cubes <= 4:
            assert hops == [1] * (cubes - 1) + [cubes - 1]
        else:
            assert hops == [1] * cubes


@pytest.mark.parametrize("partition", PARTITIONS)
@pytest.mark.parametrize(("s", "hkv", "pes", "cubes"), [(100, 2, 3, 2), (1000, 4, 8, 4), (9, 1, 1, 1)])
def test_every_key_of_every_head_is_attended_exactly_once(partition, s, hkv, pes, cubes):
    """For each user and KV head, the segments attended in each reduce tree cover 0..S-1 with no gap or overlap
    (cube_repl_pe_sp: once per cube, each cube's tree being separate)."""
    if partition == "single_pe":
        cubes = 1
    if partition == "short" and hkv % cubes:
        return
    q, k, v = inputs(2, 2 * hkv, hkv, 1, s, 8)
    problem = check_problem(q, k, v, what="t", decode=True)
    plan = plan_tree(SPEC, partition, problem, pes=pes, cubes=cubes, tile=64, variant="opt2", causal=False, what="t")
    copies = cubes if partition == "cube_repl_pe_sp" else 1
    for user in plan.users:
        for h in range(hkv):
            keys = sorted(k for steps in user.steps.values() for st in steps if st.head == h and st.seg
                          for k in range(st.seg.k0, st.seg.k1))
            assert keys == sorted(list(range(s)) * copies)
        stores = list(user.stores.values())
        assert len(stores) == hkv  # one block of G rows per KV head, each stored once


def test_ring_actions_visit_every_block_once_and_agree_along_the_ring():
    q, k, v = inputs(1, 8, 1, 10, 333, 64)
    problem = check_problem(q, k, v, what="t", decode=False)
    plan = plan_ring(SPEC, problem, pes=2, cubes=8, tile=64, causal=True, what="t")
    pes = plan.users[0].pes
    order = ring_order(SPEC, plan.users[0].group)
    for (cube, pe), work in pes.items():
        keys = sorted(k for a in work.actions for k in range(a.k0, a.k1))
        assert keys == list(range(333))
        nxt = order[(order.index(cube) + 1) % 8]
        sent = [(a.k0, a.k1) for a in work.actions if a.step < 7]
        received = [(a.k0, a.k1) for a in pes[(nxt, pe)].actions if a.step > 0]
        assert sent == received  # what a PE forwards is what its successor receives, in the same order
