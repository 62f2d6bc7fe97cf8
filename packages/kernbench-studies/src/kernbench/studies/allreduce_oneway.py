"""The all-reduce study's schedule ablation: the hierarchical all-reduce with a one-way exchange between SIPs.

The same kernel as :mod:`kernbench.ccl.algorithms.lrab_hierarchical_allreduce`
inside each SIP (reduce the cube mesh to its root cube, broadcast back), but
the root cubes exchange their sums one way along each line of the SIP grid
instead of streaming both ways:

* around a line that wraps (a ring, a torus row or column) every rank passes
  a vector east and takes one from the west, ``n − 1`` times, adding each,
  as a textbook ring all-reduce does;
* along a line without wrap-around the sums are reduced towards the east end
  (``n − 1`` steps of a message and an accumulate) and the total is sent back
  west (``n − 1`` message-only steps).

So the exchange takes 3 serial steps on the 2×3 torus (2 along a row, 1
along a column), 5 on the 6-SIP ring and 6 on the 2×3 mesh (4 + 2), against
2, 3 and 3 for the shipped schedule. The study runs it to show that the
order of ring and mesh follows the number of serial exchange steps and what
each step carries; it is not an algorithm KernBench ships, so it is
registered for the study's own runs only (:data:`CCL_YAML`).

Module contract: :mod:`kernbench.ccl.launch_spec`.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.lrab_hierarchical_allreduce import WRAP_COLS, WRAP_ROWS, sip_wrap
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec
from kernbench.ccl.lines import accumulate, broadcast_line, reduce_line, unfold_line
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("all_reduce",)
#: The algorithm's name in :data:`CCL_YAML`.
NAME = "one_way_hierarchical_allreduce"
#: The collective configuration the study's schedule points initialise their process group with.
CCL_YAML = f"""collectives:
  all_reduce:
    algorithm: {NAME}
algorithms:
  {NAME}:
    module: {__name__}
"""


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy, as the shipped all-reduce."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    """The one-way all-reduce kernel with its arguments, by name, for one rank."""
    rows, cols = call.sip_grid
    return LaunchSpec(one_way_hierarchical_allreduce, tensor="t", kwargs={
        "n_elem": call.n_elem, "cube_w": call.cube_w, "cube_h": call.cube_h, "n_sips": call.world_size,
        "sip_rank": call.rank, "sip_wrap": sip_wrap(call.sip_topology), "sip_topo_w": cols, "sip_topo_h": rows})


def _one_way(tl, acc, own, buf, pos: int, n: int, wrap: bool, east: str, west: str) -> None:
    """Add every other rank's ``acc`` of a line or ring of ``n`` ranks into this rank's ``acc``, one way."""
    if n == 1:
        return
    if wrap:
        tl.copy_to(own, acc)
        fwd = own
        for _ in range(n - 1):
            tl.send(east, fwd)  # a send snapshots its source, so ``buf`` may be received into right after
            fwd = tl.recv(west, out=buf)
            accumulate(tl, acc, buf)
    else:
        reduce_line(tl, acc, buf, pos, n, n - 1, east, west)
        broadcast_line(tl, acc, pos, n, n - 1, False, east, west)


def one_way_hierarchical_allreduce(tl, t, n_elem: int, cube_w: int, cube_h: int, n_sips: int, sip_rank: int,
                                   sip_wrap: int, sip_topo_w: int, sip_topo_h: int) -> None:
    """All-reduce (sum) of this PE's shard ``t`` with every other shard of every rank; the SIPs exchange one way
    (module docstring)."""
    cube = tl.program_id(axis=1)
    cx, cy = cube % cube_w, cube // cube_w
    rx, ry = (cube_w - 1) // 2, (cube_h - 1) // 2
    acc = tl.load(t)
    buf = tl.zeros(acc.shape, acc.dtype)
    reduce_line(tl, acc, buf, cx, cube_w, rx, "E", "W")
    if cx == rx:
        reduce_line(tl, acc, buf, cy, cube_h, ry, "S", "N")
    if (cx, cy) == (rx, ry) and n_sips > 1:
        own, recv, _ = (tl.zeros(acc.shape, acc.dtype) for _ in range(3))  # as many buffers as the shipped kernel
        row, col = divmod(sip_rank, sip_topo_w)
        _one_way(tl, acc, own, recv, col, sip_topo_w, bool(sip_wrap & WRAP_ROWS), "global_E", "global_W")
        _one_way(tl, acc, own, recv, row, sip_topo_h, bool(sip_wrap & WRAP_COLS), "global_S", "global_N")
    if cx == rx:
        unfold_line(tl, acc, cy, cube_h, ry, "S", "N")
    unfold_line(tl, acc, cx, cube_w, rx, "E", "W")
    tl.store(t, acc)


kernel = one_way_hierarchical_allreduce
