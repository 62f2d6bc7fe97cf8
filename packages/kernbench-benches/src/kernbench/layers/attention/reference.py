"""The numpy reference every kernel is checked against: ``softmax(Q Kᵀ / √d [+ causal mask]) V`` in float32."""

from __future__ import annotations

import math

import numpy as np


def causal_visible(tq: int, s: int) -> np.ndarray:
    """Boolean ``(tq, s)``: query row ``i`` sees key ``j`` when ``j <= s - tq + i`` (bottom-right alignment,
    as with a KV cache and in FlashAttention >= 2.1; ``tq == s`` gives the usual lower triangle)."""
    return np.arange(s)[None, :] <= (s - tq + np.arange(tq))[:, None]


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = False) -> np.ndarray:
    """Grouped-query attention in float32.

    ``q`` is ``(C, Hq, Tq, d)``, ``k`` and ``v`` are ``(C, Hkv, S, d)``;
    query head ``i`` attends with KV head ``i // (Hq // Hkv)`` (PyTorch's
    ``repeat_interleave`` grouping). Returns ``(C, Hq, Tq, d)`` float32.
    """
    _, hq, tq, d = q.shape
    hkv = k.shape[1]
    g = hq // hkv
    kf = np.repeat(k.astype(np.float32), g, axis=1)
    vf = np.repeat(v.astype(np.float32), g, axis=1)
    s = np.einsum("chtd,chsd->chts", q.astype(np.float32), kf) / np.float32(math.sqrt(d))
    if causal:
        s = np.where(causal_visible(tq, k.shape[2]), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("chts,chsd->chtd", p / p.sum(axis=-1, keepdims=True), vf).astype(np.float32)
