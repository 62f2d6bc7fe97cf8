"""Tests of the SVG view diagrams (kernbench.topology.diagrams)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import kernbench.topology
from kernbench.topology import compile_spec, emit_diagrams, spec_from_dict
from kernbench.topology.errors import KernbenchError, SpecError

SVG_NS = "{http://www.w3.org/2000/svg}"
VIEWS = ("system", "sip", "cube", "pe")


@pytest.fixture(scope="module")
def graph() -> kernbench.topology.TopologyGraph:
    return compile_spec(spec_from_dict({}))


@pytest.fixture(scope="module")
def emitted(graph, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("diagrams")
    paths = emit_diagrams(graph, out)
    return {p.stem: p for p in paths}


def svg_texts(path: Path) -> list[str]:
    """The text content of every <text> element (labels stay text, not glyph paths)."""
    root = ET.parse(path).getroot()
    return ["".join(el.itertext()) for el in root.iter(f"{SVG_NS}text")]


def test_default_writes_one_svg_per_view(graph, emitted, tmp_path):
    assert tuple(graph.spec.emit_views) == VIEWS
    assert sorted(emitted) == sorted(VIEWS)
    for name, path in emitted.items():
        assert path.name == f"{name}.svg"
        assert path.is_file() and path.stat().st_size > 1000


def test_every_file_is_valid_svg_xml(emitted):
    for path in emitted.values():
        root = ET.parse(path).getroot()
        assert root.tag == f"{SVG_NS}svg"


@pytest.mark.parametrize("view", ["pe", "system"])
def test_every_box_label_is_drawn(graph, emitted, view):
    texts = svg_texts(emitted[view])
    labels = [n.label for n in graph.views[view].nodes if n.label]
    assert labels, "the view has labelled boxes"
    for label in labels:
        assert label in texts, f"{view} view is missing box label {label!r}"


def test_title_is_the_view_title(graph, emitted):
    for name, path in emitted.items():
        assert graph.views[name].title in svg_texts(path)


def test_bandwidth_labels(emitted):
    sip = svg_texts(emitted["sip"])
    cube = svg_texts(emitted["cube"])
    assert any("512 GB/s" in t for t in sip), "UCIe bandwidth label missing from sip view"
    assert any("256 GB/s" in t for t in cube), "NoC bandwidth label missing from cube view"
    # merged parallel UCIe links show their multiplicity, lengths are in mm
    assert any(t.startswith("2.0 mm · 512 GB/s ×") for t in sip)


def test_link_labels_once_per_pair_and_non_router_links_all_labelled(graph, emitted):
    cube_view = graph.views["cube"]
    kinds = {n.id: n.kind for n in cube_view.nodes}
    pairs = {frozenset((e.src, e.dst)) for e in cube_view.edges}
    non_router = [p for p in pairs if any(kinds[x] != "router" for x in p)]
    link_labels = [t for t in svg_texts(emitted["cube"]) if " GB/s" in t]
    mesh = {(round(e.distance_mm, 6), e.bw_gbs) for e in cube_view.edges
            if kinds[e.src] == "router" and kinds[e.dst] == "router"}
    assert len(link_labels) == len(non_router) + len(mesh)
    pe_pairs = {frozenset((e.src, e.dst)) for e in graph.views["pe"].edges}
    assert len([t for t in svg_texts(emitted["pe"]) if " GB/s" in t]) == len(pe_pairs)


def test_output_is_byte_identical_across_runs(graph, emitted, tmp_path):
    again = emit_diagrams(graph, tmp_path / "again")
    for path in again:
        assert path.read_bytes() == emitted[path.stem].read_bytes(), f"{path.name} differs between runs"


def test_subset_of_views_and_created_directory(graph, tmp_path):
    out = tmp_path / "nested" / "dir"
    paths = emit_diagrams(graph, str(out), views=["pe"])
    assert paths == [out / "pe.svg"]
    assert sorted(p.name for p in out.iterdir()) == ["pe.svg"]


def test_unknown_view_raises_spec_error_listing_valid_names(graph, tmp_path):
    with pytest.raises(SpecError) as info:
        emit_diagrams(graph, tmp_path, views=["pe", "chip"])
    assert isinstance(info.value, KernbenchError)
    msg = str(info.value)
    assert "chip" in msg
    for name in VIEWS:
        assert name in msg
    assert not any(tmp_path.iterdir()), "nothing is written when a view name is wrong"
