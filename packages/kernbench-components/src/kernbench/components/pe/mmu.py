"""PE_MMU: the PE's translation table, filled by ``MmuMapMsg`` over the fabric, read synchronously.

The table is an ordered set of non-overlapping intervals ``[va, va + n) ->
pa``. Installing a mapping replaces whatever it overlaps (later mappings
win); an unmap message removes a range. Intervals need not be page aligned,
so a tensor shard that starts or ends inside a page can still be addressed
by virtual address; a real MMU maps whole pages only, and sub-page intervals
are a modeling aid (see ADR 0011). Lookups bisect the interval starts.

``translate`` costs no simulated time itself: the DMA that uses the
translated address pays ``pe.mmu_translate_ns``. An unmapped address, or a
range that is not contiguous in physical memory, raises :class:`MmuFault`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from operator import add, itemgetter, le, lt

from kernbench.sim.component import Component
from kernbench.sim.errors import MessageError
from kernbench.sim.messages import MessageKind
from kernbench.sim.protocol import Engine
from kernbench.topology import block_params
from kernbench.topology import naming as nm
from kernbench.topology.errors import KernbenchError

#: A mapping message with at least this many entries is merged into the table at once when it can be.
_BULK = 8
#: The fields of a ``(va, pa, nbytes)`` mapping entry (``map`` with these splits entries into columns in C).
_VA, _PA, _NBYTES = itemgetter(0), itemgetter(1), itemgetter(2)


class MmuFault(KernbenchError):
    """A virtual address range is not mapped (or not contiguous) in a PE's MMU."""


@dataclass(frozen=True, slots=True)
class MmuMapMsg:
    """Install (or, with ``unmap``, remove) virtual-to-physical mappings in PE (sip, cube, pe)'s MMU.

    ``entries`` are ``(va, pa, nbytes)``: ``nbytes`` bytes from virtual
    address ``va`` map to the encoded physical address ``pa`` onwards
    (``pa`` is ignored when unmapping).
    """

    sip: int
    cube: int
    pe: int
    entries: tuple[tuple[int, int, int], ...] = field(repr=False)
    unmap: bool = False


