"""All-gather over the SIP grid: stream the blocks along each row, then each row's blocks along the columns.

Runs on PE 0 of the cube holding each rank's input ``t`` (``R x C``) and
output ``out`` (``world_size * R x C``); block ``r`` of ``out`` (rows
``r*R .. (r+1)*R``) ends up holding rank ``r``'s input, on every rank.

1. **Rows.** Along each row of the SIP grid every rank streams its block
   both ways, forwarding what arrived the step before
   (:func:`kernbench.ccl.lines.gather_line`): around a wrapped row, east for
   ``w // 2`` steps and west for ``(w - 1) // 2``; along an open row to both
   ends. Each block received is stored into ``out`` and kept in the TCM.
2. **Columns.** For each column ``c`` of the row, the same stream along the
   rank's column of the grid carries block ``(row, c)``, so every rank
   receives every block of every other row.

Every message is one input block, so a block must fit one IPCQ slot; the
output is written block by block and never held whole in the TCM.
"""

from __future__ import annotations

from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec
from kernbench.ccl.lines import gather_line
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("all_gather",)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    rows, cols = call.sip_grid
    return LaunchSpec(grid_all_gather, tensor="t", kwargs={
        "sip_rank": call.rank, "wrap_rows": call.sip_topology.wrap_rows, "wrap_cols": call.sip_topology.wrap_cols,
        "sip_topo_w": cols, "sip_topo_h": rows})


def grid_all_gather(tl, t, out, sip_rank: int, wrap_rows: bool, wrap_cols: bool, sip_topo_w: int,
                    sip_topo_h: int) -> None:
    """Gather every rank's ``t`` into ``out`` (rank order along the rows) on every rank."""
    w, h = sip_topo_w, sip_topo_h
    row, col = divmod(sip_rank, w)
    rows_per = t.shape[0]
    whole = tl.ref(out)

    def put(rank: int, buf) -> None:
        tl.store(whole[rank * rows_per:(rank + 1) * rows_per, :], buf)

    own = tl.load(t)
    put(sip_rank, own)
    kept = {col: own}  # the blocks of this rank's row, by column

    def keep(src: int, buf) -> None:
        kept[src] = buf
        put(row * w + src, buf)

    gather_line(tl, own, col, w, wrap_rows, "global_E", "global_W", lambda src, side: None, keep)
    if h > 1:
        bufs = {"w": tl.zeros(own.shape, own.dtype), "e": tl.zeros(own.shape, own.dtype)}
        for c in range(w):
            gather_line(tl, kept[c], row, h, wrap_cols, "global_S", "global_N", lambda src, side: bufs[side],
                        lambda src, buf, c=c: put(src * w + c, buf))


kernel = grid_all_gather
