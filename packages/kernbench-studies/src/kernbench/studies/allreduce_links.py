"""The per-link record of an all-reduce study point: the links that carried bytes, as one compact JSON text.

A study record holds JSON scalars only (:mod:`kernbench.studies.base`), so the links of a run travel as
one string value, ``links``: a JSON array of rows ``[src, dst, kind, bytes, packets, busy_ns]``, one per directed
link that carried payload (``bytes > 0``), in graph edge order. Bytes and packets count what the fabric model put
on the link (:mod:`kernbench.sim.links`); ``busy_ns`` is the time the link was held, ns. The run window
(``window_ns``: time 0 to the end of the simulation) is a separate scalar of the record, and a link's
utilisation is ``busy_ns / window_ns``, as in a links file. Links that carried only control messages (0 bytes,
0 busy time) and idle links are left out: a heatmap draws them grey either way.

The rows come from ``torch.link_stats()`` of the point's own runtime, so they are the numbers
``kernbench run --links`` would write for the same configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from kernbench.studies.base import SchemaError
from kernbench.topology.heatmap import HIDDEN_KINDS

#: Edge kinds the system- and SIP-scope heatmaps do not draw: the command sideband (0 bytes by the fabric model)
#: and the links between a PE's own blocks, which only the cube scope shows (:mod:`kernbench.topology.heatmap`).
NOT_DRAWN_ABOVE_CUBE = HIDDEN_KINDS | frozenset({"pe_internal"})


class LinkCounters(Protocol):
    """What :func:`encode` reads of one link: an item of ``torch.link_stats()``
    (:class:`kernbench.sim.links.LinkRecord`)."""

    src: str
    dst: str
    kind: str
    bytes: int
    packets: int
    busy_ns: float


@dataclass(frozen=True)
class LinkRow:
    """One link that carried payload: ``src → dst`` of edge ``kind``; ``bytes`` (B) and ``packets`` that crossed
    it, ``busy_ns`` (ns) it was held."""

    src: str
    dst: str
    kind: str
    bytes: int
    packets: int
    busy_ns: float

    def utilisation(self, window_ns: float) -> float:
        """Busy time as a share of the run window ``window_ns`` (0..1)."""
        return self.busy_ns / window_ns if window_ns > 0 else 0.0


def encode(records: Iterable[LinkCounters]) -> str:
    """The compact JSON text of the links among ``records`` that carried bytes, in the order given."""
    rows = [[r.src, r.dst, r.kind, r.bytes, r.packets, r.busy_ns] for r in records if r.bytes > 0]
    return json.dumps(rows, separators=(",", ":"), allow_nan=False)


def decode(text: object, where: str = "links record") -> tuple[LinkRow, ...]:
    """The rows of a ``links`` value (:class:`SchemaError` naming the first bad row)."""
    def bad(what: str) -> SchemaError:
        return SchemaError(f"{where}: {what}; regenerate it with `kernbench study allreduce`")

    if not isinstance(text, str):
        raise bad(f"expected a JSON text, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise bad(f"not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise bad(f"expected a JSON array of rows, got {type(data).__name__}")
    rows = []
    for i, row in enumerate(data):
        ok = (isinstance(row, list) and len(row) == 6 and all(isinstance(v, str) and v for v in row[:3])
              and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in row[3:5])
              and isinstance(row[5], int | float) and not isinstance(row[5], bool) and math.isfinite(row[5])
              and row[5] > 0)
        if not ok:
            raise bad(f"row {i} is {row!r}; expected [src, dst, kind, bytes > 0, packets > 0, busy_ns > 0]")
        rows.append(LinkRow(row[0], row[1], row[2], row[3], row[4], float(row[5])))
    if len({(r.src, r.dst) for r in rows}) != len(rows):
        raise bad("a link is listed twice")
    return tuple(rows)


def busiest(rows: Iterable[LinkRow], window_ns: float, drawn_only: bool = False) -> LinkRow | None:
    """The busiest row (highest utilisation over ``window_ns``; the first in order on a tie, as the heatmap picks
    it), among the links a system-scope heatmap draws when ``drawn_only``; None when there is none."""
    best, best_u = None, 0.0
    for r in rows:
        if drawn_only and r.kind in NOT_DRAWN_ABOVE_CUBE:
            continue
        u = r.utilisation(window_ns)
        if best is None or u > best_u:
            best, best_u = r, u
    return best


def summary(rows: tuple[LinkRow, ...], window_ns: float) -> dict[str, int | float | str]:
    """The scalars a study record keeps beside the rows: links that carried bytes, their bytes summed (B), and
    the run's busiest link (``src → dst``) with its utilisation (0..1)."""
    top = busiest(rows, window_ns)
    return {"links_used": len(rows), "link_bytes": sum(r.bytes for r in rows),
            "busiest_link": f"{top.src} → {top.dst}" if top else "",
            "busiest_utilisation": top.utilisation(window_ns) if top else 0.0}
