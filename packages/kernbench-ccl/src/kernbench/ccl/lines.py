"""Kernel helpers for collectives along one line of ranks (a row or a column of the SIP grid).

Every helper runs on every rank of the line with the same arguments except
``pos`` (the rank's place on the line). ``east``/``west`` name the
directions towards higher and lower positions (``global_E``/``global_W``
along a row, ``global_S``/``global_N`` along a column). ``wrap`` says
whether the last position links back to the first (the SIP topology
strategy's ``wrap_rows``/``wrap_cols``). Each direction carries at most one
message per step and its receiver takes it within the step, so the order
"send, then receive" cannot deadlock with two-slot rings.
"""

from __future__ import annotations


def accumulate(tl, acc, buf) -> None:
    """``acc += buf`` without growing the kernel's scratch."""
    with tl.scratch_scope():
        tl.copy_to(acc, acc + buf)


def reduce_line(tl, acc, buf, pos: int, n: int, root: int, east: str, west: str) -> None:
    """Sum ``acc`` of the ``n`` positions into position ``root`` (no wrap-around): positions west of the root
    pass their running sum east, those east of it west, each first adding what arrives from further out; the
    root adds the west side's sum, then the east side's. ``buf`` is a receive buffer of ``acc``'s shape."""
    if n == 1:
        return
    if pos < root:
        if pos > 0:
            tl.recv(west, out=buf)
            accumulate(tl, acc, buf)
        tl.send(east, acc)
    elif pos > root:
        if pos < n - 1:
            tl.recv(east, out=buf)
            accumulate(tl, acc, buf)
        tl.send(west, acc)
    else:
        if pos > 0:
            tl.recv(west, out=buf)
            accumulate(tl, acc, buf)
        if pos < n - 1:
            tl.recv(east, out=buf)
            accumulate(tl, acc, buf)


def unfold_line(tl, acc, pos: int, n: int, root: int, east: str, west: str) -> None:
    """Copy ``acc`` from position ``root`` to every position of a line of ``n`` (no wrap-around): the reverse of
    :func:`reduce_line`, each position passing it on away from the root. ``east``/``west`` name the
    directions towards higher and lower positions, as in :func:`reduce_line`."""
    if n == 1:
        return
    if pos == root:
        if pos > 0:
            tl.send(west, acc)
        if pos < n - 1:
            tl.send(east, acc)
    elif pos < root:
        tl.recv(east, out=acc)
        if pos > 0:
            tl.send(west, acc)
    else:
        tl.recv(west, out=acc)
        if pos < n - 1:
            tl.send(east, acc)


def broadcast_line(tl, buf, pos: int, n: int, root: int, wrap: bool, east: str, west: str, shape=None,
                   dtype: str = "float16"):
    """Copy ``buf`` of position ``root`` to every position; returns the (received) buffer. With wrap-around
    the root sends both ways round the ring, ``n // 2`` positions east and ``(n - 1) // 2`` west, so no message
    travels more than half the ring. ``buf`` is the data at the root and the receive buffer elsewhere (``None``:
    a new TCM tensor of ``shape`` and ``dtype``)."""
    if n == 1:
        return buf
    reach_e, reach_w = ((n // 2, (n - 1) // 2) if wrap else (n - 1 - root, root))
    de = (pos - root) % n if wrap else pos - root
    dw = (root - pos) % n if wrap else root - pos
    if pos == root:
        if reach_e:
            tl.send(east, buf)
        if reach_w:
            tl.send(west, buf)
    elif 0 < de <= reach_e:
        buf = tl.recv(west, shape, dtype, out=buf)
        if de < reach_e:
            tl.send(east, buf)
    else:
        assert 0 < dw <= reach_w, (pos, n, root, wrap)
        buf = tl.recv(east, shape, dtype, out=buf)
        if dw < reach_w:
            tl.send(west, buf)
    return buf


def gather_line(tl, own, pos: int, n: int, wrap: bool, east: str, west: str, into, on_recv) -> None:
    """Give every position the block of every other position exactly once.

    Each position streams its block ``own`` both ways: at step ``s`` a
    position sends east what it received from the west at step ``s - 1``
    (the block of position ``pos - s + 1``) and west what came from the
    east. Around a ring the east stream covers ``n // 2`` positions and the
    west one ``(n - 1) // 2``; along a line each stream runs to the end.
    ``into(src, side)`` returns the TCM tensor to receive position ``src``'s
    block into, or ``None`` for a new one (``side`` is ``"w"`` or ``"e"``; it
    is forwarded at the next step), and ``on_recv(src, tensor)`` is called once it has arrived.
    """
    if n == 1:
        return
    steps_e, steps_w = (n // 2, (n - 1) // 2) if wrap else (n - 1, n - 1)
    fwd_e = fwd_w = own
    for s in range(1, max(steps_e, steps_w) + 1):
        send_e = s <= steps_e and (wrap or (pos - s + 1 >= 0 and pos < n - 1))
        recv_w = s <= steps_e and (wrap or pos - s >= 0)
        send_w = s <= steps_w and (wrap or (pos + s - 1 <= n - 1 and pos > 0))
        recv_e = s <= steps_w and (wrap or pos + s <= n - 1)
        if send_e:  # a send snapshots its source, so the buffer may be received into right after
            tl.send(east, fwd_e)
        if send_w:
            tl.send(west, fwd_w)
        if recv_w:
            src = (pos - s) % n
            fwd_e = tl.recv(west, own.shape, own.dtype, out=into(src, "w"))
            on_recv(src, fwd_e)
        if recv_e:
            src = (pos + s) % n
            fwd_w = tl.recv(east, own.shape, own.dtype, out=into(src, "e"))
            on_recv(src, fwd_w)
