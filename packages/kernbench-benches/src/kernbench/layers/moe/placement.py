"""Where a MoE layer's experts live: ranks (expert parallelism), then the PEs of each rank's cubes.

Expert ``e`` of ``E`` belongs to rank ``e // (E / world)``: each rank holds a contiguous block of ``E / world``
experts, plus the shared expert when the layer has one (every rank keeps its own copy, for its own tokens).
Inside a rank the ``L`` local experts (the shared one last) are laid over the ``slots = cubes x pes`` PEs, slot
``s`` being PE ``s % pes`` of cube ``s // pes``:

- ``L >= slots``: whole experts, expert ``i`` on slot ``i % slots`` (a PE holds ``ceil(L / slots)`` or one
  fewer);
- ``L < slots``: each expert is tensor-parallel over ``tp`` neighbouring PEs of one row of a cube's PE grid,
  ``tp`` the largest of 4, 2 that divides the row and ``pes`` with ``L tp <= slots`` (PEs beyond the ``L``
  groups stay idle). PE ``j`` of a group holds columns ``j F/tp ..`` of its expert's gate and up projections and
  the matching rows of its down projection; the group's partial outputs are summed over the PE_IPCQ to its
  first PE.

Every expert PE's shard of the stacked weights has room for ``per_slot`` experts (zeros where it holds fewer),
since a row-wise placement gives every PE the same share.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.ccl.neighbours import pe_grid_cols
from kernbench.layers.moe.routing import MoeRoutingError


class MoePlacementError(MoeRoutingError):
    """A MoE layer's experts do not divide over the ranks, cubes and PEs asked for."""


@dataclass(frozen=True)
class ExpertPlacement:
    """The layout of one rank's experts (see the module): ``experts`` routed experts in all, ``world`` ranks,
    ``local`` experts per rank (the shared one included), ``slots`` PEs, ``tp`` PEs per expert and ``per_slot``
    experts per PE (one of ``tp`` and ``per_slot`` is 1)."""

    experts: int
    world: int
    shared: bool
    cubes: int
    pes: int
    tp: int
    per_slot: int

    @property
    def routed_per_rank(self) -> int:
        """Routed experts each rank owns."""
        return self.experts // self.world

    @property
    def local(self) -> int:
        """Experts each rank computes: its routed ones, then the shared one if any."""
        return self.routed_per_rank + int(self.shared)

    @property
    def slots(self) -> int:
        """PEs per rank that hold experts."""
        return self.cubes * self.pes

    def owner(self, expert: int) -> int:
        """The rank holding routed expert ``expert``."""
        return expert // self.routed_per_rank

    def jobs_of(self, slot: int) -> list[tuple[int, int]]:
        """``(local expert, tensor-parallel part)`` pairs slot ``slot`` computes, in order."""
        if self.tp > 1:
            return [(slot // self.tp, slot % self.tp)] if slot // self.tp < self.local else []
        return [(i, 0) for i in range(slot, self.local, self.slots)]


def place_experts(spec, experts: int, world: int, *, shared: bool, cubes: int, pes: int) -> ExpertPlacement:
    """Lay ``experts`` routed experts (and a shared one) over ``world`` ranks and ``cubes x pes`` PEs of each."""
    if not 1 <= pes <= spec.pes_per_cube:
        raise MoePlacementError(f"moe: pes = {pes}; use 1 to {spec.pes_per_cube}")
    if not 1 <= cubes <= spec.cubes_per_sip:
        raise MoePlacementError(f"moe: cubes = {cubes}; use 1 to {spec.cubes_per_sip}")
    if experts % world:
        raise MoePlacementError(f"moe: {experts} experts do not divide over {world} rank(s) (expert parallel "
                                f"degree); use a multiple of {world} experts")
    local = experts // world + int(shared)
    slots = cubes * pes
    if local >= slots:
        return ExpertPlacement(experts, world, shared, cubes, pes, 1, -(-local // slots))
    cols = pe_grid_cols(spec)
    tp = next(t for t in (4, 2, 1) if t <= cols and not cols % t and not pes % t and local * t <= slots)
    return ExpertPlacement(experts, world, shared, cubes, pes, tp, 1)
