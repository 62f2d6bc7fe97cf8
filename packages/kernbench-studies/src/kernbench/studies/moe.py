"""The MoE study: the collectives a mixture-of-experts layer moves its tokens with, then the layer itself.

Panels:

* ``collectives``: ``all_to_all_single`` (pairwise and hierarchical, even splits, each rank's tensors split
  row-wise over PE 0 of its 16 cubes) and ``all_gather_into_tensor`` (blocks on PE 0 of cube 0) on the three
  6-SIP topologies (ring, torus, mesh) × the payloads of
  :data:`PAYLOADS` per rank, timing mode, as the ``all-to-all`` and ``all-gather`` benches run them; the report
  and figures fit an α–β line to each series (least squares);
* ``expert_parallel``: the layer of :data:`LAYER` (fine-grained experts: 48 experts of width 256, top-4, model
  width 256, 32 tokens per rank) × expert-parallel degree (1 SIP of the 2-SIP default, both of its SIPs, the
  6-SIP torus, the 16-SIP torus: the experts divide over every rank) × routing distribution (balanced, uniform,
  Zipf of skew 0.8, 1.2, 2.0), no capacity limit;
* ``capacity``: the same layer on the 6-SIP torus, Zipf 1.2, × capacity factor (0.5 to 2, and none);
* ``dispatch_links``: on the 6-SIP torus, balanced and Zipf 1.2, the per-link traffic of the dispatch
  all-to-all alone (counters read when every rank has entered it and when it returns);
* ``decoder``: a decoder block (attention, then a dense FFN or the MoE layer) on the 2-SIP default under three
  placements, tensor, expert and sequence parallel (:mod:`kernbench.studies.decoder`).

A ``fidelity`` panel reruns a few points of the collectives, expert-parallel, capacity and decoder panels
(:data:`FIDELITY_POINTS`) in flow fidelity, each beside its packet point (:mod:`kernbench.studies.fidelity`).

Every MoE point records the layer's steps (the largest over the ranks of each), the share of the steps that
move tokens (permute, counts, dispatch, combine exchange, combine) in the layer's time, the per-expert token
histogram over all ranks (``histogram``, JSON text), its max and mean load and the dropped token-slots.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.benches.ccl_all_to_all import all_to_all_sips
from kernbench.benches.ccl_gather_scatter import gather_or_scatter
from kernbench.benches.moe import STEPS, Preset, layer_weights, rank_tokens
from kernbench.layers.moe import MoeConfig, MoeLayer
from kernbench.runtime import RuntimeContext
from kernbench.studies import allreduce_links, decoder
from kernbench.studies.base import (
    FidelityPanel,
    Field,
    Point,
    PointContext,
    ReportSection,
    Scalar,
    Study,
    StudyError,
)
from kernbench.studies.graphs import SIX_SIP_FILES, SIX_SIP_TORUS, study_graph
from kernbench.topology.sip_topologies import TORUS_2D

TOPOLOGIES, TORUS = SIX_SIP_FILES, SIX_SIP_TORUS  # the 6-SIP 2×3 file of each shipped SIP topology family
DEFAULT = "topology.yaml"
SIXTEEN = f"16sip_4x4_{TORUS_2D.name}.yaml"
CCL_FILE = "ccl.yaml"
#: Input bytes per rank of the collectives panel (f16 rows of 64 values; at least 16 rows per destination, so
#: that the all-to-all's tensors split over the 16 cubes of a SIP).
PAYLOADS: tuple[int, ...] = (4096, 16384, 65536, 131072)
#: Collective series of the collectives panel: (collective, all-to-all algorithm or "").
COLLECTIVES: tuple[tuple[str, str], ...] = (("all_to_all", "grid_all_to_all_pairwise"),
                                            ("all_to_all", "grid_all_to_all_hierarchical"), ("all_gather", ""))
#: The study's layer: tokens per rank, model width, expert width, experts, top-k, no shared expert.
LAYER = Preset(32, 256, 256, 48, 4, False)
#: Expert-parallel degrees: (topology, SIPs used); 1 runs on SIP 0 of the default file alone.
DEGREES: tuple[tuple[str, int], ...] = ((DEFAULT, 1), (DEFAULT, 2), (TORUS, 6), (SIXTEEN, 16))
#: Routing distributions: (distribution, Zipf skew or None).
ROUTINGS: tuple[tuple[str, float | None], ...] = (("balanced", None), ("uniform", None), ("zipf", 0.8),
                                                  ("zipf", 1.2), ("zipf", 2.0))
CAPACITY_SKEW = 1.2
#: Capacity factors of the capacity panel (None: no limit).
CAPACITIES: tuple[float | None, ...] = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, None)
#: The PEs of each SIP holding experts (one cube, all eight PEs).
PES, CUBES = 8, 1
MOVE_STEPS = ("permute", "counts", "dispatch", "combine_exchange", "combine")
#: The fidelity panel: (panel, what) of the points rerun in flow fidelity. Collectives: (collective, algorithm,
#: bytes per rank) on the torus; expert parallel: (SIPs used, distribution, skew); capacity: the factor;
#: decoder: (placement, FFN kind). The 16-SIP layer is left out: its flow run costs several seconds more than the
#: rest of the panel's layers together.
FIDELITY_POINTS: tuple[tuple[str, tuple], ...] = (
    ("collectives", ("all_to_all", "grid_all_to_all_pairwise", 4096)),
    ("collectives", ("all_to_all", "grid_all_to_all_pairwise", 131072)),
    ("collectives", ("all_to_all", "grid_all_to_all_hierarchical", 131072)),
    ("collectives", ("all_gather", "", 131072)),
    ("expert_parallel", (2, "balanced", None)), ("expert_parallel", (6, "balanced", None)),
    ("capacity", (1.0,)),
    ("decoder", ("tensor", "dense")), ("decoder", ("expert", "moe")))

FIELDS: tuple[Field, ...] = (
    Field("panel", "", "collectives (all-to-all and all-gather x payload x SIP topology), expert_parallel (the "
                       "MoE layer x expert-parallel degree x routing), capacity (the layer on the torus x capacity "
                       "factor), dispatch_links (per-link traffic of the dispatch on the torus), decoder (a decoder "
                       "block's placement) or fidelity (some of their points in flow fidelity)"),
    Field("topology", "", "topology file, relative to the topologies folder"),
    Field("collective", "", "collectives panel: all_to_all or all_gather"),
    Field("algorithm", "", "collectives panel: the all_to_all algorithm of ccl.yaml (empty for all_gather)"),
    Field("bytes_per_rank", "B", "collectives panel: input bytes of each rank (f16 rows of 64 values)"),
    Field("sips_used", "1", "MoE panels: ranks of the layer (expert-parallel degree; 1: SIP 0 alone)"),
    Field("distribution", "", "MoE panels: routing distribution (balanced, uniform, zipf)"),
    Field("skew", "1", "MoE panels: Zipf skew (null for the other distributions)"),
    Field("capacity_factor", "1", "MoE panels: capacity factor (null: no limit)"),
    Field("link_stats", "", "dispatch_links panel: true, the point records the dispatch's per-link traffic"),
    Field("placement", "", "decoder panel: tensor, expert or sequence (see kernbench.studies.decoder)"),
    Field("ffn_kind", "", "decoder panel: dense (SwiGLU FFN) or moe (the MoE layer)"),
    Field("sip_topology", "", "system.sips.topology of the file"),
    Field("sips", "1", "SIPs of the topology file"),
    Field("latency_ns", "ns", "collectives panel: earliest PE start to latest PE end over all ranks"),
    Field("moe_ns", "ns", "MoE panels: the layer's time, the sum of its steps (largest rank)"),
    *(Field(f"{s}_ns", "ns", f"MoE panels: the {s.replace('_', ' ')} step, first PE start to last PE end "
                             f"(largest over the ranks; 0 where a single rank skips it)") for s in STEPS),
    Field("move_share", "1", "MoE panels: (permute + counts + dispatch + combine exchange + combine) / moe_ns of "
                             "the slowest rank: the share of the layer spent moving tokens"),
    Field("max_load", "1", "MoE panels: most token-slots any expert received (all ranks)"),
    Field("mean_load", "1", "MoE panels: mean token-slots per expert (kept ones)"),
    Field("imbalance", "1", "MoE panels: max_load / mean_load"),
    Field("dropped", "1", "MoE panels: token-slots over capacity (dropped), all ranks"),
    Field("histogram", "", "MoE panels: JSON array of kept token-slots per expert, all ranks pooled", csv=False),
    Field("attention_ns", "ns", "decoder panel: the attention, largest over the ranks"),
    Field("handoff_ns", "ns", "decoder panel: the all-gather of the attention outputs (tensor placement; else 0)"),
    Field("ffn_ns", "ns", "decoder panel: the dense FFN (its all-reduce included) or the MoE layer, largest over "
                          "the ranks"),
    Field("block_ns", "ns", "decoder panel: attention_ns + handoff_ns + ffn_ns"),
    Field("events", "1", "SimPy events the point's engine processed"),
    Field("window_ns", "ns", "dispatch_links panel: the dispatch window (every rank in it until it returns)"),
    Field("links_used", "1", "dispatch_links panel: directed links that carried bytes in the window"),
    Field("link_bytes", "B", "dispatch_links panel: bytes summed over every link in the window"),
    Field("busiest_link", "", "dispatch_links panel: the link with the highest utilisation in the window"),
    Field("busiest_utilisation", "1", "dispatch_links panel: busy_ns / window_ns of busiest_link"),
    Field("links", "", "dispatch_links panel: JSON array of [src, dst, kind, bytes (B), packets, busy_ns (ns)] of "
                       "the window, one row per directed link that carried bytes (results.json only)", csv=False),
)


def _moe(panel: str, topology: str, sips: int, distribution: str, skew: float | None, capacity: float | None,
         links: bool = False) -> Point:
    params: dict[str, Scalar] = {"topology": topology, "sips_used": sips, "distribution": distribution,
                                 "skew": skew, "capacity_factor": capacity}
    if links:
        params["link_stats"] = True
    return Point({"panel": panel}, params)


def _what(panel: str, params: Mapping[str, Scalar]) -> tuple:
    """What a point runs, as :data:`FIDELITY_POINTS` names it."""
    if panel == "collectives":
        return (params["collective"], params["algorithm"], params["bytes_per_rank"]) if params["topology"] == TORUS \
            else ()
    if panel == "expert_parallel":
        return (params["sips_used"], params["distribution"], params["skew"])
    if panel == "capacity":
        return (params["capacity_factor"],)
    if panel == "decoder":
        return (params["placement"], params["ffn_kind"])
    return ()


def _describe(params: Mapping[str, Scalar]) -> str:
    """A point's short name: ``pairwise torus_2d 128 KiB`` (an all-to-all by its algorithm), ``6 SIPs zipf 2``,
    ``tensor dense``."""
    topo = str(params["topology"]).removeprefix("6sip_2x3_").removesuffix(".yaml")
    if "collective" in params:
        what = str(params["algorithm"]).removeprefix("grid_all_to_all_") or str(params["collective"])
        b = int(params["bytes_per_rank"])
        return f"{what} {topo} " + (f"{b // 1024} KiB" if b % 1024 == 0 else f"{b} B")
    if "placement" in params:
        return f"{params['placement']} {params['ffn_kind']}"
    routing = str(params["distribution"]) + (f" {params['skew']:g}" if params.get("skew") is not None else "")
    cap = params.get("capacity_factor")
    return f"{params['sips_used']} SIPs {routing}" + (f" capacity {cap:g}" if cap is not None else "")


def _latency(params: Mapping[str, Scalar]) -> str:
    """The value field of a point's end-to-end time: a collective's latency, a decoder block's or a layer's."""
    if "collective" in params:
        return "latency_ns"
    return "block_ns" if "placement" in params else "moe_ns"


#: The MoE study's fidelity panel: the collective's, the layer's or the decoder block's time compared.
FIDELITY_PANEL = FidelityPanel(latency=_latency, describe=_describe)


def grid() -> tuple[Point, ...]:
    """Collectives (series-major, then topology, then payload), expert parallel (degree-major), capacity, the
    dispatch links, the decoder block (placement-major), then the fidelity panel (:data:`FIDELITY_POINTS` in grid
    order, in flow fidelity)."""
    points = [Point({"panel": "collectives"}, {"topology": t, "collective": c, "algorithm": a, "bytes_per_rank": b})
              for c, a in COLLECTIVES for t in TOPOLOGIES for b in PAYLOADS]
    points += [_moe("expert_parallel", t, n, d, s, None) for t, n in DEGREES for d, s in ROUTINGS]
    points += [_moe("capacity", TORUS, 6, "zipf", CAPACITY_SKEW, c) for c in CAPACITIES]
    points += [_moe("dispatch_links", TORUS, 6, d, s, None, links=True)
               for d, s in (("balanced", None), ("zipf", CAPACITY_SKEW))]
    points += [Point({"panel": "decoder"}, {"topology": DEFAULT, "placement": p, "ffn_kind": f})
               for p in decoder.PLACEMENTS for f in decoder.FFN_KINDS]
    points += FIDELITY_PANEL.twins(p for p in list(points)
                                   if (p.labels["panel"], _what(str(p.labels["panel"]), p.params)) in FIDELITY_POINTS)
    return tuple(points)


def _collective(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    graph = study_graph(ctx.topology_dir, str(params["topology"]), {})
    torch = RuntimeContext(graph, data=False, fidelity=ctx.fidelity)
    nbytes = int(params["bytes_per_rank"])
    if params["collective"] == "all_to_all":
        latency, _, _ = all_to_all_sips(torch, nbytes, "even", "tcm", str(params["algorithm"]))
    elif params["collective"] == "all_gather":
        latency, _ = gather_or_scatter(torch, "all_gather", nbytes, "tcm")
    else:
        raise StudyError(f"moe point: collective {params['collective']!r} is not all_to_all or all_gather")
    spec = graph.spec
    return {"sip_topology": spec.system.sips.topology, "sips": spec.system.sips.count, "latency_ns": latency,
            "events": torch.engine.events}


class _DispatchWindow:
    """Link counters around the dispatch all-to-all: read when the last rank enters it and when it returns."""

    def __init__(self, torch: RuntimeContext, world: int) -> None:
        self.torch, self.world = torch, world
        self.entered = 0
        self.before = self.after = None
        self.t0 = self.t1 = 0.0

    def __call__(self, step: str, edge: str) -> None:
        if step != "dispatch":
            return
        if edge == "start":
            self.entered += 1
            if self.entered == self.world:
                self.before, self.t0 = self.torch.link_stats(), float(self.torch.now_ns)
        elif self.after is None:
            self.after, self.t1 = self.torch.link_stats(), float(self.torch.now_ns)

    def record(self) -> dict[str, Scalar]:
        """The window's per-link record: counters after minus before."""
        if self.before is None or self.after is None:
            raise StudyError("moe point: the dispatch all-to-all did not run, so it has no link traffic to record")
        start = {(r.src, r.dst): r for r in self.before}
        rows = []
        for r in self.after:
            b = start.get((r.src, r.dst))
            delta = allreduce_links.LinkRow(r.src, r.dst, r.kind, r.bytes - (b.bytes if b else 0),
                                            r.packets - (b.packets if b else 0),
                                            r.busy_ns - (b.busy_ns if b else 0.0))
            if delta.bytes > 0:
                rows.append(delta)
        window = self.t1 - self.t0
        text = allreduce_links.encode(rows)
        return {"window_ns": window, **allreduce_links.summary(allreduce_links.decode(text), window), "links": text}


