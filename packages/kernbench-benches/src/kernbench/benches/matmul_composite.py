"""One PE multiplies two matrices with a single composite command (tiled, pipelined).

Environment: ``MATMUL_M``, ``MATMUL_K``, ``MATMUL_N`` (default 512 each), ``MATMUL_DTYPE``
(``float16`` | ``float32``, default ``float16``), ``MATMUL_VARIANT`` (operand staging:
``ref_ref`` streams A and B from HBM, ``load_ref`` loads A first, ``load_load`` loads both;
default ``ref_ref``). The output is written to HBM tile by tile.
"""

from __future__ import annotations

import numpy as np

from kernbench.benches._params import env_choice, env_int
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench

VARIANTS = ("ref_ref", "load_ref", "load_load")


def composite_kernel(variant: str):
    """A kernel issuing one composite GEMM with the given operand staging."""
    def kernel(tl, a, b, c):
        aa = a if variant == "ref_ref" else tl.load(a)
        bb = tl.load(b) if variant == "load_load" else b
        tl.wait(tl.composite(aa, bb, c))
    return kernel


@bench(name="matmul-composite", description="composite-command GEMM on one PE (MATMUL_M/K/N/DTYPE/VARIANT)")
def run(torch):
    """Deploy A and B on PE 0 of cube 0 and run one composite GEMM."""
    m, k, n = env_int("MATMUL_M", 512), env_int("MATMUL_K", 512), env_int("MATMUL_N", 512)
    dtype = env_choice("MATMUL_DTYPE", "float16", ("float16", "float32"))
    variant = env_choice("MATMUL_VARIANT", "ref_ref", VARIANTS)
    one = DPPolicy(num_cubes=1, num_pes=1)
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(dtype), one)
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(dtype), one)
    c = torch.empty((m, n), dtype, one)
    torch.wait(torch.launch("matmul", composite_kernel(variant), a, b, c))
