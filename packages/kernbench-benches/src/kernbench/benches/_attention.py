"""Flash-decode attention kernels for one PE (online softmax over K/V tiles).

One KV head serves ``G`` query heads (GQA); the ``G`` queries are folded
into the GEMM's M dimension, so a tile's scores are one ``[G, d] x [d, T]``
product. The running state ``(m, denom, O)`` (max, softmax denominator, output) starts at ``(-inf, 0, 0)`` from
``tl.full``/``tl.zeros`` and is updated in place with ``tl.copy_to``; each
tile's temporaries live in a ``tl.scratch_scope`` so any context length fits
the scratch. The final output is ``O / denom``.

* ``opt1`` — primitive ops per tile: load K and V blocks, scores with
  ``tl.dot``, softmax update, ``P @ V``.
* ``opt3`` — software-pipelined: the next tile's scores ``K_{i+1} Q^T`` are
  issued as an asynchronous composite on the GEMM engine, and the tile after
  next is prefetched into a free buffer, before this tile's softmax runs on
  the math engine. Scores are kept transposed (``[T, G]``) so K tiles feed the
  composite directly. Needs ``S_kv`` to be a multiple of the tile.
"""

from __future__ import annotations

import math

VARIANTS = ("opt1", "opt3")


def flash_decode_opt1(tl, q, k, v, out, tile: int, scale: float) -> None:
    """Online-softmax attention with one blocking step per primitive op."""
    Q = tl.load(q)
    K, V = tl.ref(k), tl.ref(v)
    g, d = Q.shape
    s_kv = K.shape[0]
    m = tl.full((g, 1), -math.inf, "float32")
    denom = tl.zeros((g, 1), "float32")
    o = tl.zeros((g, d), "float32")
    for t0 in range(0, s_kv, tile):
        t1 = min(t0 + tile, s_kv)
        with tl.scratch_scope():
            kb, vb = tl.load(K[t0:t1, :]), tl.load(V[t0:t1, :])
            s = tl.dot(Q, tl.trans(kb)) * scale
            m_new = tl.maximum(m, tl.max(s, axis=1, keepdims=True))
            p = tl.exp(s - m_new)
            alpha = tl.exp(m - m_new)
            tl.copy_to(denom, denom * alpha + tl.sum(p, axis=1, keepdims=True))
            tl.copy_to(o, o * alpha + tl.dot(p, vb))
            tl.copy_to(m, m_new)
    tl.store(out, o / denom)


def flash_decode_opt3(tl, q, k, v, out, tile: int, scale: float) -> None:
    """Online-softmax attention with the next tile's scores overlapping this tile's softmax."""
    Q = tl.load(q)
    K, V = tl.ref(k), tl.ref(v)
    g, d = Q.shape
    s_kv = K.shape[0]
    n = s_kv // tile
    qt = tl.trans(Q)  # [d, G]
    m = tl.full((1, g), -math.inf, "float32")
    denom = tl.zeros((1, g), "float32")
    o = tl.zeros((g, d), "float32")
    kbuf = [tl.load(K[0:tile, :]), tl.load(K[tile:2 * tile, :]) if n > 1 else None]
    vbuf = [tl.load(V[0:tile, :]), tl.load(V[tile:2 * tile, :]) if n > 1 else None]
    sbuf = [tl.zeros((tile, g), "float32"), tl.zeros((tile, g), "float32")]
    pending = tl.composite(kbuf[0], qt, sbuf[0])
    for i in range(n):
        cur, nxt = i % 2, (i + 1) % 2
        following = tl.composite(kbuf[nxt], qt, sbuf[nxt]) if i + 1 < n else None
        tl.wait(pending)
        with tl.scratch_scope():
            s = sbuf[cur] * scale
            m_new = tl.maximum(m, tl.max(s, axis=0, keepdims=True))
            pt = tl.exp(s - m_new)
            alpha = tl.exp(m - m_new)
            tl.copy_to(denom, denom * alpha + tl.sum(pt, axis=0, keepdims=True))
            tl.copy_to(o, o * tl.trans(alpha) + tl.dot(tl.trans(pt), vbuf[cur]))
            tl.copy_to(m, m_new)
        if i + 2 < n:  # tile i's buffers are free now: prefetch tile i+2 into them
            rows = slice((i + 2) * tile, (i + 3) * tile)
            tl.load(K[rows, :], out=kbuf[cur])
            tl.load(V[rows, :], out=vbuf[cur])
        pending = following
    tl.store(out, o / tl.trans(denom))


KERNELS = {"opt1": flash_decode_opt1, "opt3": flash_decode_opt3}
