"""Tensor-parallel MLP ``Z = relu(X W1) W2`` across every SIP (Megatron column- then row-parallel).

Parameters: ``TOKENS`` (``TP_TOKENS``, rows of X, default 64), ``HIDDEN`` (``TP_HIDDEN``, K,
default 64), ``FFN`` (``TP_FFN``, N, default 96; a multiple of the SIP count). Each rank holds X, its column
block of W1 and row block of W2 on PE 0 of its first cube; the row-parallel layer ends in
one all-reduce. With ``--data`` every rank's Z is checked against numpy. Reported metric:
``allreduce_ns`` of that all-reduce.
"""

from __future__ import annotations

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.layers.tp import TP_POLICY, ParallelMLP
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param


def mlp_reference(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """relu(X W1) W2 in f32."""
    return np.maximum(x.astype(np.float32) @ w1.astype(np.float32), 0) @ w2.astype(np.float32)


PARAMS = (
    Param("TOKENS", int, 64, "rows of X", lo=1, hi=4096, env="TP_TOKENS"),
    Param("HIDDEN", int, 64, "model width K (columns of X)", lo=1, hi=4096, env="TP_HIDDEN"),
    Param("FFN", int, 96, "feed-forward width N, split over the ranks (a multiple of the SIP count)", lo=1,
          hi=16384, env="TP_FFN"),
)


@bench(name="tp-mlp", description="tensor-parallel MLP over every SIP, one all-reduce", params=PARAMS)
def run(torch, p):
    """Spawn one rank per SIP, run the parallel MLP, verify against numpy in data mode."""
    m, k, n = p.TOKENS, p.HIDDEN, p.FFN
    world = torch.spec.system.sips.count
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((m, k)) * 0.5).astype(np.float16)
    w1 = (rng.standard_normal((k, n)) * 0.2).astype(np.float16)
    w2 = (rng.standard_normal((n, k)) * 0.2).astype(np.float16)
    outputs = {}

    def worker(rank: int) -> None:
        torch.distributed.init_process_group(backend="ahbm")
        z = ParallelMLP(torch, w1, w2, activation="relu")(torch.from_numpy(x, TP_POLICY))
        if torch.data:
            outputs[rank] = torch.peek(z)

    torch.multiprocessing.spawn(worker, nprocs=world)
    torch.report_metric("allreduce_ns", collective_span_ns([res for _, res in torch.distributed.results]))
    if torch.data:
        want = mlp_reference(x, w1, w2)
        for rank, got in outputs.items():
            err = float(np.abs(got.astype(np.float32) - want).max())
            if err > 5e-2:
                raise BenchError(f"tp-mlp: rank {rank} differs from numpy by {err:.3g}")
