"""A transformer QKV projection on one PE: ``[S, D] @ [D, 3D]`` as one composite GEMM.

Environment: ``QKV_SEQ`` (tokens, default 128), ``QKV_DIM`` (model width, default 256).
"""

from __future__ import annotations

import numpy as np

from kernbench.benches._params import env_int
from kernbench.benches.matmul_composite import composite_kernel
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench


@bench(name="qkv-gemm", description="QKV projection [S, D] @ [D, 3D] on one PE")
def run(torch):
    """Deploy activations and the fused QKV weight on one PE and project."""
    s, d = env_int("QKV_SEQ", 128), env_int("QKV_DIM", 256)
    one = DPPolicy(num_cubes=1, num_pes=1)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((s, d)).astype(np.float16), one)
    w = torch.from_numpy((rng.standard_normal((d, 3 * d)) / np.sqrt(d)).astype(np.float16), one)
    out = torch.empty((s, 3 * d), "float16", one)
    torch.wait(torch.launch("qkv", composite_kernel("load_ref"), x, w, out))
