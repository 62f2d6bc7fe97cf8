"""broadcast, all_gather_into_tensor, reduce_scatter_tensor and barrier end to end, exact against numpy models.

Inputs are random float16 values (not small integers), so the
reduce-scatter is checked against a numpy model of the algorithm's own add
order (:func:`reduce_line_model`: float32 adds rounded to float16, the
west side before the east side at every root). Copies (broadcast,
all-gather) must be bit-exact.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401
from kernbench.ccl import CclConfigError, CollectiveError, NotInitializedError, collective_span_ns
from kernbench.runtime import DPPolicy, RuntimeContext

ONE = DPPolicy(num_cubes=1, num_pes=1)  # one 2-D shard on PE 0 of cube 0
SIX = ["6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"]
KINDS = ["tcm", "sram", "hbm"]
ROWS, COLS = 2, 32


def inputs(world: int, rows: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((rows, COLS)).astype(np.float16) for _ in range(world)]


def add16(a, b):
    return (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)


def reduce_line_model(vals: list, root: int):
    """The sum :func:`kernbench.ccl.lines.reduce_line` leaves at ``root``: each side accumulates from its far
    end towards the root, the root adds the west side's sum, then the east side's."""
    n, acc = len(vals), vals[root]
    if root > 0:
        west = vals[0]
        for i in range(1, root):
            west = add16(vals[i], west)
        acc = add16(acc, west)
    if root < n - 1:
        east = vals[n - 1]
        for i in range(n - 2, root, -1):
            east = add16(vals[i], east)
        acc = add16(acc, east)
    return acc


def reduce_scatter_model(xs: list, grid: tuple[int, int], rows: int) -> list:
    """Rank ``r``'s output of ``grid_reduce_scatter``: columns first, then rows."""
    h, w = grid

    def blk(x, b):
        return x[b * rows:(b + 1) * rows]

    out = []
    for rank in range(h * w):
        tr, tc = divmod(rank, w)
        partial = [reduce_line_model([blk(xs[r * w + c], rank) for r in range(h)], tr) for c in range(w)]
        out.append(reduce_line_model(partial, tc))
    return out


def run(graph, body, kind="tcm"):
    """Spawn one rank per SIP running ``body(torch, rank, out)`` inside a process group; returns (torch, out)."""
    torch = RuntimeContext(graph, data=True)
    out: dict = {}

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm", buffer_kind=kind)
        body(torch, rank, out)
        torch.distributed.destroy_process_group()

    torch.multiprocessing.spawn(worker, nprocs=graph.spec.system.sips.count)
    return torch, out


def check_broadcast_every_src(graph, kind, seed=1):
    world = graph.spec.system.sips.count
    xs = inputs(world, ROWS, seed)

    def body(torch, rank, out):
        for src in range(world):
            t = torch.from_numpy(xs[rank] if rank == src else np.zeros((ROWS, COLS), np.float16), ONE)
            torch.distributed.broadcast(t, src=src)
            out[(src, rank)] = torch.to_numpy(t)

    _, out = run(graph, body, kind)
    for (src, rank), got in out.items():
        assert got.tobytes() == xs[src].tobytes(), f"rank {rank} after broadcast from {src}"
    assert len(out) == world * world


def check_all_gather(graph, kind, seed=2):
    world = graph.spec.system.sips.count
    xs = inputs(world, ROWS, seed)

    def body(torch, rank, out):
        o = torch.empty((world * ROWS, COLS), "float16", ONE)
        torch.distributed.all_gather_into_tensor(o, torch.from_numpy(xs[rank], ONE))
        out[rank] = torch.to_numpy(o)

    _, out = run(graph, body, kind)
    want = np.concatenate(xs).tobytes()
    assert sorted(out) == list(range(world))
    for rank, got in out.items():
        assert got.tobytes() == want, f"rank {rank} after all_gather_into_tensor"


def check_reduce_scatter(graph, kind, seed=3):
    world = graph.spec.system.sips.count
    xs = inputs(world, world * ROWS, seed)

    def body(torch, rank, out):
        o = torch.empty((ROWS, COLS), "float16", ONE)
        torch.distributed.reduce_scatter_tensor(o, torch.from_numpy(xs[rank], ONE))
        out[rank] = torch.to_numpy(o)

    torch, out = run(graph, body, kind)
    from kernbench.ccl.neighbours import sip_grid, sip_strategy

    grid = sip_grid(graph.spec, world, sip_strategy(graph.spec.system.sips.topology))
    want = reduce_scatter_model(xs, grid, ROWS)
    total = sum(x.astype(np.float64) for x in xs)
    for rank, got in out.items():
        assert got.tobytes() == want[rank].tobytes(), f"rank {rank} after reduce_scatter_tensor"
        assert np.allclose(got, total[rank * ROWS:(rank + 1) * ROWS], atol=0.05)  # the model is a sum
    assert len(torch.distributed.collective_results["reduce_scatter"]) == world


