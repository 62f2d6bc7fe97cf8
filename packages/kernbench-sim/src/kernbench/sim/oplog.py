"""The operation log: one record per data operation a component performed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    """Append-only log; :attr:`records` is stably sorted by ``t_start``."""

    __slots__ = ("_records", "_sorted")

    def __init__(self) -> None:
        self._records: list[OpRecord] = []
        self._sorted = True

    def record(self, t_start: float, t_end: float, component_id: str, op_kind: str, op_name: str,
               params: dict[str, Any]) -> None:
        """Append a finished operation."""
        if self._records and t_start < self._records[-1].t_start:
            self._sorted = False
        self._records.append(OpRecord(t_start, t_end, component_id, op_kind, op_name, params))

    @property
    def records(self) -> list[OpRecord]:
        """All records in ``t_start`` order (insertion order among equal starts)."""
        if not self._sorted:
            self._records.sort(key=lambda r: r.t_start)
            self._sorted = True
        return self._records

    def __len__(self) -> int:
        return len(self._records)
