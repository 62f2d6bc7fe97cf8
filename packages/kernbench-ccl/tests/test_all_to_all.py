"""all_to_all_single end to end, exact against a numpy model, and its plans, timing and errors.

Inputs are random float16 values and the splits are uneven, with zero-size
splits among them; an all-to-all only copies rows, so every output must be
bit-exact. Both algorithm modules run on the 2-SIP default and on the three
6-SIP 2 x 3 topologies, with tensors on one cube and split over every cube,
and rings in TCM (SRAM and HBM on the torus; the other combinations are slow).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401
from kernbench.ccl import CclConfigError, CollectiveError, NotInitializedError, collective_span_ns
from kernbench.ccl.algorithms import grid_all_to_all_hierarchical as hierarchical
from kernbench.ccl.algorithms import grid_all_to_all_pairwise as pairwise
from kernbench.ccl.exchange import ExchangeError, Fabric, input_region
from kernbench.ccl.launch_spec import SplitTable
from kernbench.ccl.neighbours import sip_grid, sip_strategy
from kernbench.components.pe.ipcq import OPPOSITE
from kernbench.runtime import DPPolicy, RuntimeContext

ONE = DPPolicy(num_cubes=1, num_pes=1)  # one 2-D shard on PE 0 of cube 0
ALL = DPPolicy(cube="row_wise", num_pes=1)  # rows split over PE 0 of every cube
LAYOUTS = {"one": ONE, "all": ALL}
ALGOS = {"pairwise": "grid_all_to_all_pairwise", "hierarchical": "grid_all_to_all_hierarchical"}
SIX = ["6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"]
COLS = 32


def uneven_splits(world: int, seed: int, least: int = 0) -> np.ndarray:
    """``splits[i, j]``: rows rank ``i`` sends rank ``j``; uneven, with zeros (rank 0 sends the last rank
    nothing; beyond two ranks the last rank sends rank 0 nothing too, and a quarter of the blocks are empty), and
    at least ``least`` rows in every rank's input and output."""
    rng = np.random.default_rng(seed)
    splits = rng.integers(1, 7, size=(world, world))
    if world > 2:
        splits[rng.random((world, world)) < 0.25] = 0
        splits[world - 1, 0] = 0
    splits[0, world - 1] = 0
    for i in range(world):  # top up the own block so every input and output holds `least` rows
        splits[i, i] += max(0, least - splits[i].sum(), least - splits[:, i].sum(), 1 - splits[i].sum())
    return splits


def inputs(splits: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 100)
    return [rng.standard_normal((int(row.sum()), COLS)).astype(np.float16) for row in splits]


def model(xs: list[np.ndarray], splits: np.ndarray) -> list[np.ndarray]:
    """What PyTorch's all_to_all_single leaves in each rank's output: in rank order, the rows each rank sent it."""
    world = len(xs)
    starts = np.concatenate([np.zeros((world, 1), int), np.cumsum(splits, axis=1)], axis=1)
    return [np.concatenate([xs[i][starts[i, j]:starts[i, j + 1]] for i in range(world)]) for j in range(world)]


def run(graph, body, kind="tcm", algo="pairwise"):
    """Spawn one rank per SIP running ``body(torch, rank, out)`` in a process group whose all_to_all runs
    ``algo``; returns (torch, out)."""
    torch = RuntimeContext(graph, data=True)
    out: dict = {}

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm", buffer_kind=kind,
                                             algorithms={"all_to_all": ALGOS[algo]})
        body(torch, rank, out)
        torch.distributed.destroy_process_group()

    torch.multiprocessing.spawn(worker, nprocs=graph.spec.system.sips.count)
    return torch, out


def exchange(graph, splits, xs, algo="pairwise", layout="one", kind="tcm"):
    """Run one all_to_all_single of ``xs`` with ``splits``; returns (outputs by rank, span ns)."""
    policy = LAYOUTS[layout]

    def body(torch, rank, out):
        o = torch.empty((int(splits[:, rank].sum()), COLS), "float16", policy)
        torch.distributed.all_to_all_single(o, torch.from_numpy(xs[rank], policy), splits[:, rank].tolist(),
                                            splits[rank].tolist())
        out[rank] = torch.to_numpy(o)

    torch, out = run(graph, body, kind, algo)
    results = torch.distributed.collective_results["all_to_all"]
    assert len(results) == len(xs)
    return out, collective_span_ns([r for _, r in results])


