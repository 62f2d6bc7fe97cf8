"""Merging partial attention states across PEs: one composite per merge, PE_IPCQ messages between PEs.

Two PEs that attended disjoint keys for the same query rows hold partial
states ``(m1, l1, O1)`` and ``(m2, l2, O2)``. Their union is::

    m = max(m1, m2),  a = exp(m1 - m),  b = exp(m2 - m)
    l = a * l1 + b * l2,  O = a * O1 + b * O2

(row by row). The recipe :data:`PARTIAL_MERGE` expresses this with the math
engine's existing op kinds, so a merge is one composite command (eight math
ops, one dispatch) instead of eight blocking commands. It is registered in
``kernbench.tl.recipes`` when this module is imported.

A state travels as three messages, ``m``, ``l`` and ``O`` (all float32), in
that order; a receiver posts the receives of all its children before merging
the first, so their copies overlap.
"""

from __future__ import annotations

from kernbench.layers.attention.buffers import F32, Buffers
from kernbench.tl.recipes import RECIPES, Recipe, register
from kernbench.tl.recipes import Step as RecipeStep

#: ``m, l, O`` (read-write) absorb a partial state ``m2, l2, O2`` (read only).
PARTIAL_MERGE = Recipe(
    name="attention_partial_merge",
    operands={"m2": "R", "l2": "R", "O2": "R", "m": "RW", "l": "RW", "O": "RW"},
    steps=(
        RecipeStep("max_elem", ("m", "m2"), "m_new"),
        RecipeStep("exp_diff", ("m", "m_new"), "a"),
        RecipeStep("exp_diff", ("m2", "m_new"), "b"),
        RecipeStep("mul_bcast", ("l2", "b"), "l2b"),
        RecipeStep("fma", ("l", "a", "l2b"), "l"),
        RecipeStep("mul_bcast", ("O", "a"), "O"),
        RecipeStep("fma", ("O2", "b", "O"), "O"),
        RecipeStep("copy", ("m_new",), "m"),
    ),
)

if PARTIAL_MERGE.name not in RECIPES:
    register(PARTIAL_MERGE)


def merge_children(tl, bufs: Buffers, state, directions: tuple[str, ...]) -> None:
    """Receive the partial state of each child (``directions``, in order) and merge it into ``state``."""
    m, den, o = state
    got = []
    for i, d in enumerate(directions):
        got.append((tl.recv_async(d, out=bufs.get(("m2", i), m.shape)),
                    tl.recv_async(d, out=bufs.get(("l2", i), den.shape)),
                    tl.recv_async(d, out=bufs.get(("O2", i), o.shape))))
    for m2, l2, o2 in got:
        tl.composite(prologue=[{"op": PARTIAL_MERGE.name, "m2": m2, "l2": l2, "O2": o2,
                                "m": m, "l": den, "O": o}])


def send_state(tl, state, direction: str) -> None:
    """Send ``(m, l, O)`` to the neighbour in ``direction`` (three messages)."""
    for t in state:
        tl.send(direction, t)


def store_normalised(tl, dst, state) -> None:
    """Write ``O / l`` (float32) to the HBM block ``dst``."""
    _, den, o = state
    with tl.scratch_scope():
        tl.store(dst, o / den)


__all__ = ["F32", "PARTIAL_MERGE", "merge_children", "send_state", "store_normalised"]
