"""Host side shared by every call: lay out and deploy the arrays, install the neighbour links, launch one kernel
per user, measure, read the output back, clean up."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from kernbench.ccl.install import install
from kernbench.layers.attention.result import AttentionResult, measure
from kernbench.runtime import DPPolicy

_SWAP = {"row_wise": "column_wise", "column_wise": "row_wise", "replicate": "replicate"}


def transposed(policy: DPPolicy) -> DPPolicy:
    """The policy that places a transposed copy so each PE holds the transpose of its shard."""
    return replace(policy, cube=_SWAP[policy.cube], pe=_SWAP[policy.pe])


def kv_layout(a: np.ndarray, layout: str) -> np.ndarray:
    """One user's K or V ``(Hkv, S, d)`` as the 2-D array that is deployed: ``token`` major ``(S, Hkv*d)`` or
    ``head`` major ``(Hkv*S, d)``."""
    hkv, s, d = a.shape
    if layout == "token":
        return np.ascontiguousarray(a.transpose(1, 0, 2).reshape(s, hkv * d))
    return np.ascontiguousarray(a.reshape(hkv * s, d))


def row_positions(hq: int, tq: int, s: int) -> np.ndarray:
    """Each query row's key position ``(Hq*Tq, 1)`` float32, rows in ``(query head, position)`` order."""
    return np.tile(np.arange(s - tq, s, dtype=np.float32), hq).reshape(-1, 1)


@contextlib.contextmanager
def deployed(torch) -> Iterator[list]:
    """Collect tensors created inside the block and free them (and remove installations) on the way out."""
    owned: list = []
    try:
        yield owned
    finally:
        for item in reversed(owned):
            if hasattr(item, "remove"):
                item.remove()
            elif not item.freed:
                torch.free(item)


def install_links(torch, table, owned: list) -> None:
    """Install the call's neighbour table (TCM receive rings) if it has any link; inside a process group, over
    the group's links (``extend``), so a rank can attend between its collectives."""
    if table:
        dist = getattr(torch, "distributed", None)
        grouped = dist is not None and dist.is_initialized()
        owned.append(install(torch, table, "tcm", extend=grouped))


def run_launches(torch, name: str, kernel: Callable, per_user_args: list[tuple], *, read: Callable | None,
                 kv_tensors: list, pes_active: int) -> AttentionResult:
    """Launch ``kernel`` once per user (all submitted before waiting), measure the window, read the output."""
    first = len(torch.oplog.records)
    handles = [torch.launch(f"{name}_user{u}", kernel, *args) for u, args in enumerate(per_user_args)]
    launches = [torch.wait(h) for h in handles]
    # measured before the read-back adds records of its own: the view is of the log as it is now
    result = measure(launches, torch.oplog.records.since(first), out=None, kv_tensors=kv_tensors,
                     pes_active=pes_active)
    if torch.data and read is not None:
        result = replace(result, out=read())
    return result
