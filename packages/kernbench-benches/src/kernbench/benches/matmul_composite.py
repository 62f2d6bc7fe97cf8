"""One PE multiplies two matrices with a single composite command (tiled, pipelined).

Parameters (``-p NAME=VALUE`` or the environment variable): ``M``, ``K``, ``N`` (``MATMUL_M``,
``MATMUL_K``, ``MATMUL_N``; default 512 each), ``DTYPE`` (``MATMUL_DTYPE``: ``float16`` |
``float32``, default ``float16``), ``VARIANT`` (``MATMUL_VARIANT``, operand staging: ``ref_ref``
streams A and B from HBM, ``load_ref`` loads A first, ``load_load`` loads both; default
``ref_ref``). The output is written to HBM tile by tile.
"""

from __future__ import annotations

import numpy as np

from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import bench
from kernbench.runtime.params import Param

VARIANTS = ("ref_ref", "load_ref", "load_load")


def composite_kernel(variant: str):
    """A kernel issuing one composite GEMM with the given operand staging."""
    def kernel(tl, a, b, c):
        aa = a if variant == "ref_ref" else tl.load(a)
        bb = tl.load(b) if variant == "load_load" else b
        tl.wait(tl.composite(aa, bb, c))
    return kernel


PARAMS = (
    Param("M", int, 512, "rows of A and C", lo=1, hi=4096, env="MATMUL_M", unit="elements"),
    Param("K", int, 512, "columns of A, rows of B", lo=1, hi=4096, env="MATMUL_K", unit="elements"),
    Param("N", int, 512, "columns of B and C", lo=1, hi=4096, env="MATMUL_N", unit="elements"),
    Param("DTYPE", str, "float16", "element type of A, B and C", choices=("float16", "float32"), env="MATMUL_DTYPE"),
    Param("VARIANT", str, "ref_ref", "operand staging: stream from HBM (ref) or load into TCM first (load)",
          choices=VARIANTS, env="MATMUL_VARIANT"),
)


@bench(name="matmul-composite", description="composite-command GEMM on one PE", params=PARAMS)
def run(torch, p):
    """Deploy A and B on PE 0 of cube 0 and run one composite GEMM."""
    m, k, n = p.M, p.K, p.N
    dtype, variant = p.DTYPE, p.VARIANT
    one = DPPolicy(num_cubes=1, num_pes=1)
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(dtype), one)
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(dtype), one)
    c = torch.empty((m, n), dtype, one)
    torch.wait(torch.launch("matmul", composite_kernel(variant), a, b, c))
