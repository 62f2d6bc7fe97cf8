"""All-to-all in levels: gather to a root cube, exchange between SIPs along rows then columns, scatter.

Runs on PE 0 of every cube holding each rank's input ``t`` and output
``out`` (one cube, or every cube of the SIP with the rows split row-wise),
with a workspace ``stage`` the backend allocates in the root cube's HBM.
Rank ``i`` sends ``splits[i][j]`` rows to rank ``j``, sizes the host
decides (:class:`~kernbench.ccl.launch_spec.SplitTable`). The *root* is the
cube in column ``(w - 1) // 2`` and row ``(h - 1) // 2`` of the mesh, as in
``lrab_hierarchical_allreduce``; for a one-cube tensor it is that cube.

1. **Own rows.** Rows a rank sends to itself go straight from the input's
   cube to the output's cube over the mesh (a local copy on one cube).
2. **Gather.** Every other cube sends its rows for other ranks over the
   mesh to the root, as whole runs of consecutive rows (not block by
   block), and the root stores them in the workspace in input order. The
   root's own rows stay where they are.
3. **Rows of the SIP grid.** Each root sends, along its row of the SIP
   grid (``global_E``/``global_W``, wrapping around where the strategy
   says), every block for a rank in column ``b`` to the root in column
   ``b`` of its own row. A block for that row is delivered; a block for
   another row is staged there, next to the blocks of the same
   destination from the rest of the row.
4. **Columns.** The root in row ``a``, column ``b`` then sends, for each
   rank ``(x, b)`` of its column, everything its row has for that rank.
   The row's ranks are consecutive, so those blocks are consecutive rows
   of the destination's output and travel as one stream of full messages
   rather than one block at a time.
5. **Scatter.** The destination root sends each cube its output rows over
   the mesh, again as consecutive rows from many sources.

Against ``grid_all_to_all_pairwise`` this sends fewer, fuller messages
between SIPs over one cube's links, and pays a store and a load at each
root that stages a block. A ring of one-cube tensors has nothing to stage
(one row, one cube), so there the two algorithms plan the same exchange.
Module contract: ``launch_spec(call)`` and ``supports_sip_topology(strategy)``.
"""

from __future__ import annotations

from functools import lru_cache

from kernbench.ccl.exchange import (
    COLUMN,
    MESH,
    ROW,
    Fabric,
    Node,
    Place,
    Plan,
    PlanBuilder,
    Region,
    input_region,
    output_region,
    run_exchange,
)
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec, LaunchSpecError, SplitTable
from kernbench.topology.sip_topologies import SipTopology

COLLECTIVES = ("all_to_all",)


def supports_sip_topology(topology: SipTopology) -> bool:
    """Every grid strategy: the exchange runs along its rows and columns, wrapping where it says."""
    return isinstance(topology, SipTopology)


def launch_spec(call: CollectiveCall) -> LaunchSpec:
    """The hierarchical kernel with the call's split table and geometry, and the workspace its root needs."""
    if call.split_table is None:
        raise LaunchSpecError("grid_all_to_all_hierarchical needs the call's split_table (it runs all_to_all only)")
    rows, cols = call.sip_grid
    kwargs = {"sip_rank": call.rank, "split_table": call.split_table, "sip_topology": call.sip_topology,
              "sip_topo_w": cols, "sip_topo_h": rows, "cube_w": call.cube_w, "cube_h": call.cube_h}
    exchange = plan(call.split_table, call.sip_topology, rows, cols, call.cube_w, call.cube_h)
    return LaunchSpec(grid_all_to_all_hierarchical, tensor="t", kwargs=kwargs,
                      workspace={"stage": exchange.stage_rows[call.rank]})


def root_cube(split_table: SplitTable, cube_w: int, cube_h: int) -> int:
    """The cube every rank gathers to: the centre of the mesh, or the tensors' one cube."""
    if len(split_table.cubes) == 1:
        return split_table.cubes[0]
    return (cube_h - 1) // 2 * cube_w + (cube_w - 1) // 2


