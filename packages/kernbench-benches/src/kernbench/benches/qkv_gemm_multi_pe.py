"""The QKV projection sharded over PEs and cubes: tokens split row-wise, the weight replicated.

Environment: ``QKV_SEQ`` (tokens, default 1024), ``QKV_DIM`` (default 256), ``QKV_CUBES``
(default 4), ``QKV_PES`` (PEs per cube, default 8). Every PE projects its own rows.
"""

from __future__ import annotations

import numpy as np

from kernbench.benches._params import env_int
from kernbench.benches.matmul_composite import composite_kernel
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench


@bench(name="qkv-gemm-multi-pe", description="QKV projection sharded row-wise over cubes and PEs")
def run(torch):
    """Shard X over QKV_CUBES x QKV_PES PEs, replicate W, project on every PE at once."""
    s, d = env_int("QKV_SEQ", 1024), env_int("QKV_DIM", 256)
    cubes, pes = env_int("QKV_CUBES", 4), env_int("QKV_PES", 8)
    rows = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=cubes, num_pes=pes)
    everywhere = DPPolicy(num_cubes=cubes, num_pes=pes)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((s, d)).astype(np.float16), rows)
    w = torch.from_numpy((rng.standard_normal((d, 3 * d)) / np.sqrt(d)).astype(np.float16), everywhere)
    out = torch.empty((s, 3 * d), "float16", rows)
    torch.wait(torch.launch("qkv", composite_kernel("load_ref"), x, w, out))
