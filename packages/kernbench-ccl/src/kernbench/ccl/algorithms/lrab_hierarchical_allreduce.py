"""Hierarchical all-reduce: reduce to the centre of each SIP's cube mesh, exchange between SIPs, broadcast back.

Runs on PE 0 of every cube holding a shard (``n_elem`` values each); every
shard ends up holding the elementwise sum of all shards of all ranks.

1. **Row phase.** In each row of the ``cube_w x cube_h`` mesh the cubes left
   of the root column pass their partial sum east and those right of it
   west, each adding what arrives from further out first; the two halves
   run at the same time and meet in the root column (``(cube_w - 1) // 2``).
2. **Column phase.** The root column does the same towards the root row
   (``(cube_h - 1) // 2``), leaving the SIP's sum in the root cube.
3. **Inter-SIP exchange** (root cube, ``n_sips > 1``), over the ``global_*``
   directions of the SIP topology. Along a ring of ``n`` ranks each rank
   streams its vector both ways: east for ``ceil((n-1)/2)`` steps and west
   for ``floor((n-1)/2)``, forwarding what it received the step before, so
   every rank receives every other rank's vector exactly once. A line
   without wrap-around streams east and west for up to ``n - 1`` steps, each
   rank forwarding only what still has a rank to reach. The exchange runs
   along the rows of the SIP topology's grid and then along its columns (on
   the row sums), each wrapping around when the strategy says so: a ring is
   one row of all ranks, a torus wraps both ways, a mesh neither.
4. **Broadcast.** The root cube sends the total back along the column, then
   every root-column cube along its row, each forwarding outwards.

A mesh of one cube skips phases 1, 2 and 4. Sends never block here (each
direction carries at most one message per step and its receiver consumes it
within the step), so the order "send, then receive" cannot deadlock.

Module contract (``kernbench.ccl``'s backend, :mod:`kernbench.ccl.launch_spec`):
``launch_spec(call) -> LaunchSpec`` and ``supports_sip_topology(strategy)``.
"""

from __future__ import annotations

from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec
from kernbench.ccl.lines import accumulate, reduce_line, unfold_line
from kernbench.topology.sip_topologies import SipTopology

#: the kernel's ``sip_wrap`` scalar: bit 0 set when E/W wrap around along a row of the SIP grid, bit 1 when N/S
#: wrap along a column (derived from the SIP topology strategy by :func:`sip_wrap`)
WRAP_ROWS = 1
WRAP_COLS = 2
COLLECTIVES = ("all_reduce",)


def sip_wrap(topology: SipTopology) -> int:
    """The kernel's integer for a SIP topology strategy: its wrap-around, as bits."""
    return (WRAP_ROWS if topology.wrap_rows else 0) | (WRAP_COLS if topology.wrap_cols else 0)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy: the exchange only needs the grid and whether each axis wraps around."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    """The all-reduce kernel with its arguments, by name, for one rank."""
    rows, cols = call.sip_grid
    return LaunchSpec(lrab_hierarchical_allreduce, tensor="t", kwargs={
        "n_elem": call.n_elem, "cube_w": call.cube_w, "cube_h": call.cube_h, "n_sips": call.world_size,
        "sip_rank": call.rank, "sip_wrap": sip_wrap(call.sip_topology), "sip_topo_w": cols, "sip_topo_h": rows})


def _exchange(tl, acc, bufs, pos: int, n: int, wrap: bool, east: str, west: str) -> None:
    """Add every other rank's ``acc`` of a line or ring of ``n`` ranks into this rank's ``acc``."""
    if n == 1:
        return
    own, from_w, from_e = bufs
    tl.copy_to(own, acc)
    if wrap:
        steps_e, steps_w = n // 2, (n - 1) // 2  # ceil((n-1)/2) ranks reached eastwards, floor((n-1)/2) westwards
    else:
        steps_e = steps_w = n - 1
    fwd_e = fwd_w = own
    for s in range(1, max(steps_e, steps_w) + 1):
        # At step s the east-going stream carries the vector of the rank s-1 places west of the sender.
        send_e = s <= steps_e and (wrap or (pos - s + 1 >= 0 and pos < n - 1))
        recv_w = s <= steps_e and (wrap or pos - s >= 0)
        send_w = s <= steps_w and (wrap or (pos + s - 1 <= n - 1 and pos > 0))
        recv_e = s <= steps_w and (wrap or pos + s <= n - 1)
        if send_e:  # sends snapshot their source, so the buffers are free again right after
            tl.send(east, fwd_e)
        if send_w:
            tl.send(west, fwd_w)
        if recv_w:
            fwd_e = tl.recv(west, out=from_w)
            accumulate(tl, acc, from_w)
        if recv_e:
            fwd_w = tl.recv(east, out=from_e)
            accumulate(tl, acc, from_e)


def lrab_hierarchical_allreduce(tl, t, n_elem: int, cube_w: int, cube_h: int, n_sips: int, sip_rank: int,
                                sip_wrap: int, sip_topo_w: int, sip_topo_h: int) -> None:
    """All-reduce (sum) of this PE's shard ``t`` of ``n_elem`` values with every other shard of every rank,
    ``n_sips`` ranks on a ``sip_topo_h x sip_topo_w`` grid whose wrap-around ``sip_wrap`` encodes
    (:data:`WRAP_ROWS`, :data:`WRAP_COLS`)."""
    if sip_wrap not in range(4) or isinstance(sip_wrap, bool):
        raise ValueError(f"sip_wrap must be 0..3 (bit 0: rows wrap, bit 1: columns wrap), got {sip_wrap!r}; "
                         f"derive it with sip_wrap(strategy)")
    cube = tl.program_id(axis=1)
    cx, cy = cube % cube_w, cube // cube_w
    rx, ry = (cube_w - 1) // 2, (cube_h - 1) // 2
    acc = tl.load(t)
    buf = tl.zeros(acc.shape, acc.dtype)
    reduce_line(tl, acc, buf, cx, cube_w, rx, "E", "W")
    if cx == rx:
        reduce_line(tl, acc, buf, cy, cube_h, ry, "S", "N")
    if (cx, cy) == (rx, ry) and n_sips > 1:
        bufs = [tl.zeros(acc.shape, acc.dtype) for _ in range(3)]
        row, col = divmod(sip_rank, sip_topo_w)
        _exchange(tl, acc, bufs, col, sip_topo_w, bool(sip_wrap & WRAP_ROWS), "global_E", "global_W")
        _exchange(tl, acc, bufs, row, sip_topo_h, bool(sip_wrap & WRAP_COLS), "global_S", "global_N")
    if cx == rx:
        unfold_line(tl, acc, cy, cube_h, ry, "S", "N")
    unfold_line(tl, acc, cx, cube_w, rx, "E", "W")
    tl.store(t, acc)


kernel = lrab_hierarchical_allreduce
