"""All-reduce study heatmaps: the links panel's per-link traffic of each SIP topology, drawn on the whole tray.

One figure per SIP topology, from the links-panel point of ``results.json``
and the compiled topology the point ran on, with
:func:`kernbench.topology.heatmap.render_heatmap`: the drawing code of
``kernbench links FILE --heatmap``, given the same values (each link's
utilisation, ``busy_ns / window_ns``), the same busiest-link details and the
same subtitle, so the study's figure of a topology is the figure that
command draws for a links file of the same run at ``--scope system``.

The scope is the whole tray: the three topologies run the same reduction
and broadcast inside every SIP and differ only in which SIPs exchange
partial sums, which shows on the SIPs' PCIe links and in which SIPs' root
cubes work hardest (the mesh's middle SIPs talk to three neighbours). A
one-SIP view would show nearly the same picture three times.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from kernbench.studies import allreduce_links
from kernbench.studies.base import StudyError
from kernbench.studies.cache import file_digest
from kernbench.studies.figures.common import FigureSpec, kib
from kernbench.studies.graphs import study_graph
from kernbench.studies.results import one
from kernbench.topology import TopologyGraph
from kernbench.topology.heatmap import render_heatmap
from kernbench.topology.sip_topologies import SHIPPED

COMMAND = "kernbench study allreduce"
SCOPE = "system"
#: SIP topology -> figure tag (the strategy's label, letters only: the report names each figure's macro after it).
TAGS = {t.name: t.label for t in SHIPPED}
#: Resolution of the rasterised link layer (a whole tray has more than 3,000 links), dots per inch.
DPI = 200


def links_row(doc: dict, sip_topology: str) -> dict:
    """The links-panel row of ``sip_topology`` (:class:`SchemaError` when the results lack it)."""
    return one(doc, panel="links", sip_topology=sip_topology)


def recorded_graph(doc: dict, row: dict, topology_dir: Path) -> TopologyGraph:
    """The compiled topology ``row`` ran on, read from ``topology_dir``; :class:`StudyError` unless the file there
    is the one the results were recorded with (same SHA-256 as in their provenance)."""
    name = str(row["topology"])
    recorded = doc["provenance"].get("topology_files", {}).get(name)
    here = file_digest(Path(topology_dir) / name)
    if recorded is None or here != recorded:
        what = "does not exist" if here is None else ("is not listed in the results' provenance" if recorded is None
                                                       else "differs from the file the results were recorded on")
        raise StudyError(f"cannot draw the all-reduce heatmap of {row['sip_topology']}: {Path(topology_dir) / name} "
                         f"{what}; rerun `{COMMAND}` (or pass the topology folder it used)")
    return study_graph(topology_dir, name)


def draw_links(doc: dict, topology_dir: Path, sip_topology: str):
    """The heatmap of the links point of ``sip_topology``: every link of the tray coloured by its utilisation
    (busy time over the run window, 0..1), the busiest drawn link labelled with its bytes and packets."""
    row = links_row(doc, sip_topology)
    rows = allreduce_links.decode(row["links"], f"allreduce results, links point of {sip_topology}")
    window = float(row["window_ns"])
    graph = recorded_graph(doc, row, topology_dir)
    values = {(r.src, r.dst): r.utilisation(window) for r in rows}
    details = {(r.src, r.dst): f"{r.bytes:,} B in {r.packets:,} packets ({r.kind})" for r in rows}
    title = (f"all-reduce on {sip_topology}, {kib(row['bytes_per_pe'])} per PE, "
             f"{str(row['buffer_kind']).upper()} receive rings")
    fig, _ = render_heatmap(graph, values, title=title, scope=SCOPE, details=details,
                            subtitle=f"run window {window / 1000:.2f} µs")
    fig.set_dpi(DPI)
    return fig


def _spec(sip_topology: str) -> FigureSpec:
    tag = TAGS[sip_topology]
    cap = tag.capitalize()
    return FigureSpec(
        f"allreduce_links_{tag}", "allreduce",
        f"Link utilisation of the all-reduce on {sip_topology} (links panel, TCM receive rings), whole tray: every "
        "directed link coloured by its busy time as a share of the run window, the colour scale ending at the "
        "run's busiest link; grey links carried nothing; links inside a PE and the control sideband are not "
        "drawn. Drawn by kernbench.topology.heatmap, the code behind the heatmaps of the links command.",
        COMMAND, partial(draw_links, sip_topology=sip_topology), 1.0, topologies=True,
        tex_caption=(rf"Payload \kbArLinksPayload{{}} per PE; run window \kbArLinks{cap}Window; the busiest link "
                     rf"drawn is busy \kbArLinks{cap}Busiest{{}} of it; the PCIe links between the SIPs and the "
                     rf"switch carry \kbClaimArLinks{cap}Pcie{{}} per link and direction."))


FIGURES = tuple(_spec(t) for t in TAGS)
