"""Reduce-scatter over the SIP grid: reduce along the columns, then along the rows, one block at a time.

Runs on PE 0 of the cube holding each rank's input ``t`` (``world_size * R x
C``) and output ``out`` (``R x C``). Afterwards rank ``r``'s ``out`` holds
the sum over all ranks of block ``r`` of their inputs (rows ``r*R ..
(r+1)*R``).

1. **Columns.** For every block ``(tr, c)`` (rank ``tr * w + c`` of the
   grid), the ranks of each column sum their copies into the rank in row
   ``tr`` (:func:`kernbench.ccl.lines.reduce_line`: both sides towards the
   root at once). Each rank keeps the ``w`` partial sums of its own row.
2. **Rows.** For every column ``tc``, the ranks of each row sum their
   partial of block ``(row, tc)`` into the rank in column ``tc``.

The lines never wrap around (a wrapped axis is used as an open line), and
every message is one block, which must fit one IPCQ slot. Sums are
float32 adds rounded to the dtype, in the order: west side, then east side,
at every hop.
"""

from __future__ import annotations

from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec
from kernbench.ccl.lines import reduce_line
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("reduce_scatter",)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy (it needs no wrap-around)."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    rows, cols = call.sip_grid
    return LaunchSpec(grid_reduce_scatter, tensor="t", kwargs={
        "sip_rank": call.rank, "sip_topo_w": cols, "sip_topo_h": rows})


def grid_reduce_scatter(tl, t, out, sip_rank: int, sip_topo_w: int, sip_topo_h: int) -> None:
    """Sum block ``r`` of every rank's ``t`` into rank ``r``'s ``out``."""
    w, h = sip_topo_w, sip_topo_h
    row, col = divmod(sip_rank, w)
    rows_per = out.shape[0]
    whole = tl.ref(t)

    def block(rank: int):
        return whole[rank * rows_per:(rank + 1) * rows_per, :]

    buf = tl.zeros(out.shape, out.dtype)
    spare = tl.zeros(out.shape, out.dtype)
    kept = {}
    for tr in range(h):
        for c in range(w):
            acc = tl.load(block(tr * w + c)) if row == tr else tl.load(block(tr * w + c), out=spare)
            reduce_line(tl, acc, buf, row, h, tr, "global_S", "global_N")
            if row == tr:
                kept[c] = acc
    for tc in range(w):
        reduce_line(tl, kept[tc], buf, col, w, tc, "global_E", "global_W")
    tl.store(out, kept[col])


kernel = grid_reduce_scatter
