"""The ring-prefill kernel: KV tiles travel round a ring of cubes while each PE attends its own query rows.

For every KV head and pass of row blocks the PE walks its actions (see
:mod:`~kernbench.layers.attention.ring_plan`). Before it forwards the
current tile it posts the receives of the next tile into the other half of
a double buffer, so a message never waits for a receive that its receiver
has not reached yet, and the next tile's copy overlaps this tile's work.
Each received or loaded tile is folded into every row block that can see
any of its keys: one score composite (scale, plus the causal mask when some
row of the block cannot see a key of the tile) and one ``softmax_merge``
composite that adds ``P V``. Blocks that can see none of the tile's keys skip
it. There is no reduction: each PE owns its rows and stores ``O / l`` for
them at the end of the pass.
"""

from __future__ import annotations

from kernbench.layers.attention.buffers import F32, Buffers
from kernbench.layers.attention.local import CausalMask, merge_tile, score_tile
from kernbench.layers.attention.merge import store_normalised

F16 = "float16"


def ring_kernel(tl, q, kt, v, out, rowpos, config, plans) -> None:
    """Run this PE's ring. ``q``, ``rowpos`` and ``out`` are the PE's shards of the query rows ``(rows, d)``
    f16, their positions ``(rows, 1)`` f32 and the output ``(rows, d)`` f32; ``kt`` and ``v`` the cube's key
    block (``kt`` transposed, ``(Hkv*d, n)``; ``v`` token-major, ``(n, Hkv*d)``); ``plans`` maps ``(cube index,
    PE index)`` to the PE's :class:`~kernbench.layers.attention.ring_plan.RingPe`."""
    plan = plans[(tl.program_id(1), tl.program_id(0))]
    qs, kts, vs, outs = tl.ref(q), tl.ref(kt), tl.ref(v), tl.ref(out)
    positions = tl.ref(rowpos)
    bufs = Buffers(tl)
    d, n = config.d, config.n
    actions = plan.actions
    for h, passes in enumerate(plan.passes):
        cols = slice(h * d, (h + 1) * d)
        for blocks in passes:
            work = []
            for j, rb in enumerate(blocks):
                qb = bufs.load(("q", j), qs[rb.q0:rb.q1, :])
                mask = CausalMask(bufs.load(("rowpos", j), positions[rb.q0:rb.q1, :]), rb.pmin) \
                    if config.causal else None
                work.append((rb, qb, mask, bufs.state(rb.q1 - rb.q0, d, slot=j)))

            def tile_bufs(i: int):
                a = actions[i]
                w = a.k1 - a.k0
                return bufs.get(("kt", i % 2), (d, w), F16), bufs.get(("v", i % 2), (w, d), F16)

            for i, a in enumerate(actions):
                kt_t, v_t = tile_bufs(i)
                if a.step == 0:
                    tl.load(kts[cols, a.row0:a.row0 + a.k1 - a.k0], out=kt_t)
                    tl.load(vs[a.row0:a.row0 + a.k1 - a.k0, cols], out=v_t)
                if i + 1 < len(actions) and actions[i + 1].step > 0:
                    kt_n, v_n = tile_bufs(i + 1)
                    tl.recv_async("W", out=kt_n)
                    tl.recv_async("W", out=v_n)
                if a.step < n - 1:
                    tl.send("E", kt_t)
                    tl.send("E", v_t)
                for j, (rb, qb, mask, state) in enumerate(work):
                    if config.causal and a.k0 > rb.pmax:
                        continue  # no row of the block sees any key of this tile
                    s = score_tile(tl, bufs, config, qb, kt_t, a.k0, a.k1, j % 2, mask)
                    merge_tile(tl, s, state, v_t)
            for rb, _, _, state in work:
                store_normalised(tl, outs[rb.q0:rb.q1, :], state)


__all__ = ["F32", "ring_kernel"]