CHECKS = {"broadcast": check_broadcast_every_src, "all_gather": check_all_gather,
          "reduce_scatter": check_reduce_scatter}


@pytest.mark.parametrize("collective", list(CHECKS))
@pytest.mark.parametrize("topo", ["topology", *SIX])
def test_exact_with_tcm_rings(load_graph, topo, collective):
    CHECKS[collective](load_graph(topo), "tcm")


@pytest.mark.parametrize("collective", list(CHECKS))
@pytest.mark.parametrize("kind", ["sram", "hbm"])
def test_exact_with_sram_and_hbm_rings_on_the_torus(load_graph, kind, collective):
    CHECKS[collective](load_graph("6sip_2x3_torus_2d"), kind)


@pytest.mark.slow
@pytest.mark.parametrize("collective", list(CHECKS))
@pytest.mark.parametrize("kind", ["sram", "hbm"])
@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_mesh_2d_no_wrap"])
def test_exact_with_every_buffer_kind(load_graph, topo, kind, collective):
    CHECKS[collective](load_graph(topo), kind, seed=11)


def test_the_reduce_scatter_model_pins_the_add_order():
    """With these values the grouping changes the float16 result, so the model checks the order, not only a sum:
    rank 0 of a ring of six receives 1 + 1 + 0 + 0 + 0 from the east as one partial, 2048 + 2 = 2050, while
    adding left to right rounds 2048 + 1 back to 2048 twice."""
    xs = [np.full((6, 1), v, np.float16) for v in (2048.0, 1.0, 1.0, 0.0, 0.0, 0.0)]
    assert float(reduce_scatter_model(xs, (1, 6), 1)[0][0, 0]) == 2050.0
    left_to_right = xs[0][:1]
    for x in xs[1:]:
        left_to_right = add16(left_to_right, x[:1])
    assert float(left_to_right[0, 0]) == 2048.0


# ---------------------------------------------------------------------------------------------- barrier
def busy(tl, t):
    tl.cycles(200000)


@pytest.mark.parametrize("topo", ["topology", "6sip_2x3_torus_2d", "6sip_2x3_ring_1d"])
def test_no_rank_leaves_the_barrier_before_the_last_one_arrives(load_graph, topo):
    """The last rank reaches the barrier late (its PE is still busy); every other rank's barrier ends after."""
    graph = load_graph(topo)
    world = graph.spec.system.sips.count
    late = world - 1

    def body(torch, rank, out):
        if rank == late:
            x = torch.empty((1, 1), "float16", ONE)
            out["busy"] = torch.launch("busy", busy, x)  # not waited for: the barrier queues behind it
        torch.distributed.barrier()

    torch, _ = run(graph, body)
    results = dict(torch.distributed.collective_results["barrier"])
    assert sorted(results) == list(range(world))
    starts = {r: min(rep.exec_start_ns for rep in res.reports.values()) for r, res in results.items()}
    ends = {r: max(rep.exec_start_ns + rep.exec_ns for rep in res.reports.values()) for r, res in results.items()}
    assert starts[late] == max(starts.values()) and starts[late] > 1000 + min(starts.values())
    assert all(end > starts[late] for end in ends.values()), (starts, ends)
    assert collective_span_ns(list(results.values())) > 0


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("call", ["broadcast", "all_gather_into_tensor", "reduce_scatter_tensor", "barrier"])
def test_a_collective_before_the_process_group_is_an_error(default_graph, call):
    torch = RuntimeContext(default_graph)
    t = torch.empty((2, 8), "float16", ONE)
    args = {"broadcast": (t,), "barrier": ()}.get(call, (t, t))
    with pytest.raises(NotInitializedError, match=rf"torch\.distributed\.{call}: the default process group has "
                                                  r"not been initialized"):
        getattr(torch.distributed, call)(*args)


def spawn_error(graph, body):
    with pytest.raises(CollectiveError) as exc:
        run(graph, body)
    assert "\n" not in str(exc.value).split("raised by rank")[0].strip()
    return str(exc.value)


def test_broadcast_sizes_that_differ_across_ranks_name_the_rank_and_sizes(default_graph):
    def body(torch, rank, out):
        torch.distributed.broadcast(torch.empty((2 + 2 * rank, 8), "float16", ONE), src=0)

    msg = spawn_error(default_graph, body)
    assert "broadcast #1: rank 1 passes a float16[4, 8] tensor from src 0 but rank 0 passed a float16[2, 8] " \
           "tensor from src 0; every rank must pass the same sizes" in msg


