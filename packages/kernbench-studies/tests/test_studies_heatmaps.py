"""The all-reduce study's heatmaps: one per SIP topology, drawn from results.json on the recorded topology, with the
label and colours following the record, and their numbers reaching the report as macros."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from matplotlib.collections import LineCollection
from matplotlib.colors import to_hex

from kernbench.studies import allreduce_links
from kernbench.studies.base import StudyError
from kernbench.studies.figures import allreduce_links as fig_links
from kernbench.studies.figures import figures_of, render_study
from kernbench.studies.report import allreduce_links_tex
from kernbench.studies.report.numbers import Numbers, sig
from kernbench.topology.heatmap import LINK_COLOURS

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
HEATMAPS = ("allreduce_links_ring", "allreduce_links_torus", "allreduce_links_mesh")


@pytest.fixture(scope="module")
def doc(synthetic):
    return synthetic.synthetic_doc("allreduce")


def _links_point(doc: dict, sip_topology: str) -> dict:
    (p,) = [p for p in doc["points"] if p["labels"]["panel"] == "links"
            and p["values"]["sip_topology"] == sip_topology]
    return p


def _label(svg: str) -> str:
    """The busiest drawn link as the heatmap's header names it (matplotlib writes each line of text as a comment;
    the header puts the link's name on the line after "busiest link drawn (…):", or after it on a wide tray)."""
    start = svg.index("busiest link drawn (")
    text = svg[start:svg.index(" -->", start)]
    if text.rstrip().endswith(":"):  # the link on the next line
        nxt = svg.index("<!-- ", svg.index(" -->", start)) + 5
        return svg[nxt:svg.index(" -->", nxt)].strip()
    return text.split("): ", 1)[1].split(", ")[0]


def test_one_heatmap_per_sip_topology_in_the_figure_set():
    names = [s.name for s in figures_of("allreduce")]
    assert [n for n in names if n.startswith("allreduce_links_")] == list(HEATMAPS)
    specs = {s.name: s for s in figures_of("allreduce")}
    assert all(specs[n].topologies and "\\kbArLinks" in specs[n].tex_caption for n in HEATMAPS)
    assert not any(ch.isdigit() for n in HEATMAPS for ch in specs[n].tex_caption)  # numbers only as macros


def test_heatmap_files_are_drawn_and_label_the_records_busiest_drawn_link(doc, tmp_path):
    paths = render_study(doc, tmp_path, ("svg",), TOPOLOGIES)
    assert {p.stem for p in paths} >= set(HEATMAPS)
    for name, topo in zip(HEATMAPS, fig_links.TAGS, strict=True):
        row = _links_point(doc, topo)["values"]
        rows = allreduce_links.decode(row["links"])
        window = row["window_ns"]
        top = allreduce_links.busiest(rows, window, drawn_only=True)  # computed from the record, not by the figure
        svg = (tmp_path / f"{name}.svg").read_text()
        assert figures_of("allreduce")[[s.name for s in figures_of("allreduce")].index(name)].short_caption \
            == f"{topo}."  # the sub-caption names the topology; the figure repeats no title
        assert _label(svg) == f"{top.src} → {top.dst}" and "busiest link drawn" in svg
        assert f"busiest link drawn ({100 * top.utilisation(window):.1f} % busy)" in svg
        assert f"{top.bytes:,} B in {top.packets:,} packets" in svg
        assert f"run window {window / 1000:.2f} µs" in svg and "whole tray" in svg
        run_top = allreduce_links.busiest(rows, window)
        assert run_top.kind == "pe_internal" != top.kind  # the label skips the link the tray view does not draw
        assert f"{run_top.src} → {run_top.dst}" in svg and "busiest link of the run (" in svg


def test_nudging_a_record_moves_the_label_and_the_top_colour(doc, tmp_path):
    """Raise one PCIe link of the torus record above every other link: the figure then labels it, names it as the
    run's busiest, and it alone gets the colour at the top of the scale."""
    doc = copy.deepcopy(doc)
    values = _links_point(doc, "torus_2d")["values"]
    before = fig_links.draw_links(doc, TOPOLOGIES, "torus_2d")
    rows = json.loads(values["links"])
    i = next(i for i, r in enumerate(rows) if r[2] == "pcie" and r[0].startswith("sip3"))
    rows[i][5] = 0.9 * values["window_ns"]  # busier than anything else in the synthetic record
    values["links"] = json.dumps(rows, separators=(",", ":"))
    render_study(doc, tmp_path, ("svg",), TOPOLOGIES)
    svg = (tmp_path / "allreduce_links_torus.svg").read_text()
    assert _label(svg) == f"{rows[i][0]} → {rows[i][1]}" and "busiest link drawn (90.0 % busy)" in svg
    assert "busiest link of the run (90.0 %)" in svg

    def colours(fig) -> list[str]:
        """The drawn links' colours, in drawing order (the busiest last, on top)."""
        (lines,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
        return [to_hex(c) for c in lines.get_colors()]

    before, after = colours(before), colours(fig_links.draw_links(doc, TOPOLOGIES, "torus_2d"))
    assert before.count(LINK_COLOURS[-1]) == 0  # the record's busiest link lies inside a PE and is not drawn
    assert after.count(LINK_COLOURS[-1]) == 1 and after[-1] == LINK_COLOURS[-1]  # now the nudged link alone, on top
    assert before != after  # the rest of the scale moved down under the new maximum


def test_a_changed_topology_file_is_refused_not_drawn_on(doc, tmp_path):
    topo = tmp_path / "topologies"
    shutil.copytree(TOPOLOGIES, topo, ignore=shutil.ignore_patterns("*.cube_mesh.yaml"))
    (topo / "6sip_2x3_mesh_2d_no_wrap.yaml").write_text((topo / "6sip_2x3_mesh_2d_no_wrap.yaml").read_text()
                                                        + "\n# edited\n")
    with pytest.raises(StudyError, match=r"heatmap of mesh_2d_no_wrap: .* differs from the file the results were "
                                         r"recorded on; rerun `kernbench study allreduce`"):
        render_study(doc, tmp_path / "figures", ("svg",), topo)


def test_report_numbers_follow_the_links_record(doc):
    nums = Numbers()
    claims = allreduce_links_tex.generate(doc, nums)
    row = _links_point(doc, "mesh_2d_no_wrap")["values"]
    rows = allreduce_links.decode(row["links"])
    top = allreduce_links.busiest(rows, row["window_ns"], drawn_only=True)
    assert nums.items["kbArLinksMeshBusiest"].text == f"{100 * top.busy_ns / row['window_ns']:.1f}"
    assert nums.items["kbArLinksMeshWindow"].text == sig(row["window_ns"] / 1e3, 3)
    assert nums.items["kbArLinksPayload"].text == "64 KiB"
    assert set(claims) >= {"kbClaimArLinksRingPcie", "kbClaimArLinksTorusPcie", "kbClaimArLinksMeshPcie",
                           "kbClaimArLinksMeshSpread", "kbClaimArLinksSaturation"}
    table = allreduce_links_tex.table(doc)
    assert [r[0] for r in table.rows] == ["ring_1d", "torus_2d", "mesh_2d_no_wrap"]
    assert table.rows[2][2] == str(len(rows)) and table.rows[2][4] == top.kind
