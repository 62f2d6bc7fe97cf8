"""The GEMM study: one composite-command GEMM on one PE, measured beside an independent analytic model.

Two series, each for the staging variants ``ref_ref`` (A and B streamed from
HBM per tile), ``load_ref`` (A loaded into TCM first) and ``load_load`` (both
loaded first); the output goes back to HBM tile by tile:

* ``shapes``: eight shapes ``M×K×N`` chosen to fill the GEMM tile fully,
  partly, or along one axis only (8 × 3 = 24 simulations);
* ``tiles``: one output tile, ``n = 1…48`` tiles along K (``M = tm``,
  ``K = n·tk``, ``N = tn`` with the tile read from the topology).

A ``fidelity`` panel reruns a few of those points (:data:`FIDELITY_POINTS`) in flow fidelity, each beside its
packet point (:mod:`kernbench.studies.fidelity`).

Each point reports the composite's time, MAC efficiency (real MACs over the
peak rate times the composite time), the busy time of each stage inside the
composite, and beside them an independent model's prediction and its stage
times (:mod:`kernbench.studies.gemm_model`, computed from the topology spec
alone, never from the simulator). Operands are allocated without
deployment writes: the study runs in timing mode, where the values do not
matter and the composite's time does not include deployment.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernbench.benches.matmul_composite import composite_kernel
from kernbench.runtime import DPPolicy, RuntimeContext
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
from kernbench.studies.gemm_model import VARIANTS, fill_ratio, peak_macs_per_ns, predict, tile_shape
from kernbench.studies.graphs import study_graph

TOPOLOGY = "topology.yaml"
#: The shape series, ``(M, K, N)`` in elements.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (32, 32, 32), (32, 64, 32), (32, 128, 32), (32, 128, 128), (32, 3072, 32), (8, 128, 128), (128, 8, 128),
    (512, 512, 512))
#: The tile-count series: tiles along K.
TILE_COUNTS: tuple[int, ...] = tuple(range(1, 49))
DTYPE = "float16"
#: The fidelity panel: (series, variant, shape (M, K, N) or tiles along K) of the points rerun in flow fidelity:
#: the smallest shape, the longest K, the largest shape with each staging, and the longest tile run.
FIDELITY_POINTS: tuple[tuple[str, str, tuple[int, int, int] | int], ...] = (
    ("shapes", "load_load", (32, 32, 32)), ("shapes", "ref_ref", (32, 3072, 32)),
    *(("shapes", v, (512, 512, 512)) for v in VARIANTS), ("tiles", "ref_ref", 48))

#: Stage name in the op log -> result field of its busy time inside the composite.
_STAGE_OPS = {("pe_dma", "dma_read"): "busy_dma_read_ns", ("pe_fetch_store", "fetch"): "busy_fetch_ns",
              ("pe_gemm", "gemm"): "busy_gemm_ns", ("pe_fetch_store", "store"): "busy_store_ns",
              ("pe_dma", "dma_write"): "busy_dma_write_ns"}

FIELDS: tuple[Field, ...] = (
    Field("series", "", "which series the point belongs to: shapes (8 shapes x 3 variants), tiles (1..48 tiles "
                        "along K) or fidelity (some of their points in flow fidelity)"),
    Field("topology", "", "topology file, relative to the topologies folder"),
    Field("variant", "", "operand staging: ref_ref, load_ref or load_load"),
    Field("k_tiles", "1", "tiles along K requested by the tiles series (M = tile_m, N = tile_n)"),
    Field("m", "elements", "rows of A and C"),
    Field("k", "elements", "columns of A, rows of B"),
    Field("n", "elements", "columns of B and C"),
    Field("tile_m", "elements", "GEMM tile rows (pe.gemm.tile_m)"),
    Field("tile_n", "elements", "GEMM tile columns (pe.gemm.tile_n)"),
    Field("tile_k", "elements", "GEMM tile depth (pe.gemm.tile_k)"),
    Field("tiles", "1", "tiles the composite ran (K steps of every output tile)"),
    Field("output_tiles", "1", "output blocks of C"),
    Field("macs", "MAC", "real multiply-accumulates, M*K*N"),
    Field("tile_macs", "MAC", "multiply-accumulates the engine paid for, tiles * tm*tn*tk"),
    Field("fill_ratio", "1", "macs / tile_macs: the efficiency cap of the shape"),
    Field("composite_ns", "ns", "measured composite time (its op-log record)"),
    Field("mac_efficiency", "1", "measured MAC efficiency: macs / (peak MACs per ns * composite_ns)"),
    Field("model_ns", "ns", "independent analytic model from the spec alone: the pipeline bound max over stages of "
                            "fill + the stage's work + drain (kernbench.studies.gemm_model)"),
    Field("model_efficiency", "1", "MAC efficiency the model predicts"),
    Field("model_error", "1", "(model_ns - composite_ns) / composite_ns"),
    Field("model_bottleneck", "", "the stage whose bound sets model_ns"),
    Field("compute_bound_ns", "ns", "compute-bound pipeline F1 + n G + S_n (DMA ignored)"),
    Field("compute_bound_efficiency", "1", "MAC efficiency of the compute-bound pipeline"),
    Field("model_read_ns", "ns", "model: DMA reads per tile (mean)"),
    Field("model_fetch_ns", "ns", "model: FETCH per tile (mean)"),
    Field("model_gemm_ns", "ns", "model: GEMM per tile"),
    Field("model_store_ns", "ns", "model: STORE per tile (mean over all tiles)"),
    Field("model_write_ns", "ns", "model: DMA write per tile (mean over all tiles)"),
    Field("busy_dma_read_ns", "ns", "measured busy time of DMA reads inside the composite"),
    Field("busy_fetch_ns", "ns", "measured busy time of FETCH inside the composite"),
    Field("busy_gemm_ns", "ns", "measured busy time of the GEMM engine inside the composite"),
    Field("busy_store_ns", "ns", "measured busy time of STORE inside the composite"),
    Field("busy_dma_write_ns", "ns", "measured busy time of DMA writes inside the composite"),
    Field("events", "1", "SimPy events the point's engine processed"),
)


def _describe(params: Mapping[str, Scalar]) -> str:
    """A point's short name: ``512×512×512 ref_ref`` or ``48 K tiles ref_ref``."""
    if params["series"] == "tiles":
        return f"{params['k_tiles']} K tiles {params['variant']}"
    return f"{params['m']}×{params['k']}×{params['n']} {params['variant']}"


