"""A mixture-of-experts layer (:mod:`kernbench.layers.moe`): router, dispatch all-to-all, SwiGLU experts on the
PEs, combine all-to-all and weighted sum, with expert parallelism over the SIPs.

Parameters (``-p NAME=VALUE`` or the environment variable):

- ``PRESET`` (``MOE_PRESET``): a layer of :data:`PRESETS` (``small``, the default; ``mixtral``; ``deepseek``)
  that sets ``TOKENS``, ``HIDDEN``, ``FFN``, ``EXPERTS``, ``TOPK`` and ``SHARED`` unless they are given;
- ``TOKENS`` (``MOE_TOKENS``): tokens per rank; ``HIDDEN``, ``FFN`` (``MOE_HIDDEN``, ``MOE_FFN``): model width H
  and expert width F; ``EXPERTS`` (``MOE_EXPERTS``) routed experts; ``TOPK`` (``MOE_TOPK``) experts per token;
  ``SHARED`` (``MOE_SHARED``): ``yes``/``no`` a shared expert (0 or empty: the preset's);
- ``DISTRIBUTION`` (``MOE_DISTRIBUTION``): ``router`` (top-k of the router's logits, the default),
  ``balanced``, ``uniform``, ``zipf`` (with ``SKEW``, ``MOE_SKEW``) or ``file`` (``ROUTING_FILE``,
  ``MOE_ROUTING_FILE``: one line per token of ``TOPK`` expert ids); ``SEED`` (``MOE_SEED``);
- ``CAPACITY`` (``MOE_CAPACITY``): the capacity factor; 0 (the default) means no limit;
- ``PES``, ``CUBES`` (``MOE_PES``, ``MOE_CUBES``): the PEs and cubes of each SIP that hold experts;
- ``SIPS`` (``MOE_SIPS``): ``1`` runs on SIP 0 alone (no all-to-all), ``all`` (the default) makes every SIP a rank
  holding ``EXPERTS / SIPs`` experts (expert parallelism).

The ``small`` preset (H 64, F 128, 48 experts, top-2, 32 tokens per rank) runs in a second on the shipped 1-, 2-,
6- and 16-SIP topologies (48 experts divide over each). The model presets keep their real layer's shape scaled
down (stated in :data:`PRESETS`): Mixtral-8x7B-like
(H 4096, F 14336, 8 experts, top-2) with both widths divided by 16; DeepSeek-V3-like (H 7168, expert F 2048, 256
routed experts top-8 plus one shared) with both widths divided by 16 and the routed experts by 8 (32, still
top-8, so each token still travels to 8 experts). Reported metrics: ``moe_ns`` (the largest over the ranks of
the sum of the layer's steps) and each step's time (the largest over the ranks), ``dropped`` tokens-slots,
``max_load`` and ``imbalance`` (max over mean tokens per expert, all ranks pooled). With ``--data`` every rank's
output is checked against numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.layers.ffn import swiglu_reference
from kernbench.layers.moe import MoeConfig, MoeLayer, MoeRoutingError, MoeWeights, reference_moe
from kernbench.layers.moe.routing import DISTRIBUTIONS
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param

STEPS = ("router", "permute", "counts", "dispatch", "experts", "combine_exchange", "combine")


@dataclass(frozen=True)
class Preset:
    """A MoE layer's shape (after scaling): tokens per rank, model width, expert width, experts, top-k, and
    whether it has a shared expert."""

    tokens: int
    hidden: int
    ffn: int
    experts: int
    topk: int
    shared: bool


PRESETS = {
    "small": Preset(32, 64, 128, 48, 2, False),
    "mixtral": Preset(32, 4096 // 16, 14336 // 16, 8, 2, False),
    "deepseek": Preset(16, 7168 // 16, 2048 // 16, 256 // 8, 8, True),
}
PARAMS = (
    Param("PRESET", str, "small", "layer shape preset", choices=tuple(PRESETS), env="MOE_PRESET"),
    Param("TOKENS", int, 0, "tokens per rank (0: the preset's)", lo=0, hi=4096, env="MOE_TOKENS"),
    Param("HIDDEN", int, 0, "model width H (0: the preset's)", lo=0, hi=16384, env="MOE_HIDDEN"),
    Param("FFN", int, 0, "expert width F (0: the preset's)", lo=0, hi=65536, env="MOE_FFN"),
    Param("EXPERTS", int, 0, "routed experts (0: the preset's)", lo=0, hi=1024, env="MOE_EXPERTS"),
    Param("TOPK", int, 0, "experts per token (0: the preset's)", lo=0, hi=64, env="MOE_TOPK"),
    Param("SHARED", str, "", "a shared expert: yes or no (empty: the preset's)", choices=("", "yes", "no"),
          env="MOE_SHARED"),
    Param("DISTRIBUTION", str, "router", "how tokens pick experts", choices=DISTRIBUTIONS, env="MOE_DISTRIBUTION"),
    Param("SKEW", float, 1.2, "Zipf skew of DISTRIBUTION=zipf", lo=0.0, hi=10.0, env="MOE_SKEW"),
    Param("ROUTING_FILE", str, "", "expert ids per token for DISTRIBUTION=file", env="MOE_ROUTING_FILE"),
    Param("SEED", int, 0, "seed of the synthetic distributions and of the data", lo=0, hi=2**31 - 1, env="MOE_SEED"),
    Param("CAPACITY", float, 0.0, "capacity factor (0: no limit)", lo=0.0, hi=64.0, env="MOE_CAPACITY"),
    Param("PES", int, 8, "PEs per cube holding experts", lo=1, hi=64, env="MOE_PES"),
    Param("CUBES", int, 1, "cubes per SIP holding experts", lo=1, hi=64, env="MOE_CUBES"),
    Param("SIPS", str, "all", "1: SIP 0 alone; all: every SIP a rank (expert parallel)", choices=("1", "all"),
          env="MOE_SIPS"),
)


def layer_weights(preset: Preset, seed: int = 0) -> MoeWeights:
    """Random float16 weights of ``preset``'s shape, scaled so activations stay near 1."""
    rng = np.random.default_rng(seed)
    h, f, e = preset.hidden, preset.ffn, preset.experts

    def mat(*shape: int, fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float16)

    shared = (mat(h, f, fan_in=h), mat(h, f, fan_in=h), mat(f, h, fan_in=f)) if preset.shared else (None,) * 3
    return MoeWeights(mat(h, e, fan_in=h), mat(e, h, f, fan_in=h), mat(e, h, f, fan_in=h), mat(e, f, h, fan_in=f),
                      *shared)


