"""The all-reduce's reduction order and roots, bit for bit, against an independent numpy model of the same tree.

``test_allreduce.py`` uses small integers, whose float16 sums are exact in
any order, so it cannot see the order in which partials are added nor which
cube roots the reduction. Here the inputs are random float16 values of mixed
magnitudes (sign * 2**U(-8, 6), random mantissa), so float16 rounding makes
different addition orders give different bits, and every shard of every rank
is compared with ``np.array_equal`` against a numpy model of the tree that
``docs/collectives.md`` ("The default all-reduce") and the algorithm's module
docstring describe:

* **Dtype.** Every addition rounds: the math engine adds float16 operands in
  float32 and rounds the sum to float16 (``kernbench.tl.elementwise``), so
  the model's ``_add`` is ``f16(f32(a) + f32(b))`` after every single add; a
  float32 tensor adds in float32.
* **Mesh of one SIP** (``w x h`` cubes, row ``i`` of the tensor on cube ``i``
  at column ``i % w``, row ``i // w``; root column ``(w - 1) // 2``, root row
  ``(h - 1) // 2``). In each row the cubes left of the root column form a
  chain from the west edge: ``L = x0``, then ``L = x1 + L``, ... up to the
  cube next to the root; the cubes right of it a chain from the east edge
  ``R = x[w-1]``, ``R = x[w-2] + R``, ... The root cube adds the west chain
  to its own value first and then the east chain: ``(x_root + L) + R``. The
  root column then reduces its row sums the same way (north chain first,
  then the south chain), leaving the SIP's sum in the root cube (cube 5 of a
  4 x 4 mesh: ``((r1 + r0) + (r2 + r3))`` over rows, each row
  ``((x1 + x0) + (x2 + x3))``).
* **Between SIPs** (root cubes only). There is no global root: every rank
  adds the other ranks' SIP sums into its own in its own order, so ranks can
  end with different bits. Along a line or ring of ``n`` ranks, rank ``p``
  starts from its own vector and at step ``s = 1, 2, ...`` first adds the
  vector arriving from the west (rank ``p - s``), then the one from the east
  (rank ``p + s``); on a ring (indices mod ``n``) the west stream runs for
  ``n // 2`` steps and the east stream for ``(n - 1) // 2``; on a line
  without wrap-around a stream stops at the line's end. ``ring_1d`` is one
  ring of all ranks; ``torus_2d`` (wrap) and ``mesh_2d_no_wrap`` (no wrap)
  exchange along each row of the SIP grid, then along each column on the row
  results (each rank forwarding its own row result). The within-step order
  (west before east) is not stated in the docs; it is the module's.
* **Broadcast.** The root cube's total is copied, unchanged, to every cube
  of its SIP; a one-cube tensor skips the mesh phases and the broadcast.

Each case also checks that the model is sensitive: for the chosen inputs a
flat left-to-right sum, the same tree with the mesh root moved to cube
``(w // 2, h // 2)``, mesh chains run from the root outwards, east-before-
west exchange steps and a single global root (every rank holding rank 0's
result) each give different bits wherever they are a different order at all,
so a change of order or root in the algorithm would fail the test. On a
4 x 4 mesh every chain has at most two cubes (one commutative add), so the
chain direction is checked on 8 x 4 and 4 x 8 meshes; with at most two
ranks per line (the default topology, the 2-row SIP grid) the exchange's
west/east order is likewise a single commutative add.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401  (adds torch.distributed / torch.multiprocessing)
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict

SHARDS = DPPolicy(cube="row_wise", num_pes=1)  # row i on PE 0 of cube i
ONE_CUBE = DPPolicy(num_cubes=1, num_pes=1)
N_ELEM = 256


def _add(acc: np.ndarray, other: np.ndarray) -> np.ndarray:
    """One math-engine add: float16 operands are added in float32 and the sum rounded to float16."""
    if acc.dtype == np.float16:
        return (acc.astype(np.float32) + other.astype(np.float32)).astype(np.float16)
    return acc + other


def _chain(vals: list[np.ndarray]) -> np.ndarray:
    """A chain of cubes passing a running sum along ``vals``: each adds what arrives to its own value."""
    acc = vals[0]
    for v in vals[1:]:
        acc = _add(v, acc)
    return acc


def _reduce_line(vals: list[np.ndarray], root: int, outward: bool = False) -> np.ndarray:
    """A line of partials reduced into position ``root``: the chain from the low end, then from the high end.

    ``outward`` (a variant for the sensitivity checks) runs each chain from the root's neighbour to the end."""
    low, high = vals[:root], vals[root + 1:][::-1]
    if outward:
        low, high = low[::-1], high[::-1]
    acc = vals[root]
    for side in (low, high):
        if side:
            acc = _add(acc, _chain(side))
    return acc