def mismatches(out: dict, want: list[np.ndarray]) -> list[int]:
    """The ranks whose output differs from the model in any bit."""
    return [r for r in range(len(want)) if out[r].shape != want[r].shape or out[r].tobytes() != want[r].tobytes()]


def check_exact(graph, algo, layout, kind="tcm", seed=1):
    world = graph.spec.system.sips.count
    splits = uneven_splits(world, seed, least=graph.spec.cubes_per_sip if layout == "all" else 1)
    assert (splits == 0).any() and len(set(splits.ravel().tolist())) > 2  # uneven, with zero-size splits
    xs = inputs(splits, seed)
    out, span = exchange(graph, splits, xs, algo, layout, kind)
    assert mismatches(out, model(xs, splits)) == []
    assert span > 0


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("topo", ["topology", "6sip_2x3_torus_2d"])
def test_exact_against_numpy(load_graph, topo, algo, layout):
    check_exact(load_graph(topo), algo, layout)


@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_mesh_2d_no_wrap"])
def test_exact_on_the_ring_and_the_mesh_with_one_cube(load_graph, topo, algo):
    check_exact(load_graph(topo), algo, "one", seed=2)


@pytest.mark.parametrize("kind", ["sram", "hbm"])
@pytest.mark.parametrize("algo", list(ALGOS))
def test_exact_with_sram_and_hbm_rings_on_the_torus(load_graph, algo, kind):
    check_exact(load_graph("6sip_2x3_torus_2d"), algo, "one", kind, seed=3)


@pytest.mark.slow
@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_mesh_2d_no_wrap"])
def test_exact_on_the_ring_and_the_mesh_over_every_cube(load_graph, topo, algo):
    check_exact(load_graph(topo), algo, "all", seed=4)


@pytest.mark.slow
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["sram", "hbm"])
@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("topo", SIX)
def test_exact_with_every_buffer_kind(load_graph, topo, algo, kind, layout):
    check_exact(load_graph(topo), algo, layout, kind, seed=5)


def test_equal_splits_when_none_are_given(load_graph):
    graph = load_graph("6sip_2x3_torus_2d")
    xs = inputs(np.full((6, 6), 2), 6)

    def body(torch, rank, out):
        o = torch.empty((12, COLS), "float16", ONE)
        torch.distributed.all_to_all_single(o, torch.from_numpy(xs[rank], ONE))
        out[rank] = torch.to_numpy(o)

    _, out = run(graph, body)
    assert mismatches(out, model(xs, np.full((6, 6), 2))) == []


def test_ranks_that_send_or_receive_only_their_own_rows(load_graph):
    """Rank 0 sends nobody else anything, and nobody sends rank 5 anything."""
    splits = uneven_splits(6, 7) + 1
    splits[0, 1:] = 0
    splits[:5, 5] = 0
    xs = inputs(splits, 7)
    for algo in ALGOS:
        out, _ = exchange(load_graph("6sip_2x3_torus_2d"), splits, xs, algo)
        assert mismatches(out, model(xs, splits)) == [], algo


# ---------------------------------------------------------------------------------------------- the tests can fail
class _SwappedDestinations(SplitTable):
    """Reads rank 1's block where rank 2's belongs and the other way round (a plan bug the checks must catch)."""

    def sent_before(self, i: int, j: int) -> int:
        return SplitTable.sent_before(self, i, {1: 2, 2: 1}.get(j, j))


@pytest.mark.parametrize("module", [pairwise, hierarchical], ids=["pairwise", "hierarchical"])
def test_swapping_two_destinations_is_caught(load_graph, monkeypatch, module):
    graph = load_graph("6sip_2x3_torus_2d")
    splits = np.full((6, 6), 3)  # equal blocks: swapped blocks still fit, only the data is wrong
    xs = inputs(splits, 8)
    real = module.plan.__wrapped__
    monkeypatch.setattr(module, "plan", lambda t, *a: real(_SwappedDestinations(**{
        f.name: getattr(t, f.name) for f in dataclasses.fields(t)}), *a))
    out, _ = exchange(graph, splits, xs, "pairwise" if module is pairwise else "hierarchical")
    assert mismatches(out, model(xs, splits)) == [1, 2]  # ranks 1 and 2 hold each other's rows


