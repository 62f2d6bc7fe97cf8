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
* ``opt2`` — two composites per tile: ``#1`` the scores ``Q K_i^T`` (times
  the scale) for the next tile, then ``#2`` the ``softmax_merge`` recipe
  (online-softmax update of ``(m, denom, O)`` producing ``P``) followed by
  ``P @ V_i`` added into ``O``. K is read from a transposed cache ``K^T``
  (``[d, S_kv]``) so its tile is a ``[d, T]`` GEMM operand; K and V blocks are
  streamed by the composites themselves and the PE scheduler orders the
  composites by the tensors they share. Needs ``S_kv`` to be a multiple of
  the tile.
"""

from __future__ import annotations

import math

VARIANTS = ("opt1", "opt2", "opt3")
#: Variants that read K from a transposed cache ``[d, S_kv]``.
K_TRANSPOSED = ("opt2",)


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


def flash_decode_opt2(tl, q, kt, v, out, tile: int, scale: float) -> None:
    """Online-softmax attention as two composites per tile (scores, then softmax_merge + P @ V)."""
    Q = tl.load(q)
    KT, V = tl.ref(kt), tl.ref(v)
    g, d = Q.shape
    n = V.shape[0] // tile
    m = tl.full((g, 1), -math.inf, "float32")
    denom = tl.zeros((g, 1), "float32")
    o = tl.zeros((g, d), "float32")
    sbuf = [tl.zeros((g, tile), "float32"), tl.zeros((g, tile), "float32")]
    scale_op = [{"op": "scale", "value": scale}]
    tl.composite(Q, KT[:, 0:tile], sbuf[0], epilogue=scale_op)
    for i in range(n):
        cur, nxt = i % 2, (i + 1) % 2
        if i + 1 < n:
            tl.composite(Q, KT[:, (i + 1) * tile:(i + 2) * tile], sbuf[nxt], epilogue=scale_op)
        tl.composite(prologue=[{"op": "softmax_merge", "s": sbuf[cur], "m": m, "l": denom, "O": o}],
                     op="gemm", b=V[i * tile:(i + 1) * tile, :], out=o, epilogue=[{"op": "add", "other": o}])
    tl.store(out, o / denom)


KERNELS = {"opt1": flash_decode_opt1, "opt2": flash_decode_opt2, "opt3": flash_decode_opt3}
