"""Fused causal GQA prefill across PEs and cubes (``kernbench.layers.attention.gqa_prefill``).

Parameters (``-p NAME=VALUE``, or the environment variable ``GQA_NAME``):
``GQA_MODE`` (``short`` or ``ring``; default ``ring``), ``GQA_USERS`` (users C,
default 1), ``GQA_PES`` (PEs per cube, default 1), ``GQA_CUBES`` (cubes per user, default 4 for ``ring``
and 1 for ``short``),
``GQA_TQ`` (query rows per head, default 16), ``GQA_SKV`` (keys S, default 64). Eight query
heads share one KV head (G = 8), d = 64. Inputs are seeded random float16; the mask is causal,
aligned bottom-right (query row i at position S - Tq + i). With ``--data`` the output is checked
against numpy. Metrics as for ``gqa-decode``: ``latency_ns``, ``pes_active``,
``ipcq_intra_cube``, ``ipcq_inter_cube``, ``kv_bytes``, ``op.*`` and ``occupancy_ns.*``.
"""

from __future__ import annotations

from kernbench.layers.attention import MODES, gqa_prefill
from kernbench.layers.attention.benchkit import check, inputs, report
from kernbench.runtime.bench import bench
from kernbench.runtime.params import Param

PARAMS = (
    Param("MODE", str, "ring", "short (heads over cubes) or ring (KV blocks rotate round a cube ring)", choices=MODES,
          env="GQA_MODE"),
    Param("USERS", int, 1, "users C (batch)", lo=1, hi=32, env="GQA_USERS"),
    Param("PES", int, 1, "PEs per cube", lo=1, hi=8, env="GQA_PES"),
    Param("CUBES", int, 0, "cubes per user (0: 4 for ring, 1 for short)", lo=0, hi=32, env="GQA_CUBES"),
    Param("TQ", int, 16, "query rows per head", lo=1, hi=1 << 16, env="GQA_TQ"),
    Param("SKV", int, 64, "keys per head S", lo=1, hi=1 << 20, env="GQA_SKV"),
)


@bench(name="gqa-prefill", description="fused causal GQA prefill, short or ring mode", params=PARAMS)
def run(torch, p):
    """Prefill ``TQ`` rows per head for each user; verify in data mode; report the window."""
    mode = p.MODE
    users, pes = p.USERS, p.PES
    cubes = p.CUBES or (4 if mode == "ring" else 1)  # short: the one KV head stays on one cube
    tq, s = p.TQ, p.SKV
    q, k, v = inputs(users, 8, 1, tq, s, 64)
    result = gqa_prefill(torch, q, k, v, mode=mode, pes=pes, cubes=cubes)
    report(torch, result)
    if torch.data:
        check(result, q, k, v, causal=True, what=f"gqa-prefill {mode}")
