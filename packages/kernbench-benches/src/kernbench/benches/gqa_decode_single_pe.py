"""Fused GQA flash-decode attention on one PE.

Parameters (``-p NAME=VALUE`` or the environment variable): ``SKV`` (``GQA_SKV``, context length,
default 1024), ``G`` (``GQA_G``, query heads per KV head, default 8), ``DHEAD`` (``GQA_DHEAD``, head
dimension, default 64), ``TILE`` (``GQA_TILE``, K/V rows per tile, default 64), ``VARIANT``
(``GQA_VARIANT``: ``opt1`` primitive ops per tile, ``opt2`` two composites per tile,
``opt3`` software-pipelined; default ``opt3``; the loop is the attention layer's,
:func:`kernbench.layers.attention.local.flash_decode`). Q is ``[G, d]`` f16, K and V ``[S_kv, d]`` f16
(opt2 reads K from a transposed ``[d, S_kv]`` copy), the output ``[G, d]`` f32.
With ``--data`` the bench checks the output against ``softmax(Q K^T / sqrt(d)) V`` in numpy.
"""

from __future__ import annotations

import math

import numpy as np

from kernbench.layers.attention.local import K_TRANSPOSED, flash_decode
from kernbench.layers.attention.tree_plan import VARIANTS
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(Q K^T / sqrt(d)) V in f32."""
    s = q.astype(np.float32) @ k.astype(np.float32).T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float32)


PARAMS = (
    Param("SKV", int, 1024, "context length (keys)", lo=1, hi=1 << 20, env="GQA_SKV"),
    Param("G", int, 8, "query heads per KV head", lo=1, hi=64, env="GQA_G"),
    Param("DHEAD", int, 64, "head dimension d", lo=1, hi=256, env="GQA_DHEAD"),
    Param("TILE", int, 64, "K/V rows per tile", lo=1, hi=4096, env="GQA_TILE"),
    Param("VARIANT", str, "opt3", "opt1 primitive ops per tile, opt2 two composites per tile, opt3 software-pipelined",
          choices=VARIANTS, env="GQA_VARIANT"),
)


@bench(name="gqa-decode-single-pe", description="fused GQA flash-decode attention on one PE", params=PARAMS)
def run(torch, p):
    """Deploy Q, K, V on one PE, run the chosen decode variant, verify in data mode."""
    s_kv, g, d = p.SKV, p.G, p.DHEAD
    tile = p.TILE
    variant = p.VARIANT
    if variant in ("opt2", "opt3") and s_kv % tile:
        raise BenchError(f"SKV={s_kv} must be a multiple of TILE={tile} for {variant}")
    one = DPPolicy(num_cubes=1, num_pes=1)
    rng = np.random.default_rng(0)
    q_np = rng.standard_normal((g, d)).astype(np.float16)
    k_np = rng.standard_normal((s_kv, d)).astype(np.float16) if torch.data else np.zeros((s_kv, d), np.float16)
    v_np = rng.standard_normal((s_kv, d)).astype(np.float16) if torch.data else np.zeros((s_kv, d), np.float16)
    k_layout = np.ascontiguousarray(k_np.T) if variant in K_TRANSPOSED else k_np
    q, k, v = (torch.from_numpy(x, one) for x in (q_np, k_layout, v_np))
    out = torch.empty((g, d), "float32", one)
    scale = 1.0 / math.sqrt(d)
    torch.wait(torch.launch("gqa-decode", lambda tl, q, k, v, o: flash_decode(tl, q, k, v, o, variant=variant,
                                                                              tile=tile, scale=scale), q, k, v, out))
    if torch.data:
        got, want = torch.peek(out), attention_reference(q_np, k_np, v_np)
        err = float(np.abs(got - want).max())
        if err > 2e-2:
            raise BenchError(f"gqa-decode-single-pe {variant}: max |error| {err:.3g} against the numpy reference")
