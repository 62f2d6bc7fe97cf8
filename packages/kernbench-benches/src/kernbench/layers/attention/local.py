"""Kernel-side flash attention over the keys one PE holds: the online-softmax loop in three variants.

Each variant folds a PE's keys of one KV head, ``T`` keys per tile (the last
tile may be shorter: nothing is padded and no key is dropped), into the
running state ``(m, l, O)`` of a block of ``R`` query rows (the ``G`` query
heads of the KV head, times the query positions): ``m`` the row maxima of
the scaled scores, ``l`` the softmax denominators and ``O`` the unnormalised
outputs. The caller merges states across PEs and divides ``O`` by ``l``.

* ``opt1`` — one blocking primitive per operation and tile: load the K and V
  tiles, ``Q Kᵀ``, the softmax update on the math engine, ``P V``.
* ``opt2`` — two composites per tile: the scores ``Q Kᵀ · scale`` (plus the
  causal mask as an epilogue ``add``) of the *next* tile, then the
  ``softmax_merge`` recipe followed by ``P V`` added into ``O``. K is read
  from a transposed copy so a tile is a ``[d, T]`` GEMM operand; the
  composites stream K and V themselves and the PE scheduler orders them by
  the buffers they share, so the PE_CPU issues ahead of the engines.
* ``opt3`` — software pipelined primitives: the next tile's scores run as a
  composite on the GEMM engine while this tile's softmax runs on the math
  engine, and the tile after next is prefetched. Scores are kept transposed
  (``[T, R]``), so its running ``m`` and ``l`` are ``(1, R)`` rows until the
  end of the loop.

This is the only copy of the loop: the reduce and ring kernels call
:func:`attend` for a block of one KV head inside a PE's shard (with a short
last tile where the keys do not divide), and the ``gqa-decode-single-pe``
bench calls :func:`flash_decode`, one PE attending all the keys of one KV
head, which keeps that bench's own buffer order (its golden op log). Only
``opt2`` takes a causal mask (prefill uses it).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.layers.attention.buffers import F32, Buffers
from kernbench.layers.attention.problem import MASK_VALUE
from kernbench.layers.attention.tree_plan import VARIANTS, Segment, TreeConfig

F16 = "float16"
#: Variants that read K from a transposed copy ``[d, S]``.
K_TRANSPOSED = ("opt2",)


@dataclass(frozen=True)
class CausalMask:
    """The causal mask of a row block: ``rowpos`` is an ``(R, 1)`` float32 TCM tensor of each row's position;
    keys up to ``pmin`` are visible to every row, a later key ``j`` only to rows with position >= ``j``."""

    rowpos: object
    pmin: int


def tiles(k0: int, k1: int, tile: int) -> list[tuple[int, int]]:
    """Key ranges ``[t0, t1)`` covering ``[k0, k1)`` in steps of ``tile`` (the last one may be shorter)."""
    return [(t, min(t + tile, k1)) for t in range(k0, k1, tile)]


def _kind(t0: int, t1: int, tile: int, i: int):
    """Which of the double buffers a tile uses: alternating for whole tiles, a separate one for a short tile."""
    return i % 2 if t1 - t0 == tile else "short"


def build_mask(tl, bufs: Buffers, mask: CausalMask, t0: int, t1: int, slot) -> object:
    """The additive mask of keys ``[t0, t1)`` for the block's rows: 0 where visible, ``MASK_VALUE`` where not,
    written into a persistent buffer (``slot`` keeps the one an earlier composite may still read apart)."""
    rows = mask.rowpos.shape[0]
    out = bufs.get(("mask", slot), (rows, t1 - t0))
    with tl.scratch_scope():
        ahead = tl.clamp(mask.rowpos - tl.arange(t0, t1, F32), -1.0, 0.0)  # -1 where the key is after the row
        tl.copy_to(out, ahead * -MASK_VALUE)
    return out


def attend(tl, bufs: Buffers, cfg, q, k, v, seg: Segment, state, mask: CausalMask | None = None) -> None:
    """Fold the keys of ``seg`` into ``state = (m, l, O)`` (column layout) for the query rows ``q`` (a TCM
    ``(R, d)`` tensor). ``k`` and ``v`` are the PE's K (transposed for ``opt2``) and V shards in HBM."""
    if cfg.variant == "opt2":
        _opt2(tl, bufs, cfg, q, k, v, seg, state, mask)
    elif mask is not None:
        raise ValueError(f"variant {cfg.variant!r} takes no causal mask; masked attention uses opt2")
    elif cfg.variant == "opt1":
        _opt1(tl, cfg, q, k, v, seg, state)
    else:
        _opt3(tl, bufs, cfg, q, k, v, seg, state)