#: The GEMM study's fidelity panel: the composite's time compared.
FIDELITY_PANEL = FidelityPanel(latency=lambda params: "composite_ns", describe=_describe, label="series")


def _in_fidelity_panel(params: Mapping[str, Scalar]) -> bool:
    size = params["k_tiles"] if params["series"] == "tiles" else (params["m"], params["k"], params["n"])
    return (params["series"], params["variant"], size) in FIDELITY_POINTS


def grid() -> tuple[Point, ...]:
    """The shapes series (shape-major, variants in order), the tiles series (variant-major), then the fidelity
    panel (:data:`FIDELITY_POINTS` in grid order, in flow fidelity)."""
    points = [Point({"series": "shapes"}, {"series": "shapes", "topology": TOPOLOGY, "variant": v, "m": m, "k": k,
                                           "n": n}) for (m, k, n) in SHAPES for v in VARIANTS]
    points += [Point({"series": "tiles"}, {"series": "tiles", "topology": TOPOLOGY, "variant": v, "k_tiles": t})
               for v in VARIANTS for t in TILE_COUNTS]
    points += FIDELITY_PANEL.twins(p for p in list(points) if _in_fidelity_panel(p.params))
    return tuple(points)


def _shape(params: Mapping[str, Scalar], tile: tuple[int, int, int]) -> tuple[int, int, int]:
    if params["series"] == "tiles":
        tm, tn, tk = tile
        return tm, int(params["k_tiles"]) * tk, tn
    return int(params["m"]), int(params["k"]), int(params["n"])


