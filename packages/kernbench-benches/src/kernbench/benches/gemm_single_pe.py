"""One PE multiplies two matrices with blocking ``tl.load`` + ``tl.dot`` + ``tl.store``.

Environment: ``GEMM_M``, ``GEMM_K``, ``GEMM_N`` (default 128 each); f16 inputs, f32 output.
"""

from __future__ import annotations

import numpy as np

from kernbench.benches._params import env_int
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench


def gemm_kernel(tl, a, b, c):
    """C = A @ B with whole operands loaded into the TCM."""
    tl.store(c, tl.dot(tl.load(a), tl.load(b)))


@bench(name="gemm-single-pe", description="blocking load/dot/store GEMM on one PE")
def run(torch):
    """Deploy A and B on PE 0 of cube 0 and run the GEMM there."""
    m, k, n = env_int("GEMM_M", 128), env_int("GEMM_K", 128), env_int("GEMM_N", 128)
    rng = np.random.default_rng(0)
    one = DPPolicy(num_cubes=1, num_pes=1)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float16), one)
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float16), one)
    c = torch.empty((m, n), "float32", one)
    torch.wait(torch.launch("gemm", gemm_kernel, a, b, c))
