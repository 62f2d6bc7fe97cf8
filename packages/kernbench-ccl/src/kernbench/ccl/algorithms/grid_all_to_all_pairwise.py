"""All-to-all by direct pairwise exchange: every block goes on its own from the cube holding it to the cube it
belongs on.

Runs on PE 0 of every cube holding each rank's input ``t`` and output
``out`` (one cube, or every cube of the SIP with the rows split row-wise).
Rank ``i`` sends rows ``sent_before(i, j) ..`` of its input (``splits[i][j]``
rows) to rank ``j``, which stores them from row ``received_before(i, j)`` of
its output; the sizes come from the host in a
:class:`~kernbench.ccl.launch_spec.SplitTable`.

1. **Blocks and pieces.** The ``(i, j)`` block is cut where the input's or
   the output's shards end and wherever a message would exceed
   :func:`~kernbench.ccl.exchange.piece_rows`. Blocks are taken in
   rounds, as in the textbook pairwise exchange: round ``k`` sends every
   rank's block for rank ``i + k`` (round 0 is each rank's own block).
2. **Routes.** A piece travels over the ``global_*`` links of the cube that
   holds it to the destination rank, then over that SIP's cube mesh to
   the destination cube, on a shortest route (the SIP topology strategy's
   ``neighbour`` decides where each link leads, wrap-around included).
   Where two links are equally short the pieces alternate between them.
   Intermediate PEs forward a piece straight from their TCM; nothing is
   staged in memory on the way.
3. **Schedule.** Pieces are scheduled greedily in round order
   (:func:`~kernbench.ccl.exchange.schedule`) and run by
   :func:`~kernbench.ccl.exchange.run_exchange`.

No two blocks share a message, so many small blocks cost many messages;
in exchange every cube sends over its own links and no PE copies a block
it does not own into memory. Module contract: ``launch_spec(call)`` and
``supports_sip_topology(strategy)``.
"""

from __future__ import annotations

from functools import lru_cache

from kernbench.ccl.exchange import (
    GLOBAL,
    MESH,
    Fabric,
    Node,
    Plan,
    PlanBuilder,
    input_region,
    output_region,
    run_exchange,
)
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec, LaunchSpecError, SplitTable
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("all_to_all",)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy: routes follow its ``neighbour`` links."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    """The pairwise kernel with the call's split table and geometry, by name."""
    if call.split_table is None:
        raise LaunchSpecError("grid_all_to_all_pairwise needs the call's split_table (it runs all_to_all only)")
    rows, cols = call.sip_grid
    return LaunchSpec(grid_all_to_all_pairwise, tensor="t", kwargs={
        "sip_rank": call.rank, "split_table": call.split_table, "sip_topology": call.sip_topology,
        "sip_topo_w": cols, "sip_topo_h": rows, "cube_w": call.cube_w})


@lru_cache(maxsize=16)
def plan(split_table: SplitTable, sip_topology: SipTopology, sip_topo_h: int, sip_topo_w: int, cube_w: int) -> Plan:
    """The pairwise exchange of ``split_table`` on a ``sip_topo_h x sip_topo_w`` grid of ranks (cached: every
    rank and every PE plans the same exchange)."""
    t = split_table
    world = t.world_size
    fabric = Fabric.build(world, sip_topology, (sip_topo_h, sip_topo_w), t.cubes, cube_w)

    def route(a: Node, b: Node, key: int):
        turn = (b[0], a[1])  # the destination rank, still on the source cube
        return fabric.path(a, turn, GLOBAL, key) + fabric.path(turn, b, MESH, key)

    builder = PlanBuilder(t, fabric)
    for k in range(world):
        for i in range(world):
            j = (i + k) % world
            n = t.splits[i][j]
            if n:
                src = input_region(t, i).slice(t.sent_before(i, j), t.sent_before(i, j) + n)
                dst = output_region(t, j).slice(t.received_before(i, j), t.received_before(i, j) + n)
                builder.move(src, dst, route)
    return builder.plan()


def grid_all_to_all_pairwise(tl, t, out, sip_rank: int, split_table: SplitTable, sip_topology: SipTopology,
                             sip_topo_w: int, sip_topo_h: int, cube_w: int) -> None:
    """This PE's share of the pairwise exchange: rows of ``t`` to every rank, rows of every rank into ``out``."""
    exchange = plan(split_table, sip_topology, sip_topo_h, sip_topo_w, cube_w)
    run_exchange(tl, exchange, (sip_rank, tl.pe[1]), {"in": t, "out": out})


kernel = grid_all_to_all_pairwise
