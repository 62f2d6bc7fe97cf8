"""Barrier over the SIP grid: a one-value token reduced to rank 0 and broadcast back.

Runs on PE 0 of cube 0 of every rank, on a ``1 x 1`` float16 token the
backend allocates. Every row sends its token to column 0, column 0 to rank
0 (:func:`kernbench.ccl.lines.reduce_line`), then rank 0 sends it back down
column 0 and along every row. No rank's kernel ends before rank 0 has heard
from every rank, and rank 0 hears from a rank only once that rank's barrier
kernel has started, so every rank waits for the last one to arrive.
"""

from __future__ import annotations

from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec
from kernbench.ccl.lines import broadcast_line, reduce_line
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("barrier",)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy (it needs no wrap-around)."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    rows, cols = call.sip_grid
    return LaunchSpec(grid_barrier, tensor="t", kwargs={"sip_rank": call.rank, "sip_topo_w": cols,
                                                        "sip_topo_h": rows})


def grid_barrier(tl, t, sip_rank: int, sip_topo_w: int, sip_topo_h: int) -> None:
    """Return on no rank before every rank of the ``sip_topo_h x sip_topo_w`` grid has started."""
    row, col = divmod(sip_rank, sip_topo_w)
    token = tl.load(t)
    buf = tl.zeros(token.shape, token.dtype)
    reduce_line(tl, token, buf, col, sip_topo_w, 0, "global_E", "global_W")
    if col == 0:
        reduce_line(tl, token, buf, row, sip_topo_h, 0, "global_S", "global_N")
        broadcast_line(tl, token, row, sip_topo_h, 0, False, "global_S", "global_N")
    broadcast_line(tl, token, col, sip_topo_w, 0, False, "global_E", "global_W")


kernel = grid_barrier
