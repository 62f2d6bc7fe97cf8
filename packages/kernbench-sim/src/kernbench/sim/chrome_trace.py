"""Export the op log as Chrome Trace Event JSON (viewable in Perfetto or chrome://tracing).

Layout of the trace:

* one *process* per hardware owner: a PE (``sip0.cube0.pe0`` for the PE
  blocks ``sip0.cube0.pe0.pe_*``), a cube (``sip0.cube1`` for its HBM
  controllers, SRAM, routers, M_CPU) or an IO die (``sip0.io0``); ids outside
  that hierarchy (``host``) are their own process;
* one *thread* per engine inside it, named by the rest of the id
  (``pe_gemm``, ``hbm_ctrl.pe0``, ``pcie_ep``);
* every record is a complete event (``"ph": "X"``) named by ``op_name`` and
  categorised by ``op_kind``.

The simulator counts nanoseconds; the trace format counts microseconds, so
``ts`` and ``dur`` are ``ns / 1000`` and ``displayTimeUnit`` is ``"ns"``.
Process and thread ids are assigned in order of first appearance after the
records are sorted by ``(t_start, component_id)`` (a stable sort), so the same
op log always yields the same JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from kernbench.sim.oplog import OpRecord
from kernbench.topology import naming as nm

__all__ = ["json_safe", "split_component", "to_chrome_trace", "write_chrome_trace"]

def split_component(component_id: str) -> tuple[str, str]:
    """Split a node id into ``(process, engine)`` names (see :func:`kernbench.topology.naming.owner_and_unit`)."""
    return nm.owner_and_unit(component_id)


def json_safe(value: Any) -> Any:
    """A JSON-serialisable rendering of an op parameter.

    Arrays become ``{"shape": [...], "dtype": "..."}``, numpy scalars plain
    numbers, tuples/sets lists, mapping keys strings, non-finite floats strings;
    anything else unknown becomes its ``str``.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((json_safe(v) for v in value), key=repr)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        if shape == () and hasattr(value, "item"):  # numpy scalar or 0-d array
            return json_safe(value.item())
        return {"shape": [int(d) for d in shape], "dtype": str(dtype)}
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)


def to_chrome_trace(records: Iterable[OpRecord]) -> dict[str, Any]:
    """The Chrome Trace Event document of ``records``: metadata events first, then one ``X`` event per record."""
    ordered = sorted(records, key=lambda r: (r.t_start, r.component_id))
    pids: dict[str, int] = {}
    tids: dict[str, dict[str, int]] = {}
    events: list[dict[str, Any]] = []
    for r in ordered:
        proc, engine = split_component(r.component_id)
        pid = pids.get(proc)
        if pid is None:
            pid = pids[proc] = len(pids) + 1
            tids[proc] = {}
        threads = tids[proc]
        tid = threads.get(engine)
        if tid is None:
            tid = threads[engine] = len(threads) + 1
        events.append({
            "name": r.op_name,
            "cat": r.op_kind,
            "ph": "X",
            "ts": r.t_start / 1000.0,
            "dur": (r.t_end - r.t_start) / 1000.0,
            "pid": pid,
            "tid": tid,
            "args": json_safe(r.params),
        })
    meta: list[dict[str, Any]] = []
    for proc, pid in pids.items():
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": proc}})
        for engine, tid in tids[proc].items():
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": engine}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns"}


def write_chrome_trace(records: Iterable[OpRecord], path: str | PathLike[str]) -> Path:
    """Write :func:`to_chrome_trace` of ``records`` to ``path`` (parents created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        json.dump(to_chrome_trace(records), fh, allow_nan=False)
        fh.write("\n")
    return out
