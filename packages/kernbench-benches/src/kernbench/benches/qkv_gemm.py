"""A transformer QKV projection on one PE: ``[S, D] @ [D, 3D]`` as one composite GEMM.

Parameters: ``SEQ`` (``QKV_SEQ``, tokens, default 128), ``DIM`` (``QKV_DIM``, model width, default 256).
"""

from __future__ import annotations

import numpy as np

from kernbench.benches.matmul_composite import composite_kernel
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench
from kernbench.runtime.params import Param

PARAMS = (
    Param("SEQ", int, 128, "tokens (rows of X)", lo=1, hi=16384, env="QKV_SEQ"),
    Param("DIM", int, 256, "model width D (the weight is D x 3D)", lo=1, hi=4096, env="QKV_DIM"),
)


@bench(name="qkv-gemm", description="QKV projection [S, D] @ [D, 3D] on one PE", params=PARAMS)
def run(torch, p):
    """Deploy activations and the fused QKV weight on one PE and project."""
    s, d = p.SEQ, p.DIM
    one = DPPolicy(num_cubes=1, num_pes=1)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((s, d)).astype(np.float16), one)
    w = torch.from_numpy((rng.standard_normal((d, 3 * d)) / np.sqrt(d)).astype(np.float16), one)
    out = torch.empty((s, 3 * d), "float16", one)
    torch.wait(torch.launch("qkv", composite_kernel("load_ref"), x, w, out))