# ---------------------------------------------------------------------------------------------- timing
def test_a_larger_payload_takes_longer_and_both_algorithms_agree(load_graph):
    graph = load_graph("6sip_2x3_torus_2d")
    spans = {}
    for scale in (1, 16):
        splits = uneven_splits(6, 9) * scale
        xs = inputs(splits, 9)
        outs = {}
        for algo in ALGOS:
            outs[algo], spans[(algo, scale)] = exchange(graph, splits, xs, algo)
        assert all(outs["pairwise"][r].tobytes() == outs["hierarchical"][r].tobytes() for r in range(6))
        assert mismatches(outs["pairwise"], model(xs, splits)) == []
    for algo in ALGOS:
        assert spans[(algo, 1)] < spans[(algo, 16)], spans


def test_the_algorithms_differ_in_time_over_every_cube(load_graph):
    """Over every cube the hierarchical funnels each SIP's rows through one root PE, so the two plans differ."""
    graph = load_graph("topology")
    splits = uneven_splits(2, 10, least=16) + 8
    xs = inputs(splits, 10)
    (out_p, span_p), (out_h, span_h) = (exchange(graph, splits, xs, a, "all") for a in ALGOS)
    assert all(out_p[r].tobytes() == out_h[r].tobytes() for r in range(2))
    assert span_p != span_h


# ---------------------------------------------------------------------------------------------- plans
def table(world: int, splits: np.ndarray, cubes: tuple[int, ...], row_bytes: int = 64, slot: int = 128 << 10,
          scratch: int = 1 << 20) -> SplitTable:
    def rows(n: int) -> tuple[int, ...]:
        base, extra = divmod(n, len(cubes))
        return tuple(base + (k < extra) for k in range(len(cubes)))

    return SplitTable(tuple(map(tuple, splits.tolist())), tuple(rows(int(splits[i].sum())) for i in range(world)),
                      tuple(rows(int(splits[:, j].sum())) for j in range(world)), cubes, row_bytes, slot, scratch)


def plans(spec_graph, world, splits, cubes):
    spec = spec_graph.spec
    topo = sip_strategy(spec.system.sips.topology)
    rows, cols = sip_grid(spec, world, topo)
    t = table(world, splits, cubes)
    w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    return t, pairwise.plan(t, topo, rows, cols, w), hierarchical.plan(t, topo, rows, cols, w, h)


def link_loads(plan):
    """(node, direction, step) -> messages sent: at most one per link and step, or the schedule could deadlock."""
    loads: dict = {}
    for node, steps in plan.programs.items():
        for step in steps:
            for s in step.sends:
                loads[(node, s.direction, step.step)] = loads.get((node, s.direction, step.step), 0) + 1
    return loads


@pytest.mark.parametrize("topo", ["6sip_2x3_torus_2d", "6sip_2x3_ring_1d", "6sip_2x3_mesh_2d_no_wrap"])
def test_plans_use_each_link_once_per_step_and_fit_the_scratch(load_graph, topo):
    graph = load_graph(topo)
    splits = uneven_splits(6, 11, least=16) * 40  # blocks of many pieces
    _, p, h = plans(graph, 6, splits, tuple(range(16)))
    topology = sip_strategy(graph.spec.system.sips.topology)
    fabric = Fabric.build(6, topology, sip_grid(graph.spec, 6, topology), tuple(range(16)), 4)
    for plan in (p, h):
        assert max(link_loads(plan).values()) == 1
        assert plan.rows_per_piece * 64 * (2 * fabric.degree + 1) <= 1 << 20  # a piece per link in and out, and one
        sent = {(fabric.links[node][s.direction], OPPOSITE[s.direction], step.step): s.rows
                for node, steps in plan.programs.items() for step in steps for s in step.sends}
        received = {(node, r.direction, step.step): r.rows
                    for node, steps in plan.programs.items() for step in steps for r in step.recvs}
        assert sent == received  # every receive meets the send of its step and link, of the same size
        assert max(received.values()) <= plan.rows_per_piece