def _rows(seg: Segment, t0: int, t1: int) -> slice:
    r = seg.row0 + t0 - seg.k0
    return slice(r, r + t1 - t0)


def _cols(seg: Segment, d: int) -> slice:
    return slice(seg.col0, seg.col0 + d)


def score_tile(tl, bufs: Buffers, cfg, q, kt_block, t0: int, t1: int, kind, mask: CausalMask | None):
    """Issue the composite ``scores = Q Kᵀ · scale`` (+ the causal mask where some row cannot see a key) of the
    keys ``[t0, t1)`` into the score buffer ``kind``; returns the buffer."""
    s = bufs.get(("s", kind), (q.shape[0], t1 - t0))
    epilogue = [{"op": "scale", "value": cfg.scale}]
    if mask is not None and t1 - 1 > mask.pmin:
        epilogue.append({"op": "add", "other": build_mask(tl, bufs, mask, t0, t1, kind)})
    tl.composite(q, kt_block, s, epilogue=epilogue)
    return s


def merge_tile(tl, s, state, v_block) -> None:
    """Issue the composite that folds the scores ``s`` into ``state`` (``softmax_merge``) and adds ``P V``."""
    m, den, o = state
    tl.composite(prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": den, "O": o}],
                 op="gemm", b=v_block, out=o, epilogue=[{"op": "add", "other": o}])


def _opt2(tl, bufs: Buffers, cfg, q, kt, v, seg: Segment, state, mask: CausalMask | None) -> None:
    steps = tiles(seg.k0, seg.k1, cfg.tile)

    def scores(i: int):
        t0, t1 = steps[i]
        kt_block = kt[_cols(seg, cfg.d), _rows(seg, t0, t1)]
        return score_tile(tl, bufs, cfg, q, kt_block, t0, t1, _kind(t0, t1, cfg.tile, i), mask)

    pending = scores(0)
    for i, (t0, t1) in enumerate(steps):
        following = scores(i + 1) if i + 1 < len(steps) else None
        merge_tile(tl, pending, state, v[_rows(seg, t0, t1), _cols(seg, cfg.d)])
        pending = following


def _opt1(tl, cfg, q, k, v, seg: Segment, state) -> None:
    m, den, o = state
    for t0, t1 in tiles(seg.k0, seg.k1, cfg.tile):
        with tl.scratch_scope():
            kb = tl.load(k[_rows(seg, t0, t1), _cols(seg, cfg.d)])
            vb = tl.load(v[_rows(seg, t0, t1), _cols(seg, cfg.d)])
            s = tl.dot(q, tl.trans(kb)) * cfg.scale
            m_new = tl.maximum(m, tl.max(s, axis=1, keepdims=True))
            p = tl.exp(s - m_new)
            alpha = tl.exp(m - m_new)
            tl.copy_to(den, den * alpha + tl.sum(p, axis=1, keepdims=True))
            tl.copy_to(o, o * alpha + tl.dot(p, vb))
            tl.copy_to(m, m_new)


def _opt3(tl, bufs: Buffers, cfg, q, k, v, seg: Segment, state) -> None:
    m_col, l_col, o = state
    rows = q.shape[0]
    m, den, _ = bufs.state(rows, cfg.d, transposed=True)
    steps = tiles(seg.k0, seg.k1, cfg.tile)
    qt = bufs.get("qt", (cfg.d, rows), F16)
    with tl.scratch_scope():
        tl.copy_to(qt, tl.trans(q))

    def fetch(i: int):
        t0, t1 = steps[i]
        kind = _kind(t0, t1, cfg.tile, i)
        return (bufs.load(("k", kind), k[_rows(seg, t0, t1), _cols(seg, cfg.d)]),
                bufs.load(("v", kind), v[_rows(seg, t0, t1), _cols(seg, cfg.d)]),
                bufs.get(("st", kind), (t1 - t0, rows)))

    first = {0: fetch(0)}
    if len(steps) > 1:
        first[1] = fetch(1)
    pipelined(tl, cfg.scale, qt, (m, den, o), len(steps), first, fetch)
    with tl.scratch_scope():
        tl.copy_to(m_col, tl.trans(m))
        tl.copy_to(l_col, tl.trans(den))


