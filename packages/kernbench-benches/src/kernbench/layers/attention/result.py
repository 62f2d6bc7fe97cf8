"""What an attention call returns, and how its window is measured from the launches and the op log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kernbench.components.launch import LaunchResult
from kernbench.runtime.bench import summarize


@dataclass(frozen=True)
class AttentionResult:
    """The outcome of one :func:`~kernbench.layers.attention.gqa_decode` or ``gqa_prefill`` call.

    - ``out``: the attention output ``(C, Hq, Tq, d)`` float32 in data mode, None in timing mode.
    - ``latency_ns``: from the first PE entering an attention kernel to the last PE leaving one, over all the
      call's launches (one per user); deploying the tensors and reading the output back are outside it.
    - ``op_counts`` and ``engines``: as ``kernbench run --json`` reports them, over the op records of the
      launches only.
    - ``ipcq_messages``: PE_IPCQ messages sent, ``{"intra_cube": n, "inter_cube": n}``.
    - ``kv_bytes_per_cube``: ``{SIP cube index: bytes of K and V it holds}``, replicas included.
    - ``pes_active``: PEs that attended keys of their own (summed over users).
    - ``launch``: the :class:`~kernbench.components.launch.LaunchResult` of every launch, in user order.
    """

    out: np.ndarray | None
    latency_ns: float
    op_counts: dict
    engines: dict
    ipcq_messages: dict
    kv_bytes_per_cube: dict
    pes_active: int
    launch: tuple[LaunchResult, ...] = field(repr=False)


def window_ns(launches: list[LaunchResult]) -> float:
    """First PE start to last PE end over the launches' per-PE reports (ns)."""
    reports = [r for res in launches for r in res.reports.values()]
    return max(r.exec_start_ns + r.exec_ns for r in reports) - min(r.exec_start_ns for r in reports)


def ipcq_messages(records) -> dict[str, int]:
    """Count the ``ipcq_send`` records between PEs of one cube and between cubes."""
    named = getattr(records, "named", None)  # an op-log view makes only the records asked for
    sends = named("ipcq_send") if named is not None else [r for r in records if r.op_name == "ipcq_send"]
    intra = inter = 0
    for r in sends:
        if r.component_id.split(".")[:2] == r.params["peer"].split(".")[:2]:
            intra += 1
        else:
            inter += 1
    return {"intra_cube": intra, "inter_cube": inter}


def measure(launches: list[LaunchResult], records: Sequence, *, out, kv_tensors, pes_active: int) -> AttentionResult:
    """Build the result from the launches, their op records (a list, or an op-log view read at once) and the
    deployed K and V tensors."""
    summary = summarize("attention", 0, records)
    per_cube: dict[int, int] = {}
    for t in kv_tensors:
        for shard, _ in t.shards:
            per_cube[shard.cube] = per_cube.get(shard.cube, 0) + shard.nbytes
    return AttentionResult(out, window_ns(launches), summary.op_counts, summary.engines, ipcq_messages(records),
                           dict(sorted(per_cube.items())), pes_active, tuple(launches))
