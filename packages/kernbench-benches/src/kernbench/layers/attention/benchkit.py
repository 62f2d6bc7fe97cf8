"""Helpers the attention benches share: seeded inputs, the numerics check, and metrics for ``kernbench run``."""

from __future__ import annotations

import numpy as np

from kernbench.layers.attention.reference import attention_reference
from kernbench.layers.attention.result import AttentionResult
from kernbench.runtime.bench import BenchError

#: Largest absolute difference from numpy a bench accepts: about one float16 ulp at 1.0 (kernels compute in float32).
TOLERANCE = 1e-3


def inputs(users: int, hq: int, hkv: int, tq: int, s: int, d: int, seed: int = 0
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded random ``q (C, Hq, Tq, d)``, ``k`` and ``v`` ``(C, Hkv, S, d)`` in float16 (the same in timing and
    data mode, so both runs issue the same work)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((users, hq, tq, d)).astype(np.float16)
    k = rng.standard_normal((users, hkv, s, d)).astype(np.float16)
    v = rng.standard_normal((users, hkv, s, d)).astype(np.float16)
    return q, k, v


def check(result: AttentionResult, q, k, v, *, causal: bool, what: str) -> float:
    """The largest error against :func:`attention_reference`; raises :class:`BenchError` above the tolerance."""
    err = float(np.abs(result.out - attention_reference(q, k, v, causal=causal)).max())
    if not err <= TOLERANCE:
        raise BenchError(f"{what}: max |error| {err:.3g} against the numpy reference exceeds {TOLERANCE}")
    return err


def report(torch, result: AttentionResult, prefix: str = "") -> None:
    """Record the result as bench metrics: ``latency_ns``, ``pes_active``, IPCQ messages, KV bytes, op counts
    (``op.<kind>``) and engine occupancy (``occupancy_ns.<engine>``), each name after ``prefix``."""
    metrics = {"latency_ns": result.latency_ns, "pes_active": result.pes_active,
               "ipcq_intra_cube": result.ipcq_messages["intra_cube"],
               "ipcq_inter_cube": result.ipcq_messages["inter_cube"],
               "kv_bytes": sum(result.kv_bytes_per_cube.values())}
    metrics.update({f"op.{k}": v for k, v in result.op_counts.items()})
    metrics.update({f"occupancy_ns.{e}": u["occupancy_ns"] for e, u in result.engines.items()})
    for name, value in metrics.items():
        torch.report_metric(prefix + name, value)
