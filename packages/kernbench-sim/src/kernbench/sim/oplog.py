"""The operation log: one record per data operation a component performed, stored by column.

A long run logs millions of operations, so the log does not keep one object
per record. It keeps columns: start and end times in ``array('d')`` (8 bytes
each), the ``(component, kind, name)`` *site* and the parameter names as
small integers into tables of the distinct values (4 bytes each), and the
parameter values as one tuple per record. ``benchmarks/bench_oplog.py``
measures the bytes per record; 10 million records fit in well under 2 GB.

Readers see :class:`OpRecord` objects, made on demand by
:attr:`OpLog.records`, in ``t_start`` order (insertion order among equal
starts), exactly as they were logged: times bit for bit, parameters as a
dict in their original order holding the very objects that were logged.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload


@dataclass(slots=True)
class OpRecord:
    """One operation: when (ns), where, what kind, which op, and its parameters."""

    t_start: float
    t_end: float
    component_id: str
    op_kind: str
    op_name: str
    params: dict[str, Any] = field(default_factory=dict)


class OpLog:
    """Append-only, columnar log; :attr:`records` reads it stably sorted by ``t_start``."""

    __slots__ = ("_key_ids", "_key_of", "_keys", "_site", "_site_ids", "_site_of", "_sorted", "_t0", "_t1", "_vals")

    def __init__(self) -> None:
        self._t0 = array("d")
        self._t1 = array("d")
        self._site = array("I")  # index into _site_of: (component_id, op_kind, op_name)
        self._keys = array("I")  # index into _key_of: the parameter names, in order
        self._vals: list[tuple] = []  # the parameter values, in the same order
        self._site_of: list[tuple[str, str, str]] = []
        self._site_ids: dict[tuple[str, str, str], int] = {}
        self._key_of: list[tuple[str, ...]] = []
        self._key_ids: dict[tuple[str, ...], int] = {}
        self._sorted = True

    def record(self, t_start: float, t_end: float, component_id: str, op_kind: str, op_name: str,
               params: dict[str, Any]) -> None:
        """Append a finished operation."""
        t0 = self._t0
        if t0 and t_start < t0[-1]:
            self._sorted = False
        site = (component_id, op_kind, op_name)
        sid = self._site_ids.get(site)
        if sid is None:
            sid = self._site_ids[site] = len(self._site_of)
            self._site_of.append(site)
        keys = tuple(params)
        kid = self._key_ids.get(keys)
        if kid is None:
            kid = self._key_ids[keys] = len(self._key_of)
            self._key_of.append(keys)
        t0.append(t_start)
        self._t1.append(t_end)
        self._site.append(sid)
        self._keys.append(kid)
        self._vals.append(tuple(params.values()))

    def settle(self) -> None:
        """Drop a record whose columns were only partly appended: the wall-clock alarm of
        :mod:`kernbench.sim.limits` can stop the run between two appends of :meth:`record`, and every reader
        indexes all the columns up to the first one's length."""
        n = min(len(self._t0), len(self._t1), len(self._site), len(self._keys), len(self._vals))
        for column in (self._t0, self._t1, self._site, self._keys, self._vals):
            del column[n:]

    def _sort(self) -> None:
        """Reorder every column by ``t_start`` (a stable sort: insertion order among equal starts)."""
        order = sorted(range(len(self._t0)), key=self._t0.__getitem__)
        self._t0 = array("d", [self._t0[i] for i in order])
        self._t1 = array("d", [self._t1[i] for i in order])
        self._site = array("I", [self._site[i] for i in order])
        self._keys = array("I", [self._keys[i] for i in order])
        self._vals = [self._vals[i] for i in order]
        self._sorted = True

    def record_at(self, i: int) -> OpRecord:
        """Record ``i`` in the log's current order (see :attr:`records`)."""
        return OpRecord(self._t0[i], self._t1[i], *self._site_of[self._site[i]],
                        dict(zip(self._key_of[self._keys[i]], self._vals[i], strict=True)))

    def iter_records(self, n: int, start: int = 0) -> Iterator[OpRecord]:
        """Records ``start`` to ``n - 1`` in the log's current order, made one by one."""
        t0, t1, site, keys, vals = self._t0, self._t1, self._site, self._keys, self._vals
        sites, names = self._site_of, self._key_of
        for i in range(start, n):
            c, k, name = sites[site[i]]
            # a record's names and values come from one dict (record), so they have the same length
            yield OpRecord(t0[i], t1[i], c, k, name, dict(zip(names[keys[i]], vals[i])))  # noqa: B905

    def iter_timings(self, n: int, start: int = 0) -> Iterator[tuple[float, float, tuple[str, str, str]]]:
        """``(t_start, t_end, (component_id, op_kind, op_name))`` of records ``start`` to ``n - 1`` in the log's
        current order, without their parameters (a summary's pass: no record object is made)."""
        return zip(self._t0[start:n], self._t1[start:n], map(self._site_of.__getitem__, self._site[start:n]),
                   strict=True)

    def iter_named(self, names: frozenset[str], n: int, start: int = 0) -> Iterator[OpRecord]:
        """The records ``start`` to ``n - 1`` whose op name is in ``names``, in the log's current order, made one by
        one (the others are skipped without being made)."""
        wanted = {sid for sid, site in enumerate(self._site_of) if site[2] in names}
        if not wanted:
            return
        site = self._site
        for i in range(start, n):
            if site[i] in wanted:
                yield self.record_at(i)

    @property
    def records(self) -> OpRecords:
        """All records in ``t_start`` order (insertion order among equal starts), as a read-only sequence whose
        items are made on access (take ``list()`` of it for objects to keep)."""
        if not self._sorted:
            self._sort()
        return OpRecords(self, len(self._t0))

    def last(self) -> OpRecord | None:
        """The record at the end of the log (the last one appended, unless the log was read, and so sorted,
        since), or None when the log is empty."""
        return self.record_at(len(self._t0) - 1) if self._t0 else None

    def __len__(self) -> int:
        return len(self._t0)