def rank_tokens(preset: Preset, rank: int, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s ``[tokens, H]`` float16 input."""
    rng = np.random.default_rng(seed + 1000 + rank)
    return (rng.standard_normal((preset.tokens, preset.hidden)) * 0.5).astype(np.float16)


def resolve(p) -> Preset:
    """The preset of ``p.PRESET`` with the parameters given over it."""
    base = PRESETS[p.PRESET]
    return Preset(p.TOKENS or base.tokens, p.HIDDEN or base.hidden, p.FFN or base.ffn, p.EXPERTS or base.experts,
                  p.TOPK or base.topk, base.shared if not p.SHARED else p.SHARED == "yes")


def expected(weights: MoeWeights, x: np.ndarray, routing) -> np.ndarray:
    """The numpy reference of one rank's output for its routing."""
    want = reference_moe(x, routing, lambda e, rows: swiglu_reference(rows, *weights.expert(e)))
    if weights.shared:
        want = want + swiglu_reference(x, weights.shared_gate, weights.shared_up, weights.shared_down)
    return want


@bench(name="moe", description="mixture-of-experts layer: dispatch all-to-all, experts on PEs, combine",
       params=PARAMS)
def run(torch, p):
    """Run the layer once on every rank and report its steps; check every rank against numpy in data mode."""
    shape = resolve(p)
    weights = layer_weights(shape, p.SEED)
    config = MoeConfig(k=shape.topk, distribution=p.DISTRIBUTION, capacity_factor=p.CAPACITY or None, seed=p.SEED,
                       skew=p.SKEW, path=p.ROUTING_FILE or None, cubes=p.CUBES, pes=p.PES)
    layer = MoeLayer(weights, config)
    results = {}

    def one(rank: int):
        try:
            return layer(torch, rank_tokens(shape, rank, p.SEED))
        except MoeRoutingError as exc:
            raise BenchError(str(exc)) from None

    if p.SIPS == "1":
        results[0] = one(0)
    else:
        def worker(rank: int) -> None:
            torch.distributed.init_process_group(backend="ahbm")
            results[rank] = one(rank)

        torch.multiprocessing.spawn(worker, nprocs=torch.spec.system.sips.count)
    torch.report_metric("moe_ns", max(r.latency_ns for r in results.values()))
    for step in STEPS:
        torch.report_metric(f"{step}_ns", max(r.phases[step] for r in results.values()))
    counts = sum(r.routing.counts for r in results.values())
    torch.report_metric("dropped", sum(r.routing.dropped for r in results.values()))
    torch.report_metric("max_load", int(counts.max()))
    torch.report_metric("imbalance", float(counts.max() / counts.mean()) if counts.mean() else 1.0)
    for name, value in (("tokens", shape.tokens), ("hidden", shape.hidden), ("ffn", shape.ffn),
                        ("experts", shape.experts), ("topk", shape.topk)):
        torch.report_metric(name, value)
    if torch.data:
        for rank, r in results.items():
            want = expected(weights, rank_tokens(shape, rank, p.SEED), r.routing)
            err = float(np.abs(r.out - want).max())
            if err > 1e-3 * max(1.0, float(np.abs(want).max())):
                raise BenchError(f"moe: rank {rank} differs from numpy by {err:.3g}")