def _layer(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    graph = study_graph(ctx.topology_dir, str(params["topology"]), {})
    spec = graph.spec
    sips = int(params["sips_used"])
    if sips not in (1, spec.system.sips.count):
        raise StudyError(f"moe point: sips_used={sips} must be 1 or the file's {spec.system.sips.count} SIPs")
    skew = params.get("skew")
    capacity = params.get("capacity_factor")
    config = MoeConfig(k=LAYER.topk, distribution=str(params["distribution"]),
                       capacity_factor=float(capacity) if capacity is not None else None,
                       skew=float(skew) if skew is not None else 1.2, cubes=CUBES, pes=PES)
    torch = RuntimeContext(graph, data=False, fidelity=ctx.fidelity)
    window = _DispatchWindow(torch, sips) if params.get("link_stats") else None
    layer = MoeLayer(layer_weights(LAYER), config, on_step=window)
    results = {}
    if sips == 1:
        results[0] = layer(torch, rank_tokens(LAYER, 0))
    else:
        def worker(rank: int) -> None:
            torch.distributed.init_process_group(backend="ahbm")
            results[rank] = layer(torch, rank_tokens(LAYER, rank))

        torch.multiprocessing.spawn(worker, nprocs=sips)
    slowest = max(results.values(), key=lambda r: r.latency_ns)
    counts = sum(r.routing.counts for r in results.values())
    record: dict[str, Scalar] = {
        "sip_topology": spec.system.sips.topology, "sips": spec.system.sips.count,
        "moe_ns": slowest.latency_ns,
        **{f"{s}_ns": max(r.phases[s] for r in results.values()) for s in STEPS},
        "move_share": sum(slowest.phases[s] for s in MOVE_STEPS) / slowest.latency_ns,
        "max_load": int(counts.max()), "mean_load": float(counts.mean()),
        "imbalance": float(counts.max() / counts.mean()) if counts.mean() else 1.0,
        "dropped": int(sum(r.routing.dropped for r in results.values())),
        "histogram": json.dumps([int(c) for c in np.asarray(counts)]), "events": torch.engine.events,
    }
    if window is not None:
        record.update(window.record())
    return record


def _decoder(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    graph = study_graph(ctx.topology_dir, str(params["topology"]), {})
    torch = RuntimeContext(graph, data=False, fidelity=ctx.fidelity)
    times = decoder.run_block(torch, str(params["placement"]), str(params["ffn_kind"]))
    spec = graph.spec
    return {"sip_topology": spec.system.sips.topology, "sips": spec.system.sips.count,
            "attention_ns": times.attention_ns, "handoff_ns": times.handoff_ns, "ffn_ns": times.ffn_ns,
            "block_ns": times.block_ns, "events": torch.engine.events}


def run_point(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    """Run one point in a fresh runtime (timing mode) and return its record."""
    if "collective" in params:
        return _collective(params, ctx)
    if "placement" in params:
        return _decoder(params, ctx)
    return _layer(params, ctx)


def _files(params: Mapping[str, Scalar]) -> tuple[str, ...]:
    return (str(params["topology"]), CCL_FILE)


def _cost(params: Mapping[str, Scalar]) -> float:
    if "collective" in params:
        return 2.0
    if "placement" in params:
        return 6.0 if params["placement"] == "sequence" else 2.5
    return {1: 3.0, 2: 4.0, 6: 6.0, 16: 10.0}.get(int(params["sips_used"]), 6.0)


STUDY = Study(
    name="moe",
    title="Mixture of experts: all-to-all, expert parallelism and routing skew",
    description="all-to-all (pairwise, hierarchical) and all-gather x 4 payloads x 3 SIP topologies; a "
                "48-expert top-4 MoE layer x expert-parallel degree (1, 2, 6, 16 SIPs) x 5 routing "
                "distributions; the layer on the torus x 7 capacity factors; the dispatch's per-link traffic; a "
                "decoder block (attention + dense FFN or MoE) under tensor, expert and sequence parallelism",
    grid=grid,
    point=run_point,
    files=_files,
    overrides=lambda params: {},
    modules=("kernbench.studies.moe", "kernbench.studies.decoder"),
    fields=FIELDS,
    cost=_cost,
    figures=("kernbench.studies.figures.moe:FIGURES",),
    report=ReportSection("kernbench.studies.report.moe_tex:generate", "generated/moe",
                         "kernbench.studies.report.moe_tex:tables"),
    fidelity=FIDELITY_PANEL,
)
