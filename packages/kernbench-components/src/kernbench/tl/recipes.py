"""Recipes: named multi-op macros the kernel language expands into a composite's flat op list.

A recipe is compiler knowledge, not hardware: ``tl.composite(prologue=[{"op":
"softmax_merge", ...}], ...)`` looks the recipe up here, allocates its
internal scratch, and emits its steps as ordinary kernel-scoped math ops in
front of the composite's driver. The PE scheduler and engines never import
this module; they only see op kinds (``kernbench.components.pe.math_kinds``).

Each recipe names its operands and whether it only reads them (``"R"``) or
also updates them in place (``"RW"``; they become the composite's read-write
handles). Its steps read and write slots: operand names or internal scratch
names. ``primary_out`` is the internal slot that the composite's GEMM takes
as its ``a`` operand when the kernel leaves ``a`` out; its dtype follows the
operand named by ``primary_dtype_from`` and every other internal slot is f32.

``RECIPES`` is the registry; :func:`register` adds a recipe (e.g. from a test
or an extension) and refuses to replace one silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.topology.errors import KernbenchError


class RecipeError(KernbenchError, ValueError):
    """A recipe could not be registered (its name is taken)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One engine op of a recipe: op kind, the slots it reads (in the kind's slot order), the slot it writes."""

    kind: str
    srcs: tuple[str, ...]
    dst: str
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Recipe:
    """A named op sequence: its operands' access modes, its steps and its primary output slot."""

    name: str
    operands: dict[str, str]
    steps: tuple[Step, ...]
    primary_out: str | None = None
    primary_dtype_from: str | None = None

    @property
    def internal_slots(self) -> tuple[str, ...]:
        """Scratch slots the recipe writes that are not operands, in first-write order."""
        seen: list[str] = []
        for step in self.steps:
            if step.dst not in self.operands and step.dst not in seen:
                seen.append(step.dst)
        return tuple(seen)


#: One step of online softmax over a block of scores ``s`` (rows = queries), merged into the running
#: max ``m``, denominator ``l`` and output accumulator ``O``; ``P`` (the block's unnormalised
#: probabilities) is the primary output that the following GEMM multiplies by V.
SOFTMAX_MERGE = Recipe(
    name="softmax_merge",
    operands={"s": "R", "m": "RW", "l": "RW", "O": "RW"},
    steps=(
        Step("rmax", ("s",), "m_loc", {"axis": -1}),
        Step("max_elem", ("m", "m_loc"), "m_new"),
        Step("exp_diff", ("m", "m_new"), "corr"),
        Step("exp_diff", ("s", "m_new"), "P"),
        Step("rsum", ("P",), "l_loc", {"axis": -1}),
        Step("fma", ("l", "corr", "l_loc"), "l"),
        Step("mul_bcast", ("O", "corr"), "O"),
        Step("copy", ("m_new",), "m"),
    ),
    primary_out="P",
    primary_dtype_from="s",
)

RECIPES: dict[str, Recipe] = {SOFTMAX_MERGE.name: SOFTMAX_MERGE}


def register(recipe: Recipe) -> None:
    """Add ``recipe`` to :data:`RECIPES`; raises :class:`RecipeError` if its name is taken."""
    if recipe.name in RECIPES:
        raise RecipeError(f"recipe {recipe.name!r} is already registered; pick another name")
    RECIPES[recipe.name] = recipe