def test_all_gather_output_of_the_wrong_size_names_the_rank_and_sizes(default_graph):
    def body(torch, rank, out):
        torch.distributed.all_gather_into_tensor(torch.empty((3, 8), "float16", ONE),
                                                 torch.empty((2, 8), "float16", ONE))

    msg = spawn_error(default_graph, body)
    assert "all_gather_into_tensor: rank 0 passes output float16[3, 8] and input float16[2, 8]; output must be " \
           "float16[4, 8] (world size 2 x the input's rows)" in msg


def test_reduce_scatter_inputs_that_differ_across_ranks_name_the_rank_and_sizes(default_graph):
    def body(torch, rank, out):
        rows = 1 + rank
        torch.distributed.reduce_scatter_tensor(torch.empty((rows, 8), "float16", ONE),
                                                torch.empty((2 * rows, 8), "float16", ONE))

    msg = spawn_error(default_graph, body)
    assert "reduce_scatter_tensor #1: rank 1 passes an output of float16[2, 8] but rank 0 passed an output of " \
           "float16[1, 8]; every rank must pass the same sizes" in msg


def test_a_bad_src_and_a_multi_cube_tensor_are_errors(default_graph):
    def bad_src(torch, rank, out):
        torch.distributed.broadcast(torch.empty((2, 8), "float16", ONE), src=2)

    assert "broadcast: rank 0 passes src=2; src must be a rank 0..1" in spawn_error(default_graph, bad_src)

    def rows(torch, rank, out):
        torch.distributed.broadcast(torch.empty((16, 8), "float16", DPPolicy(cube="row_wise", num_pes=1)))

    assert "broadcast: rank 0: tensor must be 2-D with one shard on PE 0 of one cube" in spawn_error(default_graph,
                                                                                                      rows)


def test_different_collectives_at_the_same_call_are_an_error(default_graph):
    def body(torch, rank, out):
        t = torch.empty((2, 8), "float16", ONE)
        if rank == 0:
            torch.distributed.broadcast(t)
        else:
            torch.distributed.barrier()

    msg = spawn_error(default_graph, body)
    assert "collective #1: rank 1 calls barrier but rank 0 called broadcast" in msg


# ---------------------------------------------------------------------------------------------- ccl.yaml
def write(tmp_path, text: str) -> str:
    path = tmp_path / "ccl.yaml"
    path.write_text(text)
    return str(path)


ALGOS = ("algorithms:\n"
         "  lrab: {module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce}\n"
         "  bc: {module: kernbench.ccl.algorithms.grid_broadcast}\n"
         "  ag: {module: kernbench.ccl.algorithms.grid_all_gather}\n")


def test_each_collective_runs_the_algorithm_ccl_yaml_names(default_graph, tmp_path):
    torch = RuntimeContext(default_graph)
    d = torch.distributed
    d.init_process_group(config=write(tmp_path, "collectives:\n  all_reduce: {algorithm: lrab}\n"
                                                "  broadcast: {algorithm: bc}\n" + ALGOS))
    algos = {c: cfg.name for c, (cfg, _) in d._group.algorithms.items()}
    assert algos == {"all_reduce": "lrab", "broadcast": "bc", "all_gather": "grid_all_gather",
                     "reduce_scatter": "grid_reduce_scatter", "all_to_all": "grid_all_to_all_pairwise",
                     "barrier": "grid_barrier"}  # the rest: packaged
    d.destroy_process_group()


def test_an_algorithm_of_another_collective_is_refused(default_graph, tmp_path):
    torch = RuntimeContext(default_graph)
    with pytest.raises(CclConfigError, match="algorithm 'ag' runs all_gather, not broadcast"):
        torch.distributed.init_process_group(config=write(tmp_path, "collectives:\n  all_reduce: {algorithm: lrab}\n"
                                                                    "  broadcast: {algorithm: ag}\n" + ALGOS))
    assert not torch.distributed.is_initialized()


def test_one_group_has_one_buffer_kind(default_graph, tmp_path):
    torch = RuntimeContext(default_graph)
    text = ("collectives:\n  all_reduce: {algorithm: lrab, buffer_kind: sram}\n"
            "  broadcast: {algorithm: bc, buffer_kind: hbm}\n" + ALGOS)
    with pytest.raises(CclConfigError, match="broadcast asks for buffer_kind hbm but the group's rings "
                                             r"\(all_reduce's\) are in sram"):
        torch.distributed.init_process_group(config=write(tmp_path, text))
    torch.distributed.init_process_group(config=write(tmp_path, text), buffer_kind="hbm")  # forced: one kind
    assert torch.distributed._group.buffer_kind == "hbm"