class OpRecords(Sequence):
    """A read-only view of records ``start`` to ``n - 1`` of an :class:`OpLog` in its sorted order."""

    __slots__ = ("_log", "_n", "_start")

    def __init__(self, log: OpLog, n: int, start: int = 0) -> None:
        self._log, self._n, self._start = log, n, start

    def __len__(self) -> int:
        return self._n - self._start

    @overload
    def __getitem__(self, i: int) -> OpRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[OpRecord]: ...

    def __getitem__(self, i: int | slice) -> OpRecord | list[OpRecord]:
        base, size = self._start, self._n - self._start
        if isinstance(i, slice):
            start, stop, step = i.indices(size)
            if step == 1:
                return list(self._log.iter_records(base + stop, base + start)) if stop > start else []
            return [self._log.record_at(base + k) for k in range(start, stop, step)]
        if i < 0:
            i += size
        if not 0 <= i < size:
            raise IndexError("op record index out of range")
        return self._log.record_at(base + i)

    def __iter__(self) -> Iterator[OpRecord]:
        return self._log.iter_records(self._n, self._start)

    def since(self, start: int) -> OpRecords:
        """The view of this one's records from position ``start`` on (``records[start:]`` without making them)."""
        return OpRecords(self._log, self._n, self._start + min(max(start, 0), len(self)))

    def timings(self) -> Iterator[tuple[float, float, tuple[str, str, str]]]:
        """``(t_start, t_end, (component_id, op_kind, op_name))`` of every record in the view, in order, without
        making record objects (:meth:`OpLog.iter_timings`)."""
        return self._log.iter_timings(self._n, self._start)

    def named(self, *names: str) -> list[OpRecord]:
        """The records of the view whose op name is one of ``names``, in order; the others are never made."""
        return list(self._log.iter_named(frozenset(names), self._n, self._start))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (OpRecords, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable underneath, like a list

    def __repr__(self) -> str:
        return f"<{len(self)} op records>"
