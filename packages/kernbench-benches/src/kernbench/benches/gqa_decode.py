"""Fused GQA decode across PEs and cubes (``kernbench.layers.attention.gqa_decode``).

Parameters (``-p NAME=VALUE``, or the environment variable ``GQA_NAME``):
``GQA_PARTITION`` (``single_pe``, ``cube_sp_pe_tp``, ``cube_repl_pe_tp``,
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

from kernbench.layers.attention import PARTITIONS, VARIANTS, gqa_decode
from kernbench.layers.attention.benchkit import check, inputs, report
from kernbench.runtime.bench import bench
from kernbench.runtime.params import Param

PARAMS = (
    Param("PARTITION", str, "cube_sp_pe_sp", "how KV and work are split over cubes and PEs", choices=PARTITIONS,
          env="GQA_PARTITION"),
    Param("USERS", int, 1, "users C (batch), each on its own cube group", lo=1, hi=32, env="GQA_USERS"),
    Param("PES", int, 4, "PEs per cube", lo=1, hi=8, env="GQA_PES"),
    Param("CUBES", int, 0, "cubes per user (0: 2, or 1 for single_pe and for short with an odd HKV)", lo=0, hi=32,
          env="GQA_CUBES"),
    Param("SKV", int, 256, "keys per head S (context length)", lo=1, hi=1 << 20, env="GQA_SKV"),
    Param("G", int, 8, "query heads per KV head", lo=1, hi=64, env="GQA_G"),
    Param("HKV", int, 1, "KV heads", lo=1, hi=64, env="GQA_HKV"),
    Param("D", int, 64, "head dimension d", lo=1, hi=256, env="GQA_D"),
    Param("VARIANT", str, "opt2", "the local flash-decode loop", choices=VARIANTS, env="GQA_VARIANT"),
)


#: What ``kernbench run`` prints beside the metrics (the header's latency is the whole op log, deployment included).
METRICS = {"latency_ns": "the bench's own window: first PE start to last PE end of the attention launches"}


@bench(name="gqa-decode", description="fused GQA decode over PEs and cubes, six partitionings", params=PARAMS,
       metrics=METRICS)
def run(torch, p):
    """Decode one token per user in the chosen partitioning; verify in data mode; report the window."""
    partition = p.PARTITION
    users, pes = p.USERS, p.PES
    s, g, hkv, d = p.SKV, p.G, p.HKV, p.D
    whole_heads = partition == "single_pe" or (partition == "short" and hkv % 2)
    cubes = p.CUBES or (1 if whole_heads else 2)
    variant = p.VARIANT
    q, k, v = inputs(users, g * hkv, hkv, 1, s, d)
    result = gqa_decode(torch, q, k, v, partition=partition, pes=pes, cubes=cubes, variant=variant)
    report(torch, result)
    if torch.data:
        check(result, q, k, v, causal=False, what=f"gqa-decode {partition} {variant}")