def test_a_ring_of_one_cube_tensors_has_nothing_to_stage(load_graph):
    """On one row of one-cube tensors the hierarchical exchange is the pairwise one."""
    splits = uneven_splits(6, 12)
    _, p, h = plans(load_graph("6sip_2x3_ring_1d"), 6, splits, (0,))
    assert h.stage_rows == (0,) * 6 and h.programs == p.programs


def test_the_hierarchical_plan_sends_fewer_messages_between_sips(load_graph):
    splits = uneven_splits(6, 13, least=16) + 2
    _, p, h = plans(load_graph("6sip_2x3_torus_2d"), 6, splits, tuple(range(16)))

    def global_messages(plan):
        return sum(1 for steps in plan.programs.values() for step in steps for s in step.sends
                   if s.direction.startswith("global_"))

    assert global_messages(h) < global_messages(p)
    assert all(rows > 0 for rows in h.stage_rows) and p.stage_rows == (0,) * 6


def test_routes_on_a_two_rank_ring_use_both_links(load_graph):
    """Between two ranks global_E and global_W are equally short: pieces alternate between them."""
    splits = np.array([[1, 40], [40, 1]])
    _, p, _ = plans(load_graph("topology"), 2, splits, tuple(range(16)))
    used = {s.direction for steps in p.programs.values() for step in steps for s in step.sends}
    assert {"global_E", "global_W"} <= used


def test_a_row_larger_than_a_message_is_refused(load_graph):
    t = table(2, np.array([[1, 1], [1, 1]]), (0,), row_bytes=200 << 10)
    fabric = Fabric.build(2, sip_strategy("ring_1d"), (1, 2), (0,), 4)
    with pytest.raises(ExchangeError, match="a row of 204800 B does not fit one message"):
        pairwise.plan(t, sip_strategy("ring_1d"), 1, 2, 4)
    assert input_region(t, 0).size == 2 and fabric.degree == 2


# ---------------------------------------------------------------------------------------------- errors
def test_all_to_all_before_the_process_group_is_an_error(default_graph):
    torch = RuntimeContext(default_graph)
    t = torch.empty((2, 8), "float16", ONE)
    with pytest.raises(NotInitializedError, match=r"torch\.distributed\.all_to_all_single: the default process "
                                                  r"group has not been initialized"):
        torch.distributed.all_to_all_single(t, t)


def spawn_error(graph, body):
    with pytest.raises(CollectiveError) as exc:
        run(graph, body)
    message = str(exc.value).split("raised by rank")[0].strip()
    assert "\n" not in message
    return message


def test_splits_that_differ_across_ranks_name_both_ranks_and_sizes(default_graph):
    def body(torch, rank, out):  # rank 0 sends rank 1 three rows; rank 1 expects two from rank 0
        inp = torch.empty((5, 8), "float16", ONE)
        o = torch.empty((4, 8), "float16", ONE) if rank == 1 else torch.empty((5, 8), "float16", ONE)
        receives = [2, 3] if rank == 0 else [2, 2]
        torch.distributed.all_to_all_single(o, inp, receives, [2, 3])

    assert spawn_error(default_graph, body) == (
        "all_to_all_single #1: rank 0 sends 3 rows to rank 1 but rank 1 expects 2 rows from rank 0; rank 1's "
        "output_split_sizes[0] must equal rank 0's input_split_sizes[1]")


@pytest.mark.parametrize(("sends", "message"), [
    ([2, 2], "all_to_all_single: rank 0: input_split_sizes [2, 2] add up to 4 rows but the input has 5 rows (dim 0); "
             "the splits must add up to them"),
    ([6, -1], "all_to_all_single: rank 0: input_split_sizes[1] = -1 is negative; a split is a number of rows (>= 0)"),
    ([5], "all_to_all_single: rank 0: input_split_sizes has 1 entries but the group has 2 ranks; give one row "
          "count per rank"),
    ([2.5, 2.5], "all_to_all_single: rank 0: input_split_sizes must be a sequence of 2 row counts, got [2.5, 2.5]"),
    (None, "all_to_all_single: rank 0: the input has 5 rows, which world size 2 does not divide into equal splits; "
           "pass input_split_sizes (rows per rank)"),
])
def test_bad_splits_name_the_rank_and_the_sizes(default_graph, sends, message):
    def body(torch, rank, out):
        t = torch.empty((5, 8), "float16", ONE)
        torch.distributed.all_to_all_single(t, t, [3, 2], sends)

    assert spawn_error(default_graph, body) == message