class PeMmu(Component):
    """Interval translation table of one PE."""

    PARAMS = block_params.PE_MMU  # the parameters its node carries (kernbench.topology.block_params)

    __slots__ = ("his", "los", "pas", "tidy", "translate_ns")

    def __init__(self, engine: Engine, node) -> None:
        super().__init__(engine, node)
        self.translate_ns = node.attrs["translate_ns"]
        self.los: list[int] = []
        self.his: list[int] = []
        self.pas: list[int] = []
        #: True while the table is sorted and its intervals are non-empty and pairwise disjoint, which every
        #: mapping and unmapping of a positive length keeps. The first cut of another length (an empty or negative
        #: entry) clears it for good; the table then takes the general cut and merge (``_cut_general``,
        #: ``_insert_disjoint_general``), which hold for any table, instead of the fast ones that rely on it.
        self.tidy = True

    def on_control(self, payload: object, t: float, transfer) -> None:
        """Install (or remove) a message's mappings; the host's request completes after the MMU's overhead."""
        if not isinstance(payload, MmuMapMsg):
            super().on_control(payload, t, transfer)
        entries = payload.entries
        if payload.unmap:
            for va, _, nbytes in entries:
                self._cut(va, va + nbytes)
        elif len(entries) < _BULK or not self._insert_disjoint(entries):
            for va, pa, nbytes in entries:
                self.install(va, pa, nbytes)
        self.engine.finish(transfer.request, t + self.overhead_ns)

    def _insert_disjoint(self, entries: tuple[tuple[int, int, int], ...]) -> bool:
        """Install ``entries`` (``(va, pa, nbytes)``) in one merge if no two of them, and none of them and the
        table, overlap; returns False, the table untouched, when they do (the caller then cuts and inserts one
        by one).

        One by one, each entry's cut would find nothing to trim and its insert would land it at its sorted place
        among the intervals present, so the table ends as the sorted union of both: that is what the merge builds,
        with list operations that run in C instead of one list insertion per entry (a tensor mapped row by row
        brings thousands of entries). When all entries fall in one gap of the table (a new tensor's range) the
        union is one slice assignment.
        """
        if not self.tidy:
            return _insert_disjoint_general(self, entries)
        if not entries:
            return True
        cols = self.engine.memo(_LastColumns).columns(entries)
        if cols is None:
            return False  # an empty entry, or two entries that overlap
        vas, his, pas = cols
        los = self.los
        at = bisect_right(los, vas[0])
        if (at == 0 or self.his[at - 1] <= vas[0]) and (at == len(los) or los[at] >= his[-1]):
            los[at:at] = vas
            self.his[at:at] = his
            self.pas[at:at] = pas
            return True
        all_lo, all_hi, all_pa = [*los, *vas], [*self.his, *his], [*self.pas, *pas]
        order = sorted(range(len(all_lo)), key=all_lo.__getitem__)
        out_lo = [all_lo[k] for k in order]
        out_hi = [all_hi[k] for k in order]
        if not all(map(le, out_hi, out_lo[1:])):
            return False  # an entry overlaps the table
        self.los[:], self.his[:], self.pas[:] = out_lo, out_hi, [all_pa[k] for k in order]
        return True

    def install(self, va: int, pa: int, nbytes: int) -> None:
        """Map ``nbytes`` from ``va`` to ``pa``, replacing any overlapping mapping."""
        self._cut(va, va + nbytes)
        self._insert(va, va + nbytes, pa)

    @property
    def intervals(self) -> list[tuple[int, int, int]]:
        """The table as ``(va_lo, va_hi, pa)`` triples, ascending."""
        return list(zip(self.los, self.his, self.pas, strict=True))

    def _insert(self, lo: int, hi: int, pa: int) -> None:
        """Insert ``[lo, hi) -> pa`` at its sorted place (after a :meth:`_cut` of the range, which has marked the
        table untidy if ``hi <= lo``)."""
        i = bisect_right(self.los, lo)
        self.los.insert(i, lo)
        self.his.insert(i, hi)
        self.pas.insert(i, pa)

    def _cut(self, lo: int, hi: int) -> None:
        """Remove [lo, hi) from the table, trimming intervals that stick out on either side.

        In a tidy table only the first interval the range reaches can stick out on the left and only the last
        on the right; the ones between go whole, with one slice deletion.
        """
        if hi <= lo:
            self.tidy = False
        if not self.tidy:
            _cut_general(self, lo, hi)
            return
        los, his, pas = self.los, self.his, self.pas
        i = max(bisect_right(los, lo) - 1, 0)
        j = bisect_left(los, hi, i)
        if j == i:
            return
        keep: list[tuple[int, int, int]] = []
        if his[i] <= lo:
            keep.append((los[i], his[i], pas[i]))
        elif los[i] < lo:
            keep.append((los[i], lo, pas[i]))
        if his[j - 1] > hi:
            keep.append((hi, his[j - 1], pas[j - 1] + (hi - los[j - 1])))
        los[i:j] = [k[0] for k in keep]
        his[i:j] = [k[1] for k in keep]
        pas[i:j] = [k[2] for k in keep]

    def _lookup(self, va: int) -> tuple[int | None, int]:
        """Physical address of one byte and how many bytes from it the same interval covers."""
        i = bisect_right(self.los, va) - 1
        if i >= 0 and va < self.his[i]:
            return self.pas[i] + (va - self.los[i]), self.his[i] - va
        return None, 0

    def translate(self, va: int, nbytes: int) -> int:
        """The physical address of ``nbytes`` at ``va`` (they must be contiguous in physical memory)."""
        pos, end = va, va + max(nbytes, 1)
        i = bisect_right(self.los, va) - 1
        if i >= 0 and end <= self.his[i]:  # one interval holds the whole range
            return self.pas[i] + (va - self.los[i])
        first = expect = None
        while pos < end:
            pa, avail = self._lookup(pos)
            if pa is None:
                where = "is not mapped" if pos == va else f"runs past its mapping at {pos:#x}"
                raise MmuFault(f"{self.id}: virtual range {va:#x}+{nbytes} {where}; tensors are mapped on the PEs "
                               f"of their placement only")
            if first is None:
                first = pa
            elif pa != expect:
                raise MmuFault(f"{self.id}: virtual range {va:#x}+{nbytes} is not contiguous in physical memory "
                               f"(it reaches another shard at {pos:#x}); split the access at the shard boundary")
            step = min(avail, end - pos)
            pos += step
            expect = pa + step
        return first


