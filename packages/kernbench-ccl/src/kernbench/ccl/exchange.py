"""Routed row exchanges for all-to-all: regions of rows, transfers along neighbour links, a step schedule, and the
kernel body that runs one PE's share of it.

An all-to-all moves row ranges between PEs most of which are not
neighbours. An algorithm module (``grid_all_to_all_pairwise``,
``grid_all_to_all_hierarchical``) decides *which* rows go *where* and along
*which* links; this module turns that decision into messages and runs them.
It lives outside ``kernbench.ccl.algorithms``, so it is not an algorithm
module itself.

- A *node* is PE 0 of one cube of one rank's SIP, written ``(rank, cube)``.
  A :class:`Fabric` holds the links between nodes: ``global_*`` between the
  same cube of neighbouring ranks, where the SIP topology strategy's
  ``neighbour`` says, and ``E``/``W``/``N``/``S`` between neighbouring cubes
  of a SIP's mesh. It is the all-reduce's neighbour table, restricted to the
  cubes the tensors span.
- A :class:`Region` is a run of logical rows laid over physical places (a
  buffer of a node, from a row on): a rank's input over its cubes, its
  output, or a staging area in a root cube's workspace.
- :meth:`PlanBuilder.move` copies rows from one region to another as
  *pieces*. No piece crosses a place boundary or carries more rows than
  one message may (:func:`piece_rows`). Each piece becomes a
  :class:`Transfer` along a path of links, or a local copy when both ends
  are on one node. A piece that reads staged rows waits for the transfers
  that wrote them.
- :func:`schedule` gives every transfer a start step: hop ``i`` crosses its
  link at step ``start + i``, no link carries two messages in one step,
  and a transfer starts only after those it waits for have landed.
- :func:`run_exchange` is the kernel body. For each step a PE receives the
  step's messages (keeping relayed ones in its TCM, storing the others
  where they belong), then sends the next step's messages.

The schedule cannot deadlock. Every link carries at most one message per
step, and each PE sends a step's messages before it receives that step's.
Take the PE that is furthest behind. Its sends find free slots: every
receiver is at least as far along, so it has consumed every earlier message
on the link. The messages it waits for have been sent: every sender is at
least as far along too. So the PE furthest behind can always go on.

TCM scratch: a relayed piece lives from its receive to the next step's
send; a piece that is stored or copied lives only until its store has
completed. A PE therefore holds at most one piece per incoming link, one
per outgoing link and one more, which bounds the bytes per message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kernbench.ccl.launch_spec import SplitTable
from kernbench.components.pe.ipcq import OPPOSITE
from kernbench.topology.errors import KernbenchError
from kernbench.topology.sip_topologies import SipTopology

Node = tuple[int, int]  # (rank, cube)
Hop = tuple[Node, str]  # the sending node and the direction it sends in
Route = Callable[[Node, Node, int], tuple[Hop, ...]]

#: direction sets a route may be limited to
GLOBAL = frozenset({"global_E", "global_W", "global_N", "global_S"})
ROW = frozenset({"global_E", "global_W"})
COLUMN = frozenset({"global_N", "global_S"})
MESH = frozenset({"E", "W", "N", "S"})
SCRATCH_ALIGN = 16  # bytes: every scratch allocation starts on this boundary


class ExchangeError(KernbenchError):
    """An exchange that cannot be planned: a row larger than a message, or two nodes with no route between them."""


@dataclass(frozen=True)
class Place:
    """Rows of a buffer of a node from ``row`` on; ``buffer`` is ``"in"``, ``"out"`` or ``"stage"``."""

    node: Node
    buffer: str
    row: int

    def at(self, offset: int) -> Place:
        """The place ``offset`` rows further on."""
        return Place(self.node, self.buffer, self.row + offset)


@dataclass(frozen=True)
class Run:
    """Logical rows ``start .. start + rows`` of a region, stored from ``place`` on."""

    start: int
    rows: int
    place: Place


@dataclass(frozen=True)
class Region:
    """Logical rows ``0 .. size`` laid over consecutive :class:`Run` s (no gaps)."""

    runs: tuple[Run, ...]

    @staticmethod
    def of(parts: Collection[tuple[int, Place]]) -> Region:
        """The region of ``(rows, place)`` parts laid end to end (parts of 0 rows are left out)."""
        runs, start = [], 0
        for rows, place in parts:
            if rows:
                runs.append(Run(start, rows, place))
                start += rows
        return Region(tuple(runs))

    @staticmethod
    def concat(regions: Collection[Region]) -> Region:
        """The regions laid end to end."""
        return Region.of([(r.rows, r.place) for region in regions for r in region.runs])

    @property
    def size(self) -> int:
        """Rows in the region."""
        return self.runs[-1].start + self.runs[-1].rows if self.runs else 0

    def slice(self, lo: int, hi: int) -> Region:
        """Rows ``lo .. hi`` as a region of their own (numbered from 0)."""
        if not 0 <= lo <= hi <= self.size:
            raise ExchangeError(f"rows {lo}..{hi} are outside a region of {self.size} rows")
        parts = []
        for r in self.runs:
            a, b = max(lo, r.start), min(hi, r.start + r.rows)
            if a < b:
                parts.append((b - a, r.place.at(a - r.start)))
        return Region.of(parts)

    def locate(self, row: int) -> tuple[Place, int]:
        """Where logical row ``row`` is stored, and how many rows of the same run follow it (itself included)."""
        for r in self.runs:
            if r.start <= row < r.start + r.rows:
                return r.place.at(row - r.start), r.start + r.rows - row
        raise ExchangeError(f"row {row} is outside a region of {self.size} rows")


@dataclass(frozen=True)
class Transfer:
    """``rows`` rows from ``src`` to ``dst`` along ``hops`` (empty: a copy on one node), once the transfers
    numbered in ``after`` have landed."""

    src: Place
    dst: Place
    rows: int
    hops: tuple[Hop, ...]
    after: tuple[int, ...]


@dataclass(frozen=True)
class Copy:
    """A local copy of ``rows`` rows (load, then store)."""

    src: Place
    dst: Place
    rows: int


@dataclass(frozen=True)
class Send:
    """Send ``rows`` rows towards ``direction``: loaded from ``src``, or the piece kept under ``relay``."""

    direction: str
    rows: int
    src: Place | None
    relay: tuple[int, int] | None


@dataclass(frozen=True)
class Recv:
    """Receive ``rows`` rows from ``direction``: store them at ``dst``, or keep them under ``relay``."""

    direction: str
    rows: int
    dst: Place | None
    relay: tuple[int, int] | None


@dataclass(frozen=True)
class Step:
    """What one node does at one step: its copies and sends (issued before the step's receives), its receives."""

    step: int
    copies: tuple[Copy, ...]
    sends: tuple[Send, ...]
    recvs: tuple[Recv, ...]


@dataclass(frozen=True)
class Plan:
    """An exchange ready to run: each node's steps, with counts for reports.

    ``stage_rows[r]`` is the rows of workspace rank ``r``'s root needs (0:
    none), ``steps`` the schedule's length, ``messages`` the sends of all
    hops, ``copies`` the local copies and ``rows_per_piece`` the most rows
    one message carries.
    """

    programs: Mapping[Node, tuple[Step, ...]]
    stage_rows: tuple[int, ...]
    steps: int
    messages: int
    copies: int
    rows_per_piece: int


# ---------------------------------------------------------------------------------------------- fabric
class Fabric:
    """The links between the nodes of an exchange, and shortest routes along them."""

    def __init__(self, links: Mapping[Node, Mapping[str, Node]]) -> None:
        self.links = MappingProxyType({n: MappingProxyType(dict(d)) for n, d in links.items()})
        self._distances: dict[tuple[Node, frozenset[str]], dict[Node, int]] = {}

    @classmethod
    def build(cls, world: int, topology: SipTopology, grid: tuple[int, int], cubes: tuple[int, ...],
              cube_w: int) -> Fabric:
        """Nodes ``(rank, cube)`` for every rank and every cube of ``cubes``: ``global_*`` links where
        ``topology.neighbour`` puts each rank's neighbours on the ``grid = (rows, cols)`` of ranks, and, when
        ``cubes`` holds more than one cube, mesh links between neighbouring cubes (``cube_w`` columns)."""
        rows, cols = grid
        links: dict[Node, dict[str, Node]] = {(r, c): {} for r in range(world) for c in cubes}

        def link(a: Node, direction: str, b: Node) -> None:
            links[a][direction] = b
            links[b][OPPOSITE[direction]] = a

        for r in range(world):
            for direction in ("E", "S"):
                peer = topology.neighbour(r, direction, rows, cols)
                if peer is not None:
                    for c in cubes:
                        link((r, c), f"global_{direction}", (peer, c))
        if len(cubes) > 1:
            present = set(cubes)
            for r in range(world):
                for c in cubes:
                    if c % cube_w + 1 < cube_w and c + 1 in present:
                        link((r, c), "E", (r, c + 1))
                    if c + cube_w in present:
                        link((r, c), "S", (r, c + cube_w))
        return cls(links)

    @property
    def degree(self) -> int:
        """The most links any node has."""
        return max((len(d) for d in self.links.values()), default=0)

    def _distance_to(self, b: Node, directions: frozenset[str]) -> dict[Node, int]:
        key = (b, directions)
        if key not in self._distances:
            dist, frontier = {b: 0}, [b]
            while frontier:  # links are symmetric, so hops from b are hops to b
                nxt = []
                for n in frontier:
                    for d, peer in self.links[n].items():
                        if d in directions and peer not in dist:
                            dist[peer] = dist[n] + 1
                            nxt.append(peer)
                frontier = nxt
            self._distances[key] = dist
        return self._distances[key]

    def path(self, a: Node, b: Node, directions: frozenset[str], key: int) -> tuple[Hop, ...]:
        """A shortest route from ``a`` to ``b`` using only ``directions``. Where several links get closer,
        ``key`` picks one (in direction-name order), so pieces with different keys spread over equal routes."""
        dist = self._distance_to(b, directions)
        if a not in dist:
            raise ExchangeError(f"no route from rank {a[0]} cube {a[1]} to rank {b[0]} cube {b[1]} over "
                                f"{', '.join(sorted(directions))}")
        hops: list[Hop] = []
        while a != b:
            closer = [d for d in sorted(self.links[a]) if d in directions and dist.get(self.links[a][d]) == dist[a] - 1]
            d = closer[key % len(closer)]
            hops.append((a, d))
            a = self.links[a][d]
        return tuple(hops)


def piece_rows(table: SplitTable, fabric: Fabric) -> int:
    """The most rows one message carries: one IPCQ slot, and no more than lets a PE hold a piece per incoming
    link, per outgoing link and one more in its TCM scratch."""
    held = 2 * fabric.degree + 1
    budget = min(table.slot_bytes, table.scratch_bytes // held - SCRATCH_ALIGN)
    rows = budget // table.row_bytes
    if rows < 1:
        raise ExchangeError(f"a row of {table.row_bytes} B does not fit one message of at most {max(budget, 0)} B "
                            f"(an IPCQ slot of {table.slot_bytes} B, and {held} pieces in {table.scratch_bytes} B "
                            f"of TCM scratch); use narrower rows or raise pe.ipcq.slot_kib / pe.tcm.scratch_mib")
    return rows


def input_region(table: SplitTable, rank: int) -> Region:
    """Rank ``rank``'s input, over the cubes that hold it."""
    return Region.of([(n, Place((rank, c), "in", 0)) for c, n in zip(table.cubes, table.in_rows[rank], strict=True)])


def output_region(table: SplitTable, rank: int) -> Region:
    """Rank ``rank``'s output, over the cubes that hold it."""
    return Region.of([(n, Place((rank, c), "out", 0)) for c, n in zip(table.cubes, table.out_rows[rank],
                                                                      strict=True)])


# ---------------------------------------------------------------------------------------------- planning
class PlanBuilder:
    """Collects the transfers of an exchange in priority order, then schedules and compiles them."""

    def __init__(self, table: SplitTable, fabric: Fabric) -> None:
        self.table = table
        self.fabric = fabric
        self.rows_per_piece = piece_rows(table, fabric)
        self.transfers: list[Transfer] = []
        self._writes: dict[tuple[Node, str], list[tuple[int, int, int]]] = defaultdict(list)

    def move(self, src: Region, dst: Region, route: Route) -> None:
        """Copy every row of ``src`` to the same row of ``dst``, in pieces along ``route(a, b, key)``."""
        if src.size != dst.size:
            raise ExchangeError(f"cannot move {src.size} rows into a region of {dst.size}")
        row = 0
        while row < src.size:
            s, s_left = src.locate(row)
            d, d_left = dst.locate(row)
            n = min(s_left, d_left, self.rows_per_piece)
            row += n
            if s == d:
                continue  # already where it belongs (a root's own rows in its staging view)
            hops = route(s.node, d.node, len(self.transfers)) if s.node != d.node else ()
            self._check_route(s.node, d.node, hops)
            after = self._writers(s, n)
            self._writes[(d.node, d.buffer)].append((d.row, d.row + n, len(self.transfers)))
            self.transfers.append(Transfer(s, d, n, hops, after))

    def _check_route(self, a: Node, b: Node, hops: tuple[Hop, ...]) -> None:
        at = a
        for node, direction in hops:
            if node != at or direction not in self.fabric.links[node]:
                raise ExchangeError(f"route {hops} from {a} to {b} does not follow the links at {node}")
            at = self.fabric.links[node][direction]
        if at != b:
            raise ExchangeError(f"route {hops} from {a} ends at {at}, not {b}")

    def _writers(self, src: Place, n: int) -> tuple[int, ...]:
        """The transfers that write rows ``src.row .. src.row + n`` of ``src``'s buffer (every row of a staging
        buffer must have been written before it is read)."""
        lo, hi = src.row, src.row + n
        found = [(a, b, t) for a, b, t in self._writes.get((src.node, src.buffer), ()) if a < hi and lo < b]
        if src.buffer == "stage":
            covered = sum(min(b, hi) - max(a, lo) for a, b, _ in found)
            if covered != n:
                raise ExchangeError(f"rows {lo}..{hi} of the workspace of {src.node} are read before they are all "
                                    f"written")
        return tuple(sorted(t for _, _, t in found))

    def plan(self, stage_rows: tuple[int, ...] | None = None) -> Plan:
        """Check that every output row is written exactly once, schedule the transfers and compile each node's
        steps."""
        self._check_outputs()
        starts = schedule(self.transfers)
        return compile_plan(self.transfers, starts, self.fabric, stage_rows or (0,) * self.table.world_size,
                            self.rows_per_piece)

    def _check_outputs(self) -> None:
        for rank, counts in enumerate(self.table.out_rows):
            for cube, rows in zip(self.table.cubes, counts, strict=True):
                spans = sorted((a, b) for a, b, _ in self._writes.get(((rank, cube), "out"), ()))
                at = 0
                for a, b in spans:
                    if a != at:
                        raise ExchangeError(f"rank {rank} cube {cube}: output rows {min(a, at)}..{max(a, at)} are "
                                            f"{'written twice' if a < at else 'never written'}")
                    at = b
                if at != rows:
                    raise ExchangeError(f"rank {rank} cube {cube}: output rows {at}..{rows} are never written")


def schedule(transfers: list[Transfer]) -> list[int]:
    """The start step of every transfer, greedily in list order: the earliest step after everything it waits for
    has landed at which each hop's link is free at its step (hop ``i`` at ``start + i``)."""
    busy: dict[Hop, set[int]] = defaultdict(set)
    landed: list[int] = []
    starts: list[int] = []
    for t in transfers:
        start = max((landed[a] + 1 for a in t.after), default=0)
        while any(start + i in busy[hop] for i, hop in enumerate(t.hops)):
            start += 1
        for i, hop in enumerate(t.hops):
            busy[hop].add(start + i)
        starts.append(start)
        landed.append(start + max(len(t.hops) - 1, 0))
    return starts


def compile_plan(transfers: list[Transfer], starts: list[int], fabric: Fabric, stage_rows: tuple[int, ...],
                 rows_per_piece: int) -> Plan:
    """Each node's steps: copies, sends (relays first) and receives (relays first), ordered by direction."""
    copies: dict[Node, dict[int, list[Copy]]] = defaultdict(lambda: defaultdict(list))
    sends: dict[Node, dict[int, list[Send]]] = defaultdict(lambda: defaultdict(list))
    recvs: dict[Node, dict[int, list[Recv]]] = defaultdict(lambda: defaultdict(list))
    messages = n_copies = 0
    for k, (t, start) in enumerate(zip(transfers, starts, strict=True)):
        if not t.hops:
            copies[t.src.node][start].append(Copy(t.src, t.dst, t.rows))
            n_copies += 1
            continue
        last = len(t.hops) - 1
        for i, (node, direction) in enumerate(t.hops):
            peer = fabric.links[node][direction]
            sends[node][start + i].append(Send(direction, t.rows, t.src if i == 0 else None,
                                               (k, i) if i else None))
            recvs[peer][start + i].append(Recv(OPPOSITE[direction], t.rows, t.dst if i == last else None,
                                               (k, i + 1) if i < last else None))
            messages += 1
    programs: dict[Node, tuple[Step, ...]] = {}
    end = 0
    for node in sorted(set(copies) | set(sends) | set(recvs)):
        steps = sorted(set(copies[node]) | set(sends[node]) | set(recvs[node]))
        end = max(end, steps[-1] + 1)
        programs[node] = tuple(Step(s, tuple(copies[node][s]),
                                    tuple(sorted(sends[node][s], key=lambda m: (m.relay is None, m.direction))),
                                    tuple(sorted(recvs[node][s], key=lambda m: (m.relay is None, m.direction))))
                               for s in steps)
    return Plan(MappingProxyType(programs), tuple(stage_rows), end, messages, n_copies, rows_per_piece)


# ---------------------------------------------------------------------------------------------- the kernel body
def _iterations(steps: tuple[Step, ...]) -> Iterator[tuple[Step | None, Step | None]]:
    """``(receive at t, send at t + 1)`` pairs in order: what a PE does between two scratch rewinds."""
    by_step = {s.step: s for s in steps}
    marks = sorted({s.step for s in steps if s.recvs} | {s.step - 1 for s in steps if s.sends or s.copies})
    for t in marks:
        here, nxt = by_step.get(t), by_step.get(t + 1)
        yield (here if here is not None and here.recvs else None,
               nxt if nxt is not None and (nxt.sends or nxt.copies) else None)


def run_exchange(tl, plan: Plan, node: Node, buffers: Mapping[str, object]) -> None:
    """Run ``node``'s share of ``plan`` in a kernel: ``buffers`` maps ``"in"``, ``"out"`` and ``"stage"`` to the
    kernel's tensor arguments (``None`` for a buffer the node does not have)."""
    steps = plan.programs.get(node, ())
    if not steps:
        return
    refs = {name: tl.ref(arg) for name, arg in buffers.items() if arg is not None}
    cols, dtype = refs["in"].shape[1], refs["in"].dtype

    def rows_at(place: Place, n: int):
        return refs[place.buffer][place.row:place.row + n, :]

    kept: dict[tuple[int, int], object] = {}
    for receive, send in _iterations(steps):
        with tl.scratch_scope():  # what arrives now is sent on at the next step, inside the same scope
            if receive is not None:
                for r in receive.recvs:
                    if r.relay is not None:
                        kept[r.relay] = tl.recv(r.direction, (r.rows, cols), dtype)
                        continue
                    with tl.scratch_scope():
                        tl.store(rows_at(r.dst, r.rows), tl.recv(r.direction, (r.rows, cols), dtype))
            if send is not None:
                pieces = [kept.pop(s.relay) if s.relay is not None else tl.load(rows_at(s.src, s.rows))
                          for s in send.sends]  # loads start together; each send waits for its own
                for s, piece in zip(send.sends, pieces, strict=True):
                    tl.send(s.direction, piece)
                for c in send.copies:
                    with tl.scratch_scope():
                        tl.store(rows_at(c.dst, c.rows), tl.load(rows_at(c.src, c.rows)))
