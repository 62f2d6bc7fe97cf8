"""The all-reduce study: the ``ahbm`` backend's hierarchical all-reduce on the three 6-SIP 2×3 topologies.

Every point is one all-reduce over all six SIPs (rank = SIP, one
``[cubes, n]`` f16 tensor per rank split row-wise over its 16 cubes, PE 0 of
each), in timing mode. The payloads are the earlier report's grid (16 B to
96 KiB per PE, :data:`PAYLOADS`), so its points compare one to one. Panels:

* ``topology``: ring_1d, torus_2d and mesh_2d_no_wrap × the payloads, receive
  rings in TCM;
* ``buffer_kind``: TCM, SRAM and HBM receive rings × the same payloads on
  the torus;
* ``sensitivity``: the three buffer kinds at 64 KiB per PE on the torus
  while the HBM pseudo-channel bandwidth goes from 16 to 32 GB/s (a spec
  override, not a new file);
* ``links``: the three topologies at 64 KiB per PE with TCM rings, each point
  also recording the traffic of every link that carried bytes
  (:mod:`kernbench.studies.allreduce_links`), which the study's
  heatmaps draw;
* two ablations of the topology panel, which say why the topologies order as
  they do: ``exchange_only`` runs it with one cube per SIP (a spec override
  of the cube mesh to 1×1), so the all-reduce is the exchange between SIPs
  and nothing else; ``schedule`` runs it with the one-way exchange of
  :mod:`kernbench.studies.allreduce_oneway` (a different number of serial
  exchange steps per topology, the same kernel inside each SIP).

A ``fidelity`` panel reruns a few points of the topology, buffer-kind and ablation panels
(:data:`FIDELITY_POINTS`) in flow fidelity, each beside its packet point (:mod:`kernbench.studies.fidelity`).

A links point runs the same configuration as the topology panel's 64 KiB
point plus the param ``link_stats: true``, so it is a simulation of its own
(three more runs) rather than a record shared with that point: a shared
record would carry the long ``links`` text into the topology panel (and,
on the torus, into the buffer-kind panel, which shares that simulation too),
or the point function would have to guess its panel from its payload. The
extra param changes nothing the engine does; a test checks that the two
records agree on every other value.

The latency is the ``ccl-allreduce`` bench's ``allreduce_ns``, measured by the
bench's own function (:func:`kernbench.benches.ccl_allreduce.all_reduce_sips`,
inputs left uninitialised: timing only; the schedule ablation initialises
its process group with the ablation's collective configuration instead):
earliest PE start to latest PE end over all ranks. Each point splits that
span into the reduction inside the SIPs, the exchange between them and the
broadcast back (:func:`phase_split`), and carries the α–β model of
:mod:`kernbench.studies.allreduce_model` for its configuration.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.benches.ccl_allreduce import SHARDS, all_reduce_sips
from kernbench.ccl import collective_span_ns, register_algorithm
from kernbench.runtime import RuntimeContext
from kernbench.studies import allreduce_links, allreduce_oneway
from kernbench.studies.allreduce_model import SCHEDULES, predict
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
from kernbench.topology import naming as nm

TOPOLOGIES, TORUS = SIX_SIP_FILES, SIX_SIP_TORUS  # the 6-SIP 2×3 file of each shipped SIP topology family
#: Payloads per PE, bytes: 16 B .. 96 KiB, the earlier report's grid (the bytes_per_pe column of its
#: ../shared/seeds/extracted/src/kernbench/benches/1H_milestone_output/ccl/summary.csv), so that every point has
#: a point of that report to compare with.
PAYLOADS: tuple[int, ...] = (16, 64, 128, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 98304)
BUFFER_KINDS: tuple[str, ...] = ("tcm", "sram", "hbm")
SENSITIVITY_BYTES = 65536
#: Payload per PE (bytes) and receive-ring memory of the links panel.
LINKS_BYTES = 65536
LINKS_KIND = "tcm"
#: HBM pseudo-channel bandwidths of the sensitivity panel, GB/s.
CHANNEL_GBS: tuple[float, ...] = (16.0, 20.0, 24.0, 28.0, 32.0)
CCL_FILE = "ccl.yaml"
#: The exchange-only ablation's cube mesh per SIP (``WxH``): one cube, so nothing happens inside a SIP.
ONE_CUBE = "1x1"
#: The schedule ablation's exchange (a key of :data:`kernbench.studies.allreduce_model.SCHEDULES`).
ONE_WAY = "one_way"
#: The fidelity panel: (panel, topology, bytes per PE, buffer kind) of the points rerun in flow fidelity: every
#: topology at a small and a large payload, the SRAM and HBM rings at the large one, and each ablation on the
#: torus at the large one.
FIDELITY_POINTS: tuple[tuple[str, str, int, str], ...] = (
    *(("topology", t, b, "tcm") for t in TOPOLOGIES for b in (1024, 65536)),
    *(("buffer_kind", TORUS, 65536, k) for k in ("sram", "hbm")),
    ("exchange_only", TORUS, 65536, "tcm"), ("schedule", TORUS, 65536, "tcm"))

FIELDS: tuple[Field, ...] = (
    Field("panel", "", "topology (3 SIP topologies x payloads), buffer_kind (TCM/SRAM/HBM x payloads on the torus), "
                       "sensitivity (buffer kinds at 64 KiB as the HBM pseudo-channel bandwidth grows), links (the "
                       "3 SIP topologies at 64 KiB with TCM rings, per-link traffic recorded), exchange_only (the "
                       "topology panel with one cube per SIP) or schedule (the topology panel with the one-way "
                       "exchange between SIPs), or fidelity (some of their points in flow fidelity)"),
    Field("topology", "", "topology file, relative to the topologies folder"),
    Field("bytes_per_pe", "B", "all-reduce payload held by each participating PE"),
    Field("buffer_kind", "", "where the IPCQ receive rings live: tcm, sram or hbm"),
    Field("hbm_channel_gbs", "GB/s", "HBM pseudo-channel bandwidth override (null: the file's value)"),
    Field("link_stats", "", "true: the point also records per-link traffic (links panel only)"),
    Field("cube_mesh", "", "exchange_only panel: the cube mesh of every SIP, WxH (a spec override; null: the "
                           "file's)"),
    Field("schedule", "", "schedule panel: the exchange between SIPs, one_way (null: the shipped "
                          "lrab_hierarchical_allreduce)"),
    Field("sip_topology", "", "system.sips.topology of the file"),
    Field("sips", "1", "ranks (one per SIP)"),
    Field("channel_gbs", "GB/s", "HBM pseudo-channel bandwidth the point ran with"),
    Field("allreduce_ns", "ns", "measured all-reduce latency: earliest PE start to latest PE end over all ranks"),
    Field("model_ns", "ns", "alpha-beta model of the same configuration"),
    Field("model_alpha_ns", "ns", "the model's latency term (payload-independent part)"),
    Field("model_beta_ns_per_b", "ns/B", "the model's per-byte term"),
    Field("model_error", "1", "(model_ns - allreduce_ns) / allreduce_ns"),
    Field("model_message_ns", "ns", "the model's time in messages on the critical path"),
    Field("model_accumulate_ns", "ns", "the model's time in accumulates on the critical path"),
    Field("messages", "1", "IPCQ messages on the model's critical path"),
    Field("accumulates", "1", "accumulate steps on the model's critical path"),
    Field("exchange_messages", "1", "messages of the exchange between SIPs on the model's critical path (its "
                                    "serial steps)"),
    Field("exchange_accumulates", "1", "accumulates of the exchange between SIPs on the model's critical path"),
    Field("reduce_ns", "ns", "measured: earliest PE start until the last root cube has taken the last partial "
                             "sum of its own SIP (the reduction inside the SIPs; 0 with one cube per SIP)"),
    Field("exchange_ns", "ns", "measured: from then until the last root cube starts its broadcast back into its "
                               "SIP (with one cube per SIP, ends its kernel)"),
    Field("broadcast_ns", "ns", "measured: from then to the latest PE end; reduce_ns + exchange_ns + "
                                "broadcast_ns = allreduce_ns"),
    Field("ipcq_messages", "1", "IPCQ messages the run delivered (all ranks)"),
    Field("events", "1", "SimPy events the point's engine processed"),
    Field("window_ns", "ns", "links panel: the run window, time 0 to the end of the simulation; a link's "
                             "utilisation is busy_ns / window_ns"),
    Field("links_used", "1", "links panel: directed links that carried bytes"),
    Field("link_bytes", "B", "links panel: bytes summed over every link (a transfer counts once per link it "
                             "crosses)"),
    Field("busiest_link", "", "links panel: the link with the highest utilisation (src → dst)"),
    Field("busiest_utilisation", "1", "links panel: busy_ns / window_ns of busiest_link"),
    Field("links", "", "links panel: JSON array of [src, dst, kind, bytes (B), packets, busy_ns (ns)], one row per "
                       "directed link that carried bytes, in graph edge order (results.json only, not in the CSV)",
          csv=False),
)


def _describe(params: Mapping[str, Scalar]) -> str:
    """A point's short name: ``torus_2d 64 KiB tcm`` (with ``1x1 cubes`` or ``one_way`` for an ablation)."""
    topo = str(params["topology"]).removeprefix("6sip_2x3_").removesuffix(".yaml")
    b = int(params["bytes_per_pe"])
    size = f"{b // 1024} KiB" if b >= 1024 and b % 1024 == 0 else f"{b} B"
    extra = [f"{params['cube_mesh']} cubes"] if params.get("cube_mesh") else []
    extra += [str(params["schedule"])] if params.get("schedule") else []
    return " ".join([topo, size, str(params["buffer_kind"]), *extra])


