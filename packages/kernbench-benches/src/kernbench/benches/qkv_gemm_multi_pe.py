"""The QKV projection sharded over PEs and cubes: tokens split row-wise, the weight replicated.

Parameters: ``SEQ`` (``QKV_SEQ``, tokens, default 1024), ``DIM`` (``QKV_DIM``, default 256),
``CUBES`` (``QKV_CUBES``, default 4), ``PES`` (``QKV_PES``, PEs per cube, default 8). Every PE projects its own rows.
"""

from __future__ import annotations

import numpy as np

from kernbench.benches.matmul_composite import composite_kernel
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench
from kernbench.runtime.params import Param

PARAMS = (
    Param("SEQ", int, 1024, "tokens (rows of X, split over every PE)", lo=1, hi=65536, env="QKV_SEQ"),
    Param("DIM", int, 256, "model width D (the weight is D x 3D, on every PE)", lo=1, hi=4096, env="QKV_DIM"),
    Param("CUBES", int, 4, "cubes the tokens are split over", lo=1, hi=32, env="QKV_CUBES"),
    Param("PES", int, 8, "PEs per cube the tokens are split over", lo=1, hi=32, env="QKV_PES"),
)


@bench(name="qkv-gemm-multi-pe", description="QKV projection sharded row-wise over cubes and PEs", params=PARAMS)
def run(torch, p):
    """Shard X over CUBES x PES PEs, replicate W, project on every PE at once."""
    s, d = p.SEQ, p.DIM
    cubes, pes = p.CUBES, p.PES
    rows = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=cubes, num_pes=pes)
    everywhere = DPPolicy(num_cubes=cubes, num_pes=pes)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((s, d)).astype(np.float16), rows)
    w = torch.from_numpy((rng.standard_normal((d, 3 * d)) / np.sqrt(d)).astype(np.float16), everywhere)
    out = torch.empty((s, 3 * d), "float16", rows)
    torch.wait(torch.launch("qkv", composite_kernel("load_ref"), x, w, out))
