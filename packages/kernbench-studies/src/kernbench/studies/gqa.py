"""The GQA study: fused grouped-query attention from the attention library, in three panels.

Every point runs one attention call in a fresh runtime on ``topology.yaml`` in timing mode (G = 8 query
heads per KV head, head size 64, seeded float16 inputs; the values do not change the timing):

* ``headline``: the four panels of the ``gqa-headline`` bench (single- and four-user prefill, single- and
  four-user decode);
* ``long_context``: decode of one user over 8 cubes × 8 PEs with the four long-context partitionings
  (``cube_sp_pe_tp``, ``cube_repl_pe_tp``, ``cube_repl_pe_sp``, ``cube_sp_pe_sp``) at S = 4K, 16K and 128K
  keys;
* ``dispatch``: decode on one PE (``single_pe``) with the local loops ``opt1``, ``opt2`` and ``opt3`` at 16 and
  32 KV tiles of 64 keys, so that the PE_CPU's dispatch cycles per KV tile follow from the difference;
* ``reference``: the earlier report's workloads (:mod:`kernbench.studies.gqa_reference`) with our kernels and,
  when the environment variable ``KERNBENCH_EARLIER_KERNELS`` names the folder of the earlier team's kernel
  files, with theirs, each once as modelled and once with the PE_CPU dispatch cost set to zero (``dispatch:
  zero``, a spec override of ``pe.cost_model``); the headline panels run with zero dispatch cost too.

A ``fidelity`` panel reruns a few points of the headline, long-context and dispatch panels
(:data:`FIDELITY_POINTS`) in flow fidelity, each beside its packet point (:mod:`kernbench.studies.fidelity`).

Each point reports the call's latency (first PE entering an attention kernel to the last leaving one), its
operation mix, engine occupancy, IPCQ messages, the KV bytes held per cube, and the dispatch cycles and
commands of its kernels.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernbench.benches.gqa_headline import PANELS, run_panel
from kernbench.layers.attention import gqa_decode
from kernbench.layers.attention.benchkit import inputs
from kernbench.runtime import RuntimeContext
from kernbench.studies import gqa_reference
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
from kernbench.studies.graphs import study_graph
from kernbench.studies.results import select

TOPOLOGY = "topology.yaml"
G, D_HEAD, TILE = 8, 64, 64
LONG_PARTITIONS: tuple[str, ...] = ("cube_sp_pe_tp", "cube_repl_pe_tp", "cube_repl_pe_sp", "cube_sp_pe_sp")
LONG_KEYS: tuple[int, ...] = (4096, 16384, 131072)
LONG_CUBES, LONG_PES = 8, 8
DISPATCH_VARIANTS: tuple[str, ...] = ("opt1", "opt2", "opt3")
DISPATCH_TILES: tuple[int, ...] = (16, 32)
OPS = ("gemm", "math", "dma_read", "dma_write", "ipcq_copy")
ENGINES = ("pe_dma", "pe_fetch_store", "pe_gemm", "pe_math", "pe_cpu")
#: PE_CPU dispatch cost: as the topology gives it, or zero (both ``pe.cost_model`` fields overridden).
DISPATCH_MODES: tuple[str, ...] = ("model", "zero")
ZERO_DISPATCH: dict[str, Scalar] = {"pe.cost_model.fixed_cycles": 0.0, "pe.cost_model.r_cycles_per_byte": 0.0}
#: The fidelity panel: (panel, what) of the points rerun in flow fidelity, ``what`` a headline panel's name, a
#: long-context (partition, keys) or a dispatch (variant, KV tiles): the four headline panels, every long-context
#: partitioning at 4K keys, three of them at 16K, the replicated tensor-parallel one at 128K (its packet point is
#: the study's costliest, its flow point costs seconds; the others at 128K cost tens of seconds of flow fidelity,
#: a minute for cube_repl_pe_sp, which would grow a cold run of every study by more than a tenth), and one dispatch
#: point.
FIDELITY_POINTS: tuple[tuple[str, object], ...] = (
    *(("headline", p.name) for p in PANELS),
    *(("long_context", (part, 4096)) for part in LONG_PARTITIONS),
    *(("long_context", (part, 16384)) for part in ("cube_sp_pe_tp", "cube_repl_pe_tp", "cube_sp_pe_sp")),
    ("long_context", ("cube_repl_pe_tp", 131072)),
    ("dispatch", ("opt2", 32)))

FIELDS: tuple[Field, ...] = (
    Field("panel", "", "headline (the four bench panels), long_context (four decode partitionings over 8 cubes x 8 "
                       "PEs at several S), dispatch (one PE, opt1/opt2/opt3 at 16 and 32 KV tiles) or reference "
                       "(the earlier report's workloads with its kernels and with ours), or fidelity (some of "
                       "their points in flow fidelity)"),
    Field("topology", "", "topology file, relative to the topologies folder"),
    Field("name", "", "headline panel name"),
    Field("partition", "", "decode partitioning of the long-context panel"),
    Field("keys", "keys", "KV sequence length S"),
    Field("variant", "", "local loop of the dispatch panel (opt1, opt2, opt3)"),
    Field("kv_tiles", "1", "KV tiles of 64 keys (dispatch panel)"),
    Field("workload", "", "the earlier report's workload (reference panel)"),
    Field("kernels", "", "whose kernels ran the reference workload: ours or earlier (the earlier team's files)"),
    Field("dispatch", "", "PE_CPU dispatch cost: model (as the topology gives it) or zero"),
    Field("kernel_digest", "", "SHA-256 of the earlier kernel file that ran (earlier kernels only)"),
    Field("latency_ns", "ns", "first PE entering an attention kernel to the last PE leaving one"),
    Field("pes_active", "1", "PEs that attended keys of their own"),
    Field("ipcq_intra_cube", "1", "PE_IPCQ messages between PEs of one cube"),
    Field("ipcq_inter_cube", "1", "PE_IPCQ messages between cubes"),
    Field("kv_bytes_total", "B", "K and V bytes held over all cubes, replicas included"),
    Field("kv_bytes_max_cube", "B", "K and V bytes held by the fullest cube"),
    *(Field(f"op_{o}", "1", f"{o} operations of the call's launches") for o in OPS),
    *(Field(f"occupancy_{e}_ns", "ns", f"summed busy time of the {e} engines") for e in ENGINES),
    Field("dispatch_cycles", "cycles", "PE_CPU dispatch cycles of the call's kernels"),
    Field("commands", "1", "commands the kernels dispatched"),
    Field("events", "1", "SimPy events the point's engine processed"),
)


def reference_points() -> list[Point]:
    """The reference panel: every workload with our kernels, and with the earlier kernels when their folder is
    set (``KERNBENCH_EARLIER_KERNELS``), each at both dispatch modes; the headline panels at zero dispatch."""
    folder = gqa_reference.kernels_dir()
    points = []
    for w in gqa_reference.WORKLOADS:
        runs: list[dict[str, Scalar]] = [{"kernels": "ours"}]
        if folder is not None and w.kernel is not None:
            digest = gqa_reference.kernel_digest(gqa_reference.kernel_file(folder, w))
            runs.append({"kernels": "earlier", "kernel_digest": digest})
        points += [Point({"panel": "reference"}, {"panel": "reference", "topology": TOPOLOGY, "workload": w.name,
                                                  **run, "dispatch": mode})
                   for run in runs for mode in DISPATCH_MODES]
    points += [Point({"panel": "reference"}, {"panel": "headline", "topology": TOPOLOGY, "name": p.name,
                                              "dispatch": "zero"}) for p in PANELS]
    return points


def _what(params: Mapping[str, Scalar]) -> object:
    """What a point of the headline, long-context or dispatch panel runs (as :data:`FIDELITY_POINTS` names it)."""
    panel = params.get("panel")
    if panel == "headline":
        return params.get("name")
    if panel == "long_context":
        return (params.get("partition"), params.get("keys"))
    return (params.get("variant"), params.get("kv_tiles"))


def _describe(params: Mapping[str, Scalar]) -> str:
    """A point's short name: ``decode_c4_p8``, ``cube_repl_pe_tp 16384 keys`` or ``opt2 32 KV tiles``."""
    panel = params.get("panel")
    if panel == "headline":
        return str(params["name"])
    if panel == "long_context":
        return f"{params['partition']} {params['keys']} keys"
    if panel == "dispatch":
        return f"{params['variant']} {params['kv_tiles']} KV tiles"
    return f"{params.get('workload')} {params.get('kernels')}"