class _LastColumns:
    """The last mapping entries one engine's PE MMUs split into columns, and the columns (:meth:`columns`): the
    runtime hands every PE that maps the same copies of a tensor the same entries object, so a tensor's columns
    are computed once per engine, not once per PE. Kept with the engine (``engine.memo``)."""

    __slots__ = ("cols", "entries")

    def __init__(self, engine: object) -> None:
        self.entries: object = ()
        self.cols: tuple[tuple[int, ...], ...] | None = None

    def columns(self, entries: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, ...], ...] | None:
        """Mapping entries ``(va, pa, nbytes)`` as columns ``(vas, his, pas)`` in ascending ``va`` (``his`` the
        ends), or None if an entry is empty (``nbytes <= 0``) or two entries overlap.

        The result depends on the entries only, so it is kept for the last entries tuple, which this memo keeps
        alive (its identity cannot be reused while it is held here).
        """
        if self.entries is entries:
            return self.cols
        vas = list(map(_VA, entries))
        if not all(map(lt, vas, vas[1:])):
            entries_sorted = sorted(entries, key=_VA)  # ties (equal va) overlap and are refused below
            vas = list(map(_VA, entries_sorted))
        else:
            entries_sorted = entries
        sizes = list(map(_NBYTES, entries_sorted))
        his = list(map(add, vas, sizes))
        cols = None
        if min(sizes) > 0 and all(map(le, his, vas[1:])):
            cols = (tuple(vas), tuple(his), tuple(map(_PA, entries_sorted)))
        if type(entries) is tuple:
            self.entries, self.cols = entries, cols
        return cols


def _cut_general(mmu: PeMmu, lo: int, hi: int) -> None:
    """:meth:`PeMmu._cut` for any table (one by one over the intervals the range reaches)."""
    i = max(bisect_right(mmu.los, lo) - 1, 0)
    keep: list[tuple[int, int, int]] = []
    j = i
    while j < len(mmu.los) and mmu.los[j] < hi:
        a, b, pa = mmu.los[j], mmu.his[j], mmu.pas[j]
        if b > lo:
            if a < lo:
                keep.append((a, lo, pa))
            if b > hi:
                keep.append((hi, b, pa + (hi - a)))
        else:
            keep.append((a, b, pa))
        j += 1
    mmu.los[i:j] = [k[0] for k in keep]
    mmu.his[i:j] = [k[1] for k in keep]
    mmu.pas[i:j] = [k[2] for k in keep]


def _insert_disjoint_general(mmu: PeMmu, entries: tuple[tuple[int, int, int], ...]) -> bool:
    """:meth:`PeMmu._insert_disjoint` for any table (one bisection per entry)."""
    los, his, pas = mmu.los, mmu.his, mmu.pas
    new = sorted(entries)
    at = []
    prev_hi = None
    for va, _, nbytes in new:
        if nbytes <= 0 or (prev_hi is not None and va < prev_hi):
            return False
        i = bisect_right(los, va)
        if (i and his[i - 1] > va) or (i < len(los) and los[i] < va + nbytes):
            return False
        at.append(i)
        prev_hi = va + nbytes
    out_lo: list[int] = []
    out_hi: list[int] = []
    out_pa: list[int] = []
    prev = 0
    for (va, pa, nbytes), i in zip(new, at, strict=True):
        if i > prev:
            out_lo += los[prev:i]
            out_hi += his[prev:i]
            out_pa += pas[prev:i]
            prev = i
        out_lo.append(va)
        out_hi.append(va + nbytes)
        out_pa.append(pa)
    mmu.los[:] = out_lo + los[prev:]
    mmu.his[:] = out_hi + his[prev:]
    mmu.pas[:] = out_pa + pas[prev:]
    return True


def _start_map(engine: Engine, req) -> None:
    """Send the mappings from the host to the PE's MMU as one control message."""
    msg: MmuMapMsg = req.msg
    if not msg.entries:
        raise MessageError("MmuMapMsg carries no entries")
    mmu = engine.resolver.find_pe_block(msg.sip, msg.cube, msg.pe, "pe_mmu")
    path = engine.router.control_path(nm.HOST, mmu)
    req.source = nm.HOST
    req.op_name = "mmu_map"
    req.legs.append(path)
    engine.send_control(req, path, msg)


def _complete_map(engine: Engine, req) -> None:
    engine.oplog.record(req.t_submit, req.t_end, req.source, "control", "mmu_map",
                        {"corr_id": req.corr_id, "entries": len(req.msg.entries)})


#: How the engine starts and completes an MMU (un)mapping.
MMU_MAP_KIND = MessageKind(MmuMapMsg, _start_map, _complete_map)
