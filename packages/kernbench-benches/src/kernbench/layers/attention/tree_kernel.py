"""The kernel of the reduce partitionings: attend the PE's own keys, merge the children's partials, pass up.

Every PE of a launch runs :func:`tree_kernel` and follows its own script
(a tuple of :class:`~kernbench.layers.attention.tree_plan.Step`, chosen by
its program ids). For each step it attends its keys for the step's query
rows with the configured loop variant (:mod:`~kernbench.layers.attention.local`),
merges the states its children send, and then sends its state to its parent
or, at the root, stores ``O / l``. Nothing in the kernel depends on tensor
values; the script is fixed by the host before the launch.
"""

from __future__ import annotations

from kernbench.layers.attention.buffers import Buffers
from kernbench.layers.attention.local import CausalMask, attend
from kernbench.layers.attention.merge import merge_children, send_state, store_normalised


def tree_kernel(tl, q, k, v, out, rowpos, config, scripts) -> None:
    """Run this PE's script. ``q`` is the user's query rows ``(Hq*Tq, d)`` (f16), ``k`` and ``v`` the PE's key
    shards (``k`` transposed when ``config.k_transposed``), ``out`` the PE's output slot ``(Hq*Tq, d)`` (f32),
    ``rowpos`` each query row's position ``(Hq*Tq, 1)`` (f32; None without a causal mask), ``scripts`` maps
    ``(cube index in the launch, PE index in the cube)`` to the PE's steps."""
    steps = scripts.get((tl.program_id(1), tl.program_id(0)), ())
    if not steps:
        return
    qs, ks, vs, outs = tl.ref(q), tl.ref(k), tl.ref(v), tl.ref(out)
    positions = tl.ref(rowpos) if rowpos is not None else None
    bufs = Buffers(tl)
    for st in steps:
        state = bufs.state(st.q1 - st.q0, config.d)
        if st.seg is not None:
            qb = bufs.load("q", qs[st.q0:st.q1, :])
            mask = None
            if st.mask_pmin is not None:
                mask = CausalMask(bufs.load("rowpos", positions[st.q0:st.q1, :]), st.mask_pmin)
            attend(tl, bufs, config, qb, ks, vs, st.seg, state, mask)
        merge_children(tl, bufs, state, st.recv)
        if st.send is not None:
            send_state(tl, state, st.send)
        if st.store:
            store_normalised(tl, outs[st.q0:st.q1, :], state)