#: The GQA study's fidelity panel: the attention call's latency compared.
FIDELITY_PANEL = FidelityPanel(latency=lambda params: "latency_ns", describe=_describe)


def grid() -> tuple[Point, ...]:
    """Headline panels, the long-context partitionings (partition-major), the dispatch panel, the reference panel
    (:func:`reference_points`), then the fidelity panel (:data:`FIDELITY_POINTS` in grid order, in flow
    fidelity)."""
    points = [Point({"panel": "headline"}, {"panel": "headline", "topology": TOPOLOGY, "name": p.name})
              for p in PANELS]
    points += [Point({"panel": "long_context"}, {"panel": "long_context", "topology": TOPOLOGY, "partition": part,
                                                 "keys": s}) for part in LONG_PARTITIONS for s in LONG_KEYS]
    points += [Point({"panel": "dispatch"}, {"panel": "dispatch", "topology": TOPOLOGY, "variant": v, "kv_tiles": t})
               for v in DISPATCH_VARIANTS for t in DISPATCH_TILES]
    points += reference_points()
    points += FIDELITY_PANEL.twins(p for p in list(points) if p.labels["panel"] == p.params["panel"]
                                   and (p.params["panel"], _what(p.params)) in FIDELITY_POINTS)
    return tuple(points)