def _sip_sum(shards: np.ndarray, w: int, h: int, root: tuple[int, int], outward: bool = False) -> np.ndarray:
    """One SIP's sum in its root cube: each row into the root column, then the root column into the root row."""
    rx, ry = root
    rows = [_reduce_line([shards[y * w + x] for x in range(w)], rx, outward) for y in range(h)]
    return _reduce_line(rows, ry, outward)


def _exchange(vecs: list[np.ndarray], wrap: bool, east_first: bool = False) -> list[np.ndarray]:
    """Every position's sum of a line (or ring, ``wrap``) of vectors, each adding the others in its own order."""
    n = len(vecs)
    if n == 1:
        return list(vecs)
    steps_w, steps_e = (n // 2, (n - 1) // 2) if wrap else (n - 1, n - 1)  # streams from the west / east
    out = []
    for p in range(n):
        acc = vecs[p]
        for s in range(1, max(steps_w, steps_e) + 1):
            arrivals = []
            if s <= steps_w and (wrap or p - s >= 0):
                arrivals.append(vecs[(p - s) % n])
            if s <= steps_e and (wrap or p + s <= n - 1):
                arrivals.append(vecs[(p + s) % n])
            for v in (reversed(arrivals) if east_first else arrivals):
                acc = _add(acc, v)
        out.append(acc)
    return out


@dataclass(frozen=True)
class Geometry:
    """What the model needs of a topology: cube mesh, SIP topology and grid (rows x cols of ranks)."""

    w: int
    h: int
    sip_topology: str
    grid: tuple[int, int]

    @classmethod
    def of(cls, spec) -> Geometry:
        world = spec.system.sips.count
        grid = (1, world) if spec.system.sips.topology == "ring_1d" else tuple(spec.system.sips.grid)
        return cls(spec.sip.cube_mesh.w, spec.sip.cube_mesh.h, spec.system.sips.topology, grid)


def model(inputs: list[np.ndarray], geo: Geometry, *, root: tuple[int, int] | None = None,
          east_first: bool = False, outward: bool = False) -> list[np.ndarray]:
    """Each rank's result (shards x values) of the hierarchical all-reduce of ``inputs[rank]`` (shards x values).

    ``root``, ``east_first`` and ``outward`` select a variant of the tree (for the sensitivity checks); the
    defaults are the documented algorithm.
    """
    n_shards = inputs[0].shape[0]
    if n_shards == 1:
        sums = [x[0] for x in inputs]
    else:
        root = root or ((geo.w - 1) // 2, (geo.h - 1) // 2)
        sums = [_sip_sum(x, geo.w, geo.h, root, outward) for x in inputs]
    rows, cols = geo.grid
    if geo.sip_topology == "ring_1d":
        totals = _exchange(sums, True, east_first)
    else:
        wrap = geo.sip_topology == "torus_2d"
        totals = list(sums)
        for r in range(rows):  # along each row of the SIP grid
            totals[r * cols:(r + 1) * cols] = _exchange(totals[r * cols:(r + 1) * cols], wrap, east_first)
        for c in range(cols):  # then along each column, on the row results
            col = _exchange(totals[c::cols], wrap, east_first)
            for r in range(rows):
                totals[r * cols + c] = col[r]
    return [np.broadcast_to(t, (n_shards, t.size)).copy() for t in totals]


def flat_sum(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """A flat left-to-right sum over ranks, then shards, held by every shard of every rank."""
    rows = [row for x in inputs for row in x]
    acc = rows[0]
    for row in rows[1:]:
        acc = _add(acc, row)
    return [np.broadcast_to(acc, x.shape).copy() for x in inputs]


def order_sensitive_values(rng: np.random.Generator, shape: tuple[int, int], dtype: str) -> np.ndarray:
    """Values of mixed magnitudes, ``sign * 2**U(-8, 6)``, so that rounding after each add depends on the order."""
    mag = np.exp2(rng.uniform(-8.0, 6.0, shape)) * rng.choice([-1.0, 1.0], shape)
    return mag.astype(dtype)


def run_allreduce(graph, inputs: list[np.ndarray], policy: DPPolicy, buffer_kind: str) -> dict[int, np.ndarray]:
    """The real all-reduce in data mode, one spawned rank per SIP; each rank's tensor read back with ``peek``."""
    torch = RuntimeContext(graph, data=True)
    out: dict[int, np.ndarray] = {}

    def worker(rank: int) -> None:
        torch.distributed.init_process_group(backend="ahbm", buffer_kind=buffer_kind)
        t = torch.from_numpy(inputs[rank], policy)
        assert [s.cube for s, _ in t.shards] == list(range(inputs[rank].shape[0])), "row i must sit on cube i"
        torch.distributed.all_reduce(t)
        out[rank] = torch.peek(t)
        torch.distributed.destroy_process_group()

    torch.multiprocessing.spawn(worker, nprocs=len(inputs))
    return out


def _differs(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def check_case(graph, *, policy: DPPolicy = SHARDS, buffer_kind: str = "tcm", dtype: str = "float16",
               seed: int = 0) -> None:
    """Run one all-reduce and compare every rank's result bit for bit with the model; check the model's
    sensitivity to the order and the root on the same inputs."""
    spec = graph.spec
    geo = Geometry.of(spec)
    world = spec.system.sips.count
    n_shards = spec.cubes_per_sip if policy is SHARDS else 1
    rng = np.random.default_rng(seed)
    inputs = [order_sensitive_values(rng, (n_shards, N_ELEM), dtype) for _ in range(world)]
    want = model(inputs, geo)

    # Sensitivity: every plausible other order or root that is a different order gives different bits here.
    assert _differs(want, flat_sum(inputs)), "a flat left-to-right sum gives the same bits: inputs too tame"
    if n_shards > 1:
        moved = (geo.w // 2, geo.h // 2)
        assert moved != ((geo.w - 1) // 2, (geo.h - 1) // 2)
        assert _differs(want, model(inputs, geo, root=moved)), "moving the mesh root does not change the bits"
    if max(geo.w, geo.h) >= 6:  # a chain of at least three cubes: its direction is an order
        assert _differs(want, model(inputs, geo, outward=True)), "reversing the mesh chains gives the same bits"
    if max(geo.grid) > 2:  # with at most two ranks per line the east/west order is a commutative single add
        assert _differs(want, model(inputs, geo, east_first=True)), "east-before-west gives the same bits"
        assert _differs(want, [want[0]] * world), "every rank holds the same bits: no per-rank order to check"

    got = run_allreduce(graph, inputs, policy, buffer_kind)
    assert sorted(got) == list(range(world))
    for rank in range(world):
        assert got[rank].dtype == np.dtype(dtype)
        if not np.array_equal(got[rank], want[rank]):
            bad = np.argwhere(got[rank] != want[rank])
            shard, i = bad[0]
            pytest.fail(f"rank {rank}: {len(bad)} value(s) differ from the model of the tree, first at shard "
                        f"{shard} element {i}: simulated {got[rank][shard, i]!r}, model {want[rank][shard, i]!r}")


@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
def test_default_topology_matches_the_tree_bit_for_bit(load_graph, kind):
    """2 SIPs (ring of two) of 4 x 4 cubes: mesh reduction into cube 5, one exchange step, broadcast; per kind."""
    check_case(load_graph("topology"), buffer_kind=kind)


def test_default_topology_float32_matches_the_tree_bit_for_bit(load_graph):
    """The same tree on a float32 tensor (adds in float32, no float16 rounding)."""
    check_case(load_graph("topology"), dtype="float32", seed=1)


@pytest.mark.parametrize("mesh", [(8, 4), (4, 8)])
def test_long_mesh_chains_match_the_tree_bit_for_bit(mesh):
    """2 SIPs of an 8 x 4 and a 4 x 8 cube mesh (32 cubes, the address layout's limit): chains of three and four
    cubes, whose direction (from the edge towards the root) is an order a 4 x 4 mesh cannot show."""
    w, h = mesh
    check_case(compile_spec(spec_from_dict({"sip": {"cube_mesh": {"w": w, "h": h}}})), seed=5)


@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"])
def test_one_cube_tensor_on_6_sips_follows_the_exchange_order(load_graph, topo):
    """A one-cube tensor skips the mesh: the result is the inter-SIP exchange's own order, per rank."""
    check_case(load_graph(topo), policy=ONE_CUBE, seed=2)


@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"])
def test_6_sips_match_the_tree_bit_for_bit(load_graph, topo):
    """Six SIPs of 4 x 4 cubes: the full tree (mesh, exchange along the SIP topology, broadcast)."""
    check_case(load_graph(topo), seed=3)


@pytest.mark.parametrize("kind", ["sram", "hbm"])
@pytest.mark.parametrize("topo", ["6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap"])
def test_6_sips_match_the_tree_with_every_buffer_kind(load_graph, topo, kind):
    """The 6-SIP trees with rings in SRAM and HBM: the buffer kind changes timing, never the order."""
    check_case(load_graph(topo), buffer_kind=kind, seed=4)
