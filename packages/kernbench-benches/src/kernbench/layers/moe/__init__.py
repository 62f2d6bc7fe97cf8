"""``kernbench.layers.moe`` — a mixture-of-experts layer, callable from host code.

- :mod:`kernbench.layers.moe.routing` — the host side of the layer's routing, pure numpy and deterministic: top-k
  of the router logits or a synthetic token-to-expert distribution (balanced, uniform, Zipf, or read from a
  file), expert capacity and dropped tokens, the dispatch plan for expert parallelism (the send order and the
  per-destination row counts of an ``all_to_all_single``), and the numpy reference of the layer's output;
- :mod:`kernbench.layers.moe.placement` — which rank, cube and PE holds each expert (expert parallelism over
  SIPs, experts over PEs, tensor-parallel experts over neighbouring PEs);
- :mod:`kernbench.layers.moe.kernels` — the router, permute, expert and combine kernels;
- :mod:`kernbench.layers.moe.layer` — :class:`MoeLayer`, the whole layer on one rank: router, host routing,
  dispatch all-to-all, experts, combine all-to-all, weighted sum.

Kernels never branch on tensor values: the host decides which tokens go to which expert and the device then runs
fixed-shape kernels.
"""

from kernbench.layers.moe.layer import MoeConfig, MoeLayer, MoeResult, MoeWeights
from kernbench.layers.moe.placement import ExpertPlacement, MoePlacementError, place_experts
from kernbench.layers.moe.routing import DispatchPlan, MoeRoutingError, Routing, plan_dispatch, reference_moe, route

__all__ = [
    "DispatchPlan", "ExpertPlacement", "MoeConfig", "MoeLayer", "MoePlacementError", "MoeResult", "MoeRoutingError",
    "MoeWeights", "Routing", "place_experts", "plan_dispatch", "reference_moe", "route",
]