def run_point(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    """Run one composite GEMM in a fresh runtime (timing mode) and return its record (see :data:`FIELDS`)."""
    variant = str(params["variant"])
    if variant not in VARIANTS:
        raise StudyError(f"gemm point: variant {variant!r} is not one of {', '.join(VARIANTS)}")
    graph = study_graph(ctx.topology_dir, str(params["topology"]))
    spec = graph.spec
    tile = tile_shape(spec)
    m, k, n = _shape(params, tile)
    one = DPPolicy(num_cubes=1, num_pes=1)
    torch = RuntimeContext(graph, data=False, fidelity=ctx.fidelity)  # throwaway: nothing to free
    a, b, c = (torch.empty(s, DTYPE, one) for s in ((m, k), (k, n), (m, n)))
    torch.wait(torch.launch("gemm_study", composite_kernel(variant), a, b, c))
    records = list(torch.oplog.records)
    events = torch.engine.events
    (comp,) = [r for r in records if r.op_name == "composite"]
    t_ns = comp.t_end - comp.t_start
    busy = dict.fromkeys(_STAGE_OPS.values(), 0.0)
    pe = comp.component_id.rsplit(".", 1)[0]
    for r in records:
        engine = r.component_id.rsplit(".", 1)
        if engine[0] == pe and comp.t_start <= r.t_start and r.t_end <= comp.t_end:
            key = _STAGE_OPS.get((engine[1], r.op_name))
            if key:
                busy[key] += r.t_end - r.t_start
    model = predict(spec, m, k, n, variant)  # from the spec alone (kernbench.studies.gemm_model)
    peak = peak_macs_per_ns(spec)
    macs = m * k * n
    return {
        "m": m, "k": k, "n": n, "tile_m": tile[0], "tile_n": tile[1], "tile_k": tile[2],
        "tiles": int(comp.params["tiles"]), "output_tiles": -(-m // tile[0]) * -(-n // tile[1]),
        "macs": macs, "tile_macs": int(comp.params["tile_macs"]), "fill_ratio": fill_ratio(spec, m, k, n),
        "composite_ns": t_ns, "mac_efficiency": macs / (peak * t_ns),
        "model_ns": model.total_ns, "model_efficiency": macs / (peak * model.total_ns),
        "model_error": (model.total_ns - t_ns) / t_ns, "model_bottleneck": model.bottleneck,
        "compute_bound_ns": model.compute_bound_ns,
        "compute_bound_efficiency": macs / (peak * model.compute_bound_ns),
        "model_read_ns": model.read_ns, "model_fetch_ns": model.fetch_ns, "model_gemm_ns": model.gemm_ns,
        "model_store_ns": model.store_ns, "model_write_ns": model.write_ns,
        **busy, "events": events,
    }


def _cost(params: Mapping[str, Scalar]) -> float:
    """Rough run time, s: a fixed part plus a part per tile (ref_ref tiles cost most)."""
    if params["series"] == "tiles":
        tiles = int(params["k_tiles"])
    else:
        m, k, n = int(params["m"]), int(params["k"]), int(params["n"])
        tiles = -(-m // 32) * -(-k // 32) * -(-n // 32)
    return 0.03 + 0.0003 * tiles


STUDY = Study(
    name="gemm",
    title="Composite-command GEMM on one PE",
    description="8 shapes x 3 staging variants, and 1..48 tiles along K per variant, measured beside an independent "
                "analytic model",
    grid=grid,
    point=run_point,
    files=lambda params: (str(params["topology"]),),
    overrides=lambda params: {},
    modules=("kernbench.studies.gemm",),
    fields=FIELDS,
    cost=_cost,
    figures=("kernbench.studies.figures.gemm:FIGURES",),
    report=ReportSection("kernbench.studies.report.gemm_tex:generate", "sections/03-gemm",
                         "kernbench.studies.report.gemm_tex:tables"),
    fidelity=FIDELITY_PANEL,
)