#: The all-reduce study's fidelity panel: the all-reduce's latency compared.
FIDELITY_PANEL = FidelityPanel(latency=lambda params: "allreduce_ns", describe=_describe)


def grid() -> tuple[Point, ...]:
    """Topology panel (topology-major), buffer-kind panel (kind-major), sensitivity panel (kind-major), links
    panel (one point per topology), the exchange-only and schedule ablations (topology-major), then the fidelity
    panel (:data:`FIDELITY_POINTS` in grid order, in flow fidelity)."""
    points = [Point({"panel": "topology"}, {"topology": t, "bytes_per_pe": b, "buffer_kind": "tcm",
                                            "hbm_channel_gbs": None}) for t in TOPOLOGIES for b in PAYLOADS]
    points += [Point({"panel": "buffer_kind"}, {"topology": TORUS, "bytes_per_pe": b, "buffer_kind": k,
                                                "hbm_channel_gbs": None}) for k in BUFFER_KINDS for b in PAYLOADS]
    points += [Point({"panel": "sensitivity"}, {"topology": TORUS, "bytes_per_pe": SENSITIVITY_BYTES,
                                                "buffer_kind": k, "hbm_channel_gbs": c})
               for k in BUFFER_KINDS for c in CHANNEL_GBS]
    points += [Point({"panel": "links"}, {"topology": t, "bytes_per_pe": LINKS_BYTES, "buffer_kind": LINKS_KIND,
                                          "hbm_channel_gbs": None, "link_stats": True}) for t in TOPOLOGIES]
    points += [Point({"panel": "exchange_only"}, {"topology": t, "bytes_per_pe": b, "buffer_kind": "tcm",
                                                  "hbm_channel_gbs": None, "cube_mesh": ONE_CUBE})
               for t in TOPOLOGIES for b in PAYLOADS]
    points += [Point({"panel": "schedule"}, {"topology": t, "bytes_per_pe": b, "buffer_kind": "tcm",
                                             "hbm_channel_gbs": None, "schedule": ONE_WAY})
               for t in TOPOLOGIES for b in PAYLOADS]
    points += FIDELITY_PANEL.twins(p for p in list(points) if (p.labels["panel"], p.params["topology"],
                                                              p.params["bytes_per_pe"], p.params["buffer_kind"])
                                   in FIDELITY_POINTS)
    return tuple(points)


