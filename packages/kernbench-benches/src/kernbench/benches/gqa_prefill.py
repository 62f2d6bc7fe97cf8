"""Fused causal GQA prefill across PEs and cubes (``kernbench.benches.attention.gqa_prefill``).

Environment: ``GQA_MODE`` (``short`` or ``ring``; default ``ring``), ``GQA_USERS`` (users C,
default 1), ``GQA_PES`` (PEs per cube, default 1), ``GQA_CUBES`` (cubes per user, default 4 for ``ring``
and 1 for ``short``),
``GQA_TQ`` (query rows per head, default 16), ``GQA_SKV`` (keys S, default 64). Eight query
heads share one KV head (G = 8), d = 64. Inputs are seeded random float16; the mask is causal,
aligned bottom-right (query row i at position S - Tq + i). With ``--data`` the output is checked
against numpy. Metrics as for ``gqa-decode``: ``latency_ns``, ``pes_active``,
``ipcq_intra_cube``, ``ipcq_inter_cube``, ``kv_bytes``, ``op.*`` and ``occupancy_ns.*``.
"""

from __future__ import annotations

from kernbench.benches._params import env_choice, env_int
from kernbench.benches.attention import MODES, gqa_prefill
from kernbench.benches.attention.benchkit import check, inputs, report
from kernbench.runtime.bench import bench


@bench(name="gqa-prefill", description="fused causal GQA prefill, short or ring mode (GQA_* env)")
def run(torch):
    """Prefill ``GQA_TQ`` rows per head for each user; verify in data mode; report the window."""
    mode = env_choice("GQA_MODE", "ring", MODES)
    users, pes = env_int("GQA_USERS", 1), env_int("GQA_PES", 1)
    cubes = env_int("GQA_CUBES", 4 if mode == "ring" else 1)  # short: the one KV head stays on one cube
    tq, s = env_int("GQA_TQ", 16), env_int("GQA_SKV", 64)
    q, k, v = inputs(users, 8, 1, tq, s, 64)
    result = gqa_prefill(torch, q, k, v, mode=mode, pes=pes, cubes=cubes)
    report(torch, result)
    if torch.data:
        check(result, q, k, v, causal=True, what=f"gqa-prefill {mode}")