def overrides(params: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """The spec override of a point: zero PE_CPU dispatch cost when ``dispatch`` is ``zero``."""
    mode = params.get("dispatch", "model")
    if mode not in DISPATCH_MODES:
        raise StudyError(f"gqa point: dispatch={mode!r}; use one of {', '.join(DISPATCH_MODES)}")
    return dict(ZERO_DISPATCH) if mode == "zero" else {}


def headline_rows(doc: dict) -> list[dict]:
    """The headline panels' rows as modelled (the zero-dispatch runs of the same panels left out)."""
    return select(doc, panel="headline", dispatch=None)


def _call(torch, params: Mapping[str, Scalar]):
    panel = params["panel"]
    if panel == "headline":
        found = [p for p in PANELS if p.name == params["name"]]
        if not found:
            raise StudyError(f"gqa point: unknown headline panel {params['name']!r}; use one of "
                             f"{', '.join(p.name for p in PANELS)}")
        return run_panel(torch, found[0])
    if panel == "long_context":
        q, k, v = inputs(1, G, 1, 1, int(params["keys"]), D_HEAD)
        return gqa_decode(torch, q, k, v, partition=str(params["partition"]), pes=LONG_PES, cubes=LONG_CUBES,
                          variant="opt2", tile=TILE)
    if panel == "dispatch":
        q, k, v = inputs(1, G, 1, 1, TILE * int(params["kv_tiles"]), D_HEAD)
        return gqa_decode(torch, q, k, v, partition="single_pe", variant=str(params["variant"]), tile=TILE)
    if panel == "reference":
        return gqa_reference.run(torch, params)
    raise StudyError(f"gqa point: unknown panel {panel!r}; use headline, long_context, dispatch or reference")


def run_point(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    """Run one attention call in a fresh runtime (timing mode) and return its record (see :data:`FIELDS`)."""
    graph = study_graph(ctx.topology_dir, str(params["topology"]), overrides(params))
    torch = RuntimeContext(graph, data=False, fidelity=ctx.fidelity)
    r = _call(torch, params)
    dispatch = torch.oplog.records.named("dispatch")
    kv = r.kv_bytes_per_cube
    return {
        "latency_ns": r.latency_ns, "pes_active": r.pes_active,
        "ipcq_intra_cube": r.ipcq_messages["intra_cube"], "ipcq_inter_cube": r.ipcq_messages["inter_cube"],
        "kv_bytes_total": int(sum(kv.values())), "kv_bytes_max_cube": int(max(kv.values(), default=0)),
        **{f"op_{o}": int(r.op_counts.get(o, 0)) for o in OPS},
        **{f"occupancy_{e}_ns": float(r.engines[e]["occupancy_ns"]) for e in ENGINES},
        "dispatch_cycles": float(sum(x.params.get("cycles", 0.0) for x in dispatch)), "commands": len(dispatch),
        "events": torch.engine.events,
    }


def _cost(params: Mapping[str, Scalar]) -> float:
    """Rough run time, s: deploying a replicated 128K cache dominates (in packet fidelity: a fidelity-panel point
    in flow fidelity deploys it in seconds)."""
    if params.get("workload") == gqa_reference.SWEEP:
        return 3.0
    if params["panel"] != "long_context":
        return 0.3
    scale = int(params["keys"]) / 131072
    if params.get("fidelity") == "flow":
        return {"cube_repl_pe_sp": 12.0}.get(str(params["partition"]), 2.0) * scale + 0.5
    return {"cube_repl_pe_tp": 70.0, "cube_repl_pe_sp": 45.0}.get(str(params["partition"]), 8.0) * scale + 0.5


STUDY = Study(
    name="gqa",
    title="Fused grouped-query attention",
    description="the four headline panels, four long-context decode partitionings over 8 cubes x 8 PEs at 4K, 16K "
                "and 128K keys, opt1/opt2/opt3 dispatch per KV tile on one PE, and the earlier report's workloads "
                "with its kernels (KERNBENCH_EARLIER_KERNELS) and ours, with and without dispatch cost",
    grid=grid,
    point=run_point,
    files=lambda params: (str(params["topology"]),),
    overrides=overrides,
    modules=("kernbench.studies.gqa",),
    fields=FIELDS,
    cost=_cost,
    optional=lambda params: params.get("kernels") == "earlier",
    figures=("kernbench.studies.figures.gqa:FIGURES",),
    report=ReportSection("kernbench.studies.report.gqa_tex:generate", "sections/05-gqa",
                         "kernbench.studies.report.gqa_tex:tables"),
    fidelity=FIDELITY_PANEL,
)