def overrides(params: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """The spec overrides of a point: the HBM pseudo-channel bandwidth and the cube mesh, when the point sets
    them."""
    out: dict[str, Scalar] = {}
    c = params.get("hbm_channel_gbs")
    if c is not None:
        out["cube.hbm.channel_bw_gbs"] = c
    mesh = params.get("cube_mesh")
    if mesh is not None:
        w, sep, h = str(mesh).partition("x")
        if not (sep and w.isdigit() and h.isdigit() and int(w) > 0 and int(h) > 0):
            raise StudyError(f"allreduce point: cube_mesh {mesh!r} must be WxH with positive integers, e.g. 1x1")
        out["sip.cube_mesh.w"], out["sip.cube_mesh.h"] = int(w), int(h)
    return out


def all_reduce_with_config(torch: RuntimeContext, nbytes: int, kind: str, ccl_yaml: str) -> float:
    """One timing-only all-reduce over every SIP, as :func:`~kernbench.benches.ccl_allreduce.all_reduce_sips`
    runs it, but with the process group initialised from the collective configuration ``ccl_yaml`` (the text of
    a ``ccl.yaml``); returns ``allreduce_ns``."""
    spec = torch.spec
    world, cubes = spec.system.sips.count, spec.cubes_per_sip
    with tempfile.TemporaryDirectory(prefix="kernbench-ccl-") as folder:
        config = Path(folder) / "ccl.yaml"
        config.write_text(ccl_yaml, encoding="utf-8")

        def worker(rank: int) -> None:
            torch.ahbm.set_device(rank)
            torch.distributed.init_process_group(backend="ahbm", buffer_kind=kind, config=str(config))
            torch.distributed.all_reduce(torch.empty((cubes, nbytes // 2), "float16", SHARDS))

        torch.multiprocessing.spawn(worker, nprocs=world)
    return collective_span_ns([res for _, res in torch.distributed.results])


def phase_split(torch: RuntimeContext) -> dict[str, float]:
    """The run's span cut at two moments read from its op log. A root cube (PE 0 of the cube the kernel reduces
    each SIP to) ends its reduction when it has taken the last partial sum from its own SIP (the end of that
    copy out of its ring; with one cube per SIP, its kernel's start), and starts its broadcast with its first
    message to a cube after its first message to or from another SIP (with one cube per SIP, at its kernel's
    end). ``reduce_ns`` runs from the earliest PE start to the last root's end of reduction, ``exchange_ns``
    from there to the last root's start of broadcast and ``broadcast_ns`` from there to the latest PE end, so
    the three add up to the span; with one SIP the exchange is empty."""
    spec = torch.spec
    w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    root = ((h - 1) // 2) * w + (w - 1) // 2
    roots = {nm.pe_block(s, root, 0, "pe_ipcq"): s for s in range(spec.system.sips.count)}
    cpus = {nm.pe_block(s, root, 0, "pe_cpu"): s for s in roots.values()}
    ops: dict[int, list] = {s: [] for s in roots.values()}
    kernel: dict[int, tuple[float, float]] = {}
    t0, t1 = float("inf"), float("-inf")
    for r in torch.oplog.records.named("kernel", "ipcq_send", "ipcq_copy"):
        if r.op_name == "kernel":
            t0, t1 = min(t0, r.t_start), max(t1, r.t_end)
            if r.component_id in cpus:
                kernel[cpus[r.component_id]] = (r.t_start, r.t_end)
        elif r.component_id in roots and r.op_name in ("ipcq_send", "ipcq_copy"):
            ops[roots[r.component_id]].append(r)
    reduced, broadcast = [], []
    for s, records in ops.items():
        between = [r for r in records if str(r.params.get("dir", "")).startswith("global_")]
        if not between:
            continue
        first = min(r.t_start for r in between)
        inside = [r.t_end for r in records if r.op_name == "ipcq_copy" and r.t_start < first
                  and not str(r.params["dir"]).startswith("global_")]
        back = [r.t_start for r in records if r.op_name == "ipcq_send" and r.t_start >= first
                and not str(r.params["dir"]).startswith("global_")]
        reduced.append(max(inside) if inside else kernel[s][0])
        broadcast.append(min(back) if back else kernel[s][1])
    if not reduced:  # one SIP: no exchange
        return {"reduce_ns": t1 - t0, "exchange_ns": 0.0, "broadcast_ns": 0.0}
    start = max(reduced)
    end = max(max(broadcast), start)
    return {"reduce_ns": start - t0, "exchange_ns": end - start, "broadcast_ns": t1 - end}


def run_point(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    """Run one all-reduce over every SIP in a fresh runtime (timing mode) and return its record; with
    ``link_stats`` true the record also holds the run window and every link that carried bytes."""
    nbytes, kind = int(params["bytes_per_pe"]), str(params["buffer_kind"])
    schedule = params.get("schedule") or "lrab"
    if nbytes <= 0 or nbytes % 2:
        raise StudyError(f"allreduce point: bytes_per_pe={nbytes} must be a positive even number (f16 values)")
    if kind not in BUFFER_KINDS:
        raise StudyError(f"allreduce point: buffer_kind {kind!r} is not one of {', '.join(BUFFER_KINDS)}")
    if schedule not in SCHEDULES:
        raise StudyError(f"allreduce point: schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
    graph = study_graph(ctx.topology_dir, str(params["topology"]), overrides(params))
    spec = graph.spec
    world = spec.system.sips.count
    torch = RuntimeContext(graph, data=False, fidelity=ctx.fidelity)
    if schedule == ONE_WAY:
        # registered here, in the process that runs the point, so that importing the study adds nothing to the
        # algorithm modules every other ccl.yaml may name
        register_algorithm(allreduce_oneway)
        measured = all_reduce_with_config(torch, nbytes, kind, allreduce_oneway.CCL_YAML)
    else:
        measured, _ = all_reduce_sips(torch, nbytes, kind, values=False)
    model = predict(graph, nbytes, kind, schedule)
    record: dict[str, Scalar] = {
        "sip_topology": spec.system.sips.topology, "sips": world,
        "channel_gbs": spec.cube.hbm.bw_gbs / spec.cube.hbm.pseudo_channels,
        "allreduce_ns": measured, "model_ns": model.total_ns, "model_alpha_ns": model.alpha_ns,
        "model_beta_ns_per_b": model.beta_ns_per_byte, "model_error": (model.total_ns - measured) / measured,
        "model_message_ns": model.message_ns, "model_accumulate_ns": model.accumulate_ns,
        "messages": model.messages, "accumulates": model.accumulates,
        "exchange_messages": model.exchange_messages, "exchange_accumulates": model.exchange_accumulates,
        **phase_split(torch),
        "ipcq_messages": len(torch.oplog.records.named("ipcq_send")),
        "events": torch.engine.events,
    }
    if params.get("link_stats"):
        record.update(link_record(torch))
    return record


def link_record(torch: RuntimeContext) -> dict[str, Scalar]:
    """The per-link part of a record, as the run stands now: ``window_ns`` (ns), the summary scalars and the
    ``links`` rows of every link that carried bytes (:mod:`~kernbench.studies.allreduce_links`)."""
    window = float(torch.now_ns)
    text = allreduce_links.encode(torch.link_stats())
    return {"window_ns": window, **allreduce_links.summary(allreduce_links.decode(text), window), "links": text}


def _files(params: Mapping[str, Scalar]) -> tuple[str, ...]:
    return (str(params["topology"]), CCL_FILE)


STUDY = Study(
    name="allreduce",
    title="Hierarchical all-reduce over six SIPs",
    description="3 SIP topologies x 12 payloads, TCM/SRAM/HBM receive rings x 12 payloads on the torus, and the "
                "HBM pseudo-channel sensitivity panel, each beside the alpha-beta model, the per-link traffic "
                "of each topology at 64 KiB per PE, and two ablations of the topology panel (one cube per SIP; a "
                "one-way exchange between SIPs)",
    grid=grid,
    point=run_point,
    files=_files,
    overrides=overrides,
    modules=("kernbench.studies.allreduce",),
    fields=FIELDS,
    figures=("kernbench.studies.figures.allreduce:FIGURES", "kernbench.studies.figures.allreduce_links:FIGURES"),
    report=ReportSection("kernbench.studies.report.allreduce_tex:generate", "sections/04-allreduce",
                         "kernbench.studies.report.allreduce_tex:tables"),
    fidelity=FIDELITY_PANEL,
)
