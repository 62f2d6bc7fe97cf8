"""One PE multiplies two matrices with blocking ``tl.load`` + ``tl.dot`` + ``tl.store``.

Parameters (``-p NAME=VALUE`` or the environment variable): ``M``, ``K``, ``N`` (``GEMM_M``,
``GEMM_K``, ``GEMM_N``; default 128 each); f16 inputs, f32 output.
"""

from __future__ import annotations

import numpy as np

from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench
from kernbench.runtime.params import Param


def gemm_kernel(tl, a, b, c):
    """C = A @ B with whole operands loaded into the TCM."""
    tl.store(c, tl.dot(tl.load(a), tl.load(b)))


PARAMS = (
    Param("M", int, 128, "rows of A and C", lo=1, hi=2048, env="GEMM_M", unit="elements"),
    Param("K", int, 128, "columns of A, rows of B", lo=1, hi=2048, env="GEMM_K", unit="elements"),
    Param("N", int, 128, "columns of B and C", lo=1, hi=2048, env="GEMM_N", unit="elements"),
)


@bench(name="gemm-single-pe", description="blocking load/dot/store GEMM on one PE", params=PARAMS)
def run(torch, p):
    """Deploy A and B on PE 0 of cube 0 and run the GEMM there."""
    m, k, n = p.M, p.K, p.N
    rng = np.random.default_rng(0)
    one = DPPolicy(num_cubes=1, num_pes=1)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float16), one)
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float16), one)
    c = torch.empty((m, n), "float32", one)
    torch.wait(torch.launch("gemm", gemm_kernel, a, b, c))
