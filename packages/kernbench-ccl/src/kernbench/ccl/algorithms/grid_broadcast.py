"""Broadcast over the SIP grid: down the source's column, then along every row.

Runs on PE 0 of the cube holding each rank's tensor ``t`` (one 2-D shard).
Rank ``src`` loads its tensor and sends it along its column of the SIP grid
(``global_S``/``global_N``); every rank of that column then sends it along
its row (``global_E``/``global_W``), and each receiver stores it. Where the
SIP topology strategy wraps an axis around, the source of that line sends
both ways round it, so no message travels more than half of it
(:func:`kernbench.ccl.lines.broadcast_line`). The message is the whole
tensor, so it must fit one IPCQ slot.

Module contract (:mod:`kernbench.ccl.launch_spec`): ``launch_spec(call)`` and
``supports_sip_topology(strategy)``; ``call.src`` is the source rank.
"""

from __future__ import annotations

from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec
from kernbench.ccl.lines import broadcast_line
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("broadcast",)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy: lines along rows and columns, wrapping where the strategy says."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    rows, cols = call.sip_grid
    return LaunchSpec(grid_broadcast, tensor="t", kwargs={
        "src": call.src, "sip_rank": call.rank, "wrap_rows": call.sip_topology.wrap_rows,
        "wrap_cols": call.sip_topology.wrap_cols, "sip_topo_w": cols, "sip_topo_h": rows})


def grid_broadcast(tl, t, src: int, sip_rank: int, wrap_rows: bool, wrap_cols: bool, sip_topo_w: int,
                   sip_topo_h: int) -> None:
    """Copy rank ``src``'s ``t`` into ``t`` of every rank of a ``sip_topo_h x sip_topo_w`` grid."""
    row, col = divmod(sip_rank, sip_topo_w)
    srow, scol = divmod(src, sip_topo_w)
    buf = tl.load(t) if sip_rank == src else None
    if col == scol:
        buf = broadcast_line(tl, buf, row, sip_topo_h, srow, wrap_cols, "global_S", "global_N", t.shape, t.dtype)
    buf = broadcast_line(tl, buf, col, sip_topo_w, scol, wrap_rows, "global_E", "global_W", t.shape, t.dtype)
    if sip_rank != src:
        tl.store(t, buf)


kernel = grid_broadcast