class _Staging:
    """The root's workspace of one rank: rows handed out in order (``take``)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.rows = 0

    def take(self, n: int) -> Place:
        place = Place(self.node, "stage", self.rows)
        self.rows += n
        return place

    def view(self, region: Region) -> Region:
        """``region`` as seen from the root: its rows on the root stay there, every other run gets workspace."""
        return Region.of([(r.rows, r.place if r.place.node == self.node else self.take(r.rows))
                          for r in region.runs])


@lru_cache(maxsize=16)
def plan(split_table: SplitTable, sip_topology: SipTopology, sip_topo_h: int, sip_topo_w: int, cube_w: int,
         cube_h: int) -> Plan:
    """The hierarchical exchange of ``split_table`` on a ``sip_topo_h x sip_topo_w`` grid of ranks (cached: every
    rank and every PE plans the same exchange)."""
    t = split_table
    world, cols = t.world_size, sip_topo_w
    root = root_cube(t, cube_w, cube_h)
    fabric = Fabric.build(world, sip_topology, (sip_topo_h, sip_topo_w), t.cubes, cube_w)
    ins = [input_region(t, r) for r in range(world)]
    outs = [output_region(t, r) for r in range(world)]
    stages = [_Staging((r, root)) for r in range(world)]
    outbox = [stages[r].view(ins[r]) for r in range(world)]   # a rank's input, as its root holds it
    inbox = [stages[r].view(outs[r]) for r in range(world)]   # a rank's output, as its root receives it

    def sent(i: int, j: int) -> tuple[int, int]:
        return t.sent_before(i, j), t.sent_before(i, j) + t.splits[i][j]

    def got(i: int, j: int) -> tuple[int, int]:
        return t.received_before(i, j), t.received_before(i, j) + t.splits[i][j]

    relay: dict[tuple[int, int], Region] = {}  # (staging rank, destination) -> the row's blocks for it
    for m in range(world):
        a, b = divmod(m, cols)
        for x in range(sip_topo_h):
            j = x * cols + b
            if x == a:
                continue
            parts = [outbox[m].slice(*sent(m, j)) if a * cols + c == m
                     else Region.of([(t.splits[a * cols + c][j], stages[m].take(t.splits[a * cols + c][j]))])
                     for c in range(cols)]
            relay[(m, j)] = Region.concat(parts)

    def mesh(p: Node, q: Node, key: int):
        return fabric.path(p, q, MESH, key)

    def along_row(p: Node, q: Node, key: int):
        return fabric.path(p, q, ROW, key)

    def along_column(p: Node, q: Node, key: int):
        return fabric.path(p, q, COLUMN, key)

    builder = PlanBuilder(t, fabric)
    for i in range(world):  # 1. own rows
        builder.move(ins[i].slice(*sent(i, i)), outs[i].slice(*got(i, i)), mesh)
    for i in range(world):  # 2. gather every row for another rank: before and after the own block, in input order
        lo, hi = sent(i, i)
        builder.move(ins[i].slice(0, lo), outbox[i].slice(0, lo), mesh)
        builder.move(ins[i].slice(hi, ins[i].size), outbox[i].slice(hi, ins[i].size), mesh)
    for k in range(1, world):  # 3. along the rows
        for i in range(world):
            j = (i + k) % world
            if not t.splits[i][j]:
                continue
            a, c = divmod(i, cols)
            x, b = divmod(j, cols)
            if x == a:
                target = inbox[j].slice(*got(i, j))
            else:
                first = sum(t.splits[a * cols + cc][j] for cc in range(c))
                target = relay[(a * cols + b, j)].slice(first, first + t.splits[i][j])
            builder.move(outbox[i].slice(*sent(i, j)), target, along_row)
    for k in range(1, sip_topo_h):  # 4. along the columns
        for m in range(world):
            a, b = divmod(m, cols)
            j = (a + k) % sip_topo_h * cols + b
            lo = t.received_before(a * cols, j)
            block = relay[(m, j)]
            builder.move(block, inbox[j].slice(lo, lo + block.size), along_column)
    for j in range(world):  # 5. scatter what came from other ranks
        lo, hi = got(j, j)
        builder.move(inbox[j].slice(0, lo), outs[j].slice(0, lo), mesh)
        builder.move(inbox[j].slice(hi, outs[j].size), outs[j].slice(hi, outs[j].size), mesh)
    return builder.plan(tuple(s.rows for s in stages))


def grid_all_to_all_hierarchical(tl, t, out, stage, sip_rank: int, split_table: SplitTable,
                                 sip_topology: SipTopology, sip_topo_w: int, sip_topo_h: int, cube_w: int,
                                 cube_h: int) -> None:
    """This PE's share of the hierarchical exchange (``stage``: the root's workspace, ``None`` when it needs
    none)."""
    exchange = plan(split_table, sip_topology, sip_topo_h, sip_topo_w, cube_w, cube_h)
    run_exchange(tl, exchange, (sip_rank, tl.pe[1]), {"in": t, "out": out, "stage": stage})


kernel = grid_all_to_all_hierarchical
