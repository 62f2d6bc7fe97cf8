"""Fused GQA decode across PEs and cubes (``kernbench.benches.attention.gqa_decode``).

Environment: ``GQA_PARTITION`` (``single_pe``, ``cube_sp_pe_tp``, ``cube_repl_pe_tp``,
``cube_repl_pe_sp``, ``cube_sp_pe_sp`` or ``short``; default ``cube_sp_pe_sp``), ``GQA_USERS``
(users C, default 1), ``GQA_PES`` (PEs per cube, default 4), ``GQA_CUBES`` (cubes per user,
default 2; 1 for ``single_pe``, and for ``short`` with an odd ``GQA_HKV``), ``GQA_SKV`` (keys S,
default 256), ``GQA_G`` (query heads per KV head, default 8), ``GQA_HKV`` (KV heads, default 1),
``GQA_D`` (head dimension, default 64), ``GQA_VARIANT`` (local loop ``opt1``, ``opt2`` or
``opt3``; default ``opt2``). Inputs are seeded random float16.
With ``--data`` the output is checked against ``softmax(Q Kᵀ / √d) V`` in numpy. Metrics:
``latency_ns`` (first PE start to last PE end of the attention launches), ``pes_active``,
``ipcq_intra_cube``, ``ipcq_inter_cube``, ``kv_bytes``, ``op.*`` and ``occupancy_ns.*``.
"""

from __future__ import annotations

from kernbench.benches._params import env_choice, env_int
from kernbench.benches.attention import PARTITIONS, VARIANTS, gqa_decode
from kernbench.benches.attention.benchkit import check, inputs, report
from kernbench.runtime.bench import bench


@bench(name="gqa-decode", description="fused GQA decode over PEs and cubes, six partitionings (GQA_* env)")
def run(torch):
    """Decode one token per user in the chosen partitioning; verify in data mode; report the window."""
    partition = env_choice("GQA_PARTITION", "cube_sp_pe_sp", PARTITIONS)
    users, pes = env_int("GQA_USERS", 1), env_int("GQA_PES", 4)
    s, g, hkv, d = env_int("GQA_SKV", 256), env_int("GQA_G", 8), env_int("GQA_HKV", 1), env_int("GQA_D", 64)
    whole_heads = partition == "single_pe" or (partition == "short" and hkv % 2)
    cubes = env_int("GQA_CUBES", 1 if whole_heads else 2)
    variant = env_choice("GQA_VARIANT", "opt2", VARIANTS)
    q, k, v = inputs(users, g * hkv, hkv, 1, s, d)
    result = gqa_decode(torch, q, k, v, partition=partition, pes=pes, cubes=cubes, variant=variant)
    report(torch, result)
    if torch.data:
        check(result, q, k, v, causal=False, what=f"gqa-decode {partition} {variant}")
