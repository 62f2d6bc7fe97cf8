"""The all-reduce study: the ``ahbm`` backend's hierarchical all-reduce on the three 6-SIP 2×3 topologies.

Three panels, every point one all-reduce over all six SIPs (rank = SIP, one
``[cubes, n]`` f16 tensor per rank split row-wise over its 16 cubes, PE 0 of
each), in timing mode:

* ``topology``: ring_1d, torus_2d and mesh_2d_no_wrap × 12 payloads from
  16 B to 96 KiB per PE, receive rings in TCM;
* ``buffer_kind``: TCM, SRAM and HBM receive rings × the same payloads on
  the torus;
* ``sensitivity``: the three buffer kinds at 64 KiB per PE on the torus
  while the HBM pseudo-channel bandwidth goes from 16 to 32 GB/s (a spec
  override, not a new file);
* ``links``: the three topologies at 64 KiB per PE with TCM rings, each point
  also recording the traffic of every link that carried bytes
  (:mod:`kernbench.studies.allreduce_links`), which the study's
  heatmaps draw.

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
inputs left uninitialised: timing only): earliest PE start to latest PE end
over all ranks. Each point also carries the α–β model of
:mod:`kernbench.studies.allreduce_model` for its configuration.
"""

from __future__ import annotations

from collections.abc import Mapping

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.benches.ccl_allreduce import all_reduce_sips
from kernbench.runtime import RuntimeContext
from kernbench.studies import allreduce_links
from kernbench.studies.allreduce_model import predict
from kernbench.studies.base import Field, Point, PointContext, ReportSection, Scalar, Study, StudyError
from kernbench.studies.graphs import study_graph
from kernbench.topology.sip_topologies import SHIPPED, TORUS_2D

#: The 6-SIP 2×3 file of each shipped SIP topology family (``6sip_2x3_<family>.yaml``).
TOPOLOGIES: tuple[str, ...] = tuple(f"6sip_2x3_{t.name}.yaml" for t in SHIPPED)
TORUS = f"6sip_2x3_{TORUS_2D.name}.yaml"
#: Payloads per PE, bytes: 16 B .. 96 KiB.
PAYLOADS: tuple[int, ...] = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 98304)
BUFFER_KINDS: tuple[str, ...] = ("tcm", "sram", "hbm")
SENSITIVITY_BYTES = 65536
#: Payload per PE (bytes) and receive-ring memory of the links panel.
LINKS_BYTES = 65536
LINKS_KIND = "tcm"
#: HBM pseudo-channel bandwidths of the sensitivity panel, GB/s.
CHANNEL_GBS: tuple[float, ...] = (16.0, 20.0, 24.0, 28.0, 32.0)
CCL_FILE = "ccl.yaml"

FIELDS: tuple[Field, ...] = (
    Field("panel", "", "topology (3 SIP topologies x payloads), buffer_kind (TCM/SRAM/HBM x payloads on the torus) or "
                       "sensitivity (buffer kinds at 64 KiB as the HBM pseudo-channel bandwidth grows) or links (the "
                       "3 SIP topologies at 64 KiB with TCM rings, per-link traffic recorded)"),
    Field("topology", "", "topology file, relative to the topologies folder"),
    Field("bytes_per_pe", "B", "all-reduce payload held by each participating PE"),
    Field("buffer_kind", "", "where the IPCQ receive rings live: tcm, sram or hbm"),
    Field("hbm_channel_gbs", "GB/s", "HBM pseudo-channel bandwidth override (null: the file's value)"),
    Field("link_stats", "", "true: the point also records per-link traffic (links panel only)"),
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


def grid() -> tuple[Point, ...]:
    """Topology panel (topology-major), buffer-kind panel (kind-major), sensitivity panel (kind-major), links
    panel (one point per topology)."""
    points = [Point({"panel": "topology"}, {"topology": t, "bytes_per_pe": b, "buffer_kind": "tcm",
                                            "hbm_channel_gbs": None}) for t in TOPOLOGIES for b in PAYLOADS]
    points += [Point({"panel": "buffer_kind"}, {"topology": TORUS, "bytes_per_pe": b, "buffer_kind": k,
                                                "hbm_channel_gbs": None}) for k in BUFFER_KINDS for b in PAYLOADS]
    points += [Point({"panel": "sensitivity"}, {"topology": TORUS, "bytes_per_pe": SENSITIVITY_BYTES,
                                                "buffer_kind": k, "hbm_channel_gbs": c})
               for k in BUFFER_KINDS for c in CHANNEL_GBS]
    points += [Point({"panel": "links"}, {"topology": t, "bytes_per_pe": LINKS_BYTES, "buffer_kind": LINKS_KIND,
                                          "hbm_channel_gbs": None, "link_stats": True}) for t in TOPOLOGIES]
    return tuple(points)


def overrides(params: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """The spec override of a point: the HBM pseudo-channel bandwidth when the point sets one."""
    c = params.get("hbm_channel_gbs")
    return {} if c is None else {"cube.hbm.channel_bw_gbs": c}


def run_point(params: Mapping[str, Scalar], ctx: PointContext) -> dict[str, Scalar]:
    """Run one all-reduce over every SIP in a fresh runtime (timing mode) and return its record; with
    ``link_stats`` true the record also holds the run window and every link that carried bytes."""
    nbytes, kind = int(params["bytes_per_pe"]), str(params["buffer_kind"])
    if nbytes <= 0 or nbytes % 2:
        raise StudyError(f"allreduce point: bytes_per_pe={nbytes} must be a positive even number (f16 values)")
    if kind not in BUFFER_KINDS:
        raise StudyError(f"allreduce point: buffer_kind {kind!r} is not one of {', '.join(BUFFER_KINDS)}")
    graph = study_graph(ctx.topology_dir, str(params["topology"]), overrides(params))
    spec = graph.spec
    world = spec.system.sips.count
    torch = RuntimeContext(graph, data=False)
    measured, _ = all_reduce_sips(torch, nbytes, kind, values=False)
    model = predict(graph, nbytes, kind)
    record: dict[str, Scalar] = {
        "sip_topology": spec.system.sips.topology, "sips": world,
        "channel_gbs": spec.cube.hbm.bw_gbs / spec.cube.hbm.pseudo_channels,
        "allreduce_ns": measured, "model_ns": model.total_ns, "model_alpha_ns": model.alpha_ns,
        "model_beta_ns_per_b": model.beta_ns_per_byte, "model_error": (model.total_ns - measured) / measured,
        "model_message_ns": model.message_ns, "model_accumulate_ns": model.accumulate_ns,
        "messages": model.messages, "accumulates": model.accumulates,
        "ipcq_messages": sum(1 for r in torch.oplog.records if r.op_name == "ipcq_send"),
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
                "HBM pseudo-channel sensitivity panel, each beside the alpha-beta model, plus the per-link traffic "
                "of each topology at 64 KiB per PE",
    grid=grid,
    point=run_point,
    files=_files,
    overrides=overrides,
    modules=("kernbench.studies.allreduce",),
    fields=FIELDS,
    figures=("kernbench.studies.figures.allreduce:FIGURES", "kernbench.studies.figures.allreduce_links:FIGURES"),
    report=ReportSection("kernbench.studies.report.allreduce_tex:generate", "sections/04-allreduce",
                         "kernbench.studies.report.allreduce_tex:tables"),
)