def pipelined(tl, scale: float, qt, state, n: int, first: dict, fetch) -> None:
    """The ``opt3`` loop over ``n`` tiles: tile ``i+1``'s scores ``K Qᵀ`` run as a composite on the GEMM engine
    while tile ``i``'s softmax update runs on the math engine, and tile ``i+2`` is fetched into the buffers tile
    ``i`` frees. ``qt`` is ``Qᵀ`` ``(d, R)``; ``state`` is ``(m, l, O)`` with ``m`` and ``l`` as ``(1, R)`` rows;
    ``first`` holds the ``(K, V, scores)`` buffers of tiles 0 and 1 (1 only when ``n > 1``), already fetched;
    ``fetch(i)`` starts tile ``i``'s K and V loads and returns its buffers."""
    m, den, o = state
    bufs_of = dict(first)
    pending = tl.composite(bufs_of[0][0], qt, bufs_of[0][2])
    for i in range(n):
        following = tl.composite(bufs_of[i + 1][0], qt, bufs_of[i + 1][2]) if i + 1 < n else None
        tl.wait(pending)
        _, vb, sb = bufs_of.pop(i)
        with tl.scratch_scope():
            s = sb * scale
            m_new = tl.maximum(m, tl.max(s, axis=0, keepdims=True))
            pt = tl.exp(s - m_new)
            alpha = tl.exp(m - m_new)
            tl.copy_to(den, den * alpha + tl.sum(pt, axis=0, keepdims=True))
            tl.copy_to(o, o * tl.trans(alpha) + tl.dot(tl.trans(pt), vb))
            tl.copy_to(m, m_new)
        if i + 2 < n:  # tile i's buffers are free now: prefetch tile i+2 (into them, or into the short-tile ones)
            bufs_of[i + 2] = fetch(i + 2)
        pending = following


def flash_decode(tl, q, k, v, out, *, variant: str, tile: int, scale: float) -> None:
    """One PE attends every key of one KV head: ``out = softmax(Q Kᵀ · scale) V`` for the ``G`` query heads ``q``
    ``(G, d)`` f16, with ``k`` (``(d, S)`` for ``opt2``: :data:`K_TRANSPOSED`) and ``v`` ``(S, d)`` in HBM and
    ``out`` ``(G, d)`` f32. ``opt2`` and ``opt3`` need ``S`` to be a multiple of ``tile``.

    The loop is :func:`attend`'s (``opt3``: :func:`pipelined`); only the buffers are set up here, whole tiles
    only and in the order the single-PE decode has always issued them (its golden op log)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    Q = tl.load(q)
    K, V = tl.ref(k), tl.ref(v)
    g, d = Q.shape
    s_kv = V.shape[0]
    cfg = TreeConfig(variant, tile, scale, d, variant in K_TRANSPOSED)
    seg = Segment(head=0, k0=0, k1=s_kv, row0=0, col0=0)
    bufs = Buffers(tl)
    if variant != "opt3":
        state = bufs.state(g, d)
        if variant == "opt2":  # both score buffers before the first composite
            bufs.get(("s", 0), (g, tile))
            bufs.get(("s", 1), (g, tile))
        attend(tl, bufs, cfg, Q, K, V, seg, state)
        m, den, o = state
        tl.store(out, o / den)
        return
    n = s_kv // tile
    qt = tl.trans(Q)
    m, den, o = bufs.state(g, d, transposed=True)
    kb = [tl.load(K[0:tile, :]), tl.load(K[tile:2 * tile, :]) if n > 1 else None]
    vb = [tl.load(V[0:tile, :]), tl.load(V[tile:2 * tile, :]) if n > 1 else None]
    sb = [tl.zeros((tile, g), F32), tl.zeros((tile, g), F32)]

    def fetch(i: int):
        rows = slice(i * tile, (i + 1) * tile)
        tl.load(K[rows, :], out=kb[i % 2])
        tl.load(V[rows, :], out=vb[i % 2])
        return kb[i % 2], vb[i % 2], sb[i % 2]

    first = {i: (kb[i], vb[i], sb[i]) for i in range(min(n, 2))}
    pipelined(tl, scale, qt, (m, den, o), n, first, fetch)
    tl.store(out, o / tl.trans(den))