def test_tensors_it_cannot_place_are_errors(default_graph):
    def four_cubes(torch, rank, out):
        t = torch.empty((8, 8), "float16", DPPolicy(cube="row_wise", num_cubes=4, num_pes=1))
        torch.distributed.all_to_all_single(t, t)

    assert spawn_error(default_graph, four_cubes).startswith(
        "all_to_all_single: rank 0: input must be 2-D on PE 0 of one cube (DPPolicy(num_cubes=1, num_pes=1)) or "
        "split row-wise over PE 0 of every cube (DPPolicy(cube='row_wise', num_pes=1)); got shape [8, 8] with "
        "shards on [(0, 0), (1, 0), (2, 0), (3, 0)]")

    def other_cube(torch, rank, out):
        torch.distributed.all_to_all_single(torch.empty((4, 8), "float16", DPPolicy(num_cubes=1, cube_start=1,
                                                                                    num_pes=1)),
                                            torch.empty((4, 8), "float16", ONE))

    assert spawn_error(default_graph, other_cube) == (
        "all_to_all_single: rank 0 passes output float16[4, 8] on cube(s) [1] and input float16[4, 8] on cube(s) "
        "[0]; both need the same columns and dtype on the same cubes")

    def other_dtype(torch, rank, out):
        t = torch.empty((4, 8), "float16" if rank == 0 else "float32", ONE)
        torch.distributed.all_to_all_single(t, t)

    assert spawn_error(default_graph, other_dtype) == (
        "all_to_all_single #1: rank 1 passes rows of 8 float32 values on cube(s) [0] but rank 0 passed rows of 8 "
        "float16 values on cube(s) [0]; every rank must pass the same sizes")


# ---------------------------------------------------------------------------------------------- ccl.yaml
def test_ccl_yaml_and_algorithms_choose_the_all_to_all(default_graph, tmp_path):
    torch = RuntimeContext(default_graph)
    d = torch.distributed
    d.init_process_group()
    assert d._group.algorithms["all_to_all"][0].name == "grid_all_to_all_pairwise"  # the packaged default
    d.destroy_process_group()
    d.init_process_group(algorithms={"all_to_all": "grid_all_to_all_hierarchical"})
    assert d._group.algorithms["all_to_all"][0].name == "grid_all_to_all_hierarchical"
    d.destroy_process_group()
    path = tmp_path / "ccl.yaml"
    path.write_text("collectives:\n  all_reduce: {algorithm: lrab}\n  all_to_all: {algorithm: h}\n"
                    "algorithms:\n  lrab: {module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce}\n"
                    "  h: {module: kernbench.ccl.algorithms.grid_all_to_all_hierarchical}\n"
                    "  b: {module: kernbench.ccl.algorithms.grid_all_to_all_pairwise}\n")
    d.init_process_group(config=str(path))
    assert d._group.algorithms["all_to_all"][0].name == "h"
    d.destroy_process_group()
    d.init_process_group(config=str(path), algorithms={"all_to_all": "b"})  # an entry of the file in use
    assert d._group.algorithms["all_to_all"][0].name == "b"
    d.destroy_process_group()
    with pytest.raises(CclConfigError, match="algorithm 'b' runs all_to_all, not broadcast"):
        d.init_process_group(config=str(path), algorithms={"broadcast": "b"})
    with pytest.raises(CclConfigError, match="algorithm 'grid_all_to_all_pairwise' runs all_to_all, not broadcast"):
        d.init_process_group(algorithms={"broadcast": "grid_all_to_all_pairwise"})  # an entry of the packaged file
    with pytest.raises(CclConfigError, match="algorithms= names 'all_reduce', which is not one of"):
        d.init_process_group(algorithms={"all_reduce": "lrab_hierarchical_allreduce"})
    assert not d.is_initialized()
