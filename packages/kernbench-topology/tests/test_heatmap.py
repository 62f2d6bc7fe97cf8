"""Link heatmaps: the colour scale, what each scope draws, the labels a reader needs, and clear errors."""

from __future__ import annotations

import re

import pytest
from matplotlib.collections import QuadMesh

from kernbench.topology import compile_spec, spec_from_dict
from kernbench.topology import naming as nm
from kernbench.topology.heatmap import (
    IDLE_COLOUR,
    LINK_COLOURS,
    HeatmapError,
    link_colour,
    render_heatmap,
    write_heatmap,
)

SMALL = {"system": {"sips": {"count": 1, "grid": [1, 1]}}, "sip": {"cube_mesh": {"w": 2, "h": 2}}}
A, B = nm.router(0, 1, 0, 0), nm.router(0, 1, 0, 1)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict(SMALL))


def rgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


def test_colour_scale_ends_stops_and_linear_blend():
    assert link_colour(0.0, 0.4) == IDLE_COLOUR
    assert link_colour(0.4, 0.4) == LINK_COLOURS[-1]
    assert link_colour(9.0, 0.4) == LINK_COLOURS[-1]  # clipped at the maximum
    n = len(LINK_COLOURS) - 1
    for k in range(1, n + 1):
        assert link_colour(k / n, 1.0) == LINK_COLOURS[k]
    mid = link_colour(0.5 / n, 1.0)  # half way between the first two stops
    a, b = rgb(LINK_COLOURS[0]), rgb(LINK_COLOURS[1])
    assert all(abs(m - (x + y) / 2) <= 0.5 for m, x, y in zip(rgb(mid), a, b, strict=True))
    assert link_colour(1e-9, 1.0) == LINK_COLOURS[0]
    # darker (lower luminance) as utilisation grows
    lum = [sum(rgb(link_colour(u / 20, 1.0))) for u in range(1, 21)]
    assert lum == sorted(lum, reverse=True)


def test_cube_heatmap_draws_the_cube_without_command_links_and_labels_the_busiest(graph, tmp_path):
    values = {(A, B): 0.5, (B, A): 0.1}
    out = tmp_path / "cube.svg"
    info = write_heatmap(graph, values, out, title="unit run", scope="cube", sip=0, cube=1,
                         details={(A, B): "123 B"}, subtitle="run window 1.00 µs")
    expected = [e for e in graph.edges if e.kind != "command"
                and nm.locate(e.src).cube == 1 and nm.locate(e.dst).cube == 1]
    assert (info.scope, info.sip, info.cube, info.drawn) == ("cube", 0, 1, len(expected))
    assert info.busiest_run == (A, B, 0.5) and info.busiest_drawn == (A, B, 0.5)
    svg = out.read_text()
    assert "Link utilisation: unit run" in svg
    assert f"busiest here: {A} → {B}" in svg and "50.0 % busy, 123 B" in svg
    assert f"busiest link of the run: {A} → {B} (50.0 %)" in svg
    assert "utilisation (% of the run window); grey: idle" in svg
    strokes = re.findall(r"stroke: (#[0-9a-f]{6})", svg)
    assert strokes.count(link_colour(0.5, 0.5)) == 1 and strokes.count(link_colour(0.1, 0.5)) == 1
    assert strokes.count(IDLE_COLOUR) == len(expected) - 2


def test_auto_scope_opens_the_sip_of_the_busiest_link_and_defaults_follow_it(graph):
    _, info = render_heatmap(graph, {(A, B): 0.2}, title="t")
    assert (info.scope, info.sip) == ("sip", 0)
    _, info = render_heatmap(graph, {(A, B): 0.2}, title="t", scope="cube")
    assert (info.sip, info.cube) == (0, 1)
    _, info = render_heatmap(graph, {("tray.host_cpu", "fabric.switch0"): 0.3, (A, B): 0.2}, title="t")
    assert info.scope == "system" and info.busiest_drawn[:2] == ("tray.host_cpu", "fabric.switch0")
    hidden = {"command"}
    assert info.drawn == sum(1 for e in graph.edges if e.kind not in hidden | {"pe_internal"})


def test_the_links_with_traffic_are_counted_in_the_run_and_in_the_picture(graph, tmp_path):
    """The caller gives a value to each link that carried traffic; the info and the subtitle count them, and
    how many of them this scope draws."""
    other = nm.router(0, 0, 0, 0), nm.router(0, 0, 0, 1)  # cube 0: outside a picture of cube 1
    values = {(A, B): 0.5, (B, A): 0.1, other: 0.2}
    out = tmp_path / "cube1.svg"
    info = write_heatmap(graph, values, out, title="t", scope="cube", sip=0, cube=1)
    assert (info.traffic, info.traffic_drawn) == (3, 2)
    assert f"SIP 0, cube 1, {info.drawn} links drawn (2 of the 3 with traffic)" in out.read_text()
    _, whole = render_heatmap(graph, values, title="t", scope="system")
    assert (whole.traffic, whole.traffic_drawn) == (3, 3)


def test_the_same_data_gives_the_same_svg(graph, tmp_path):
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    for p in (a, b):
        write_heatmap(graph, {(A, B): 0.25}, p, title="det", scope="sip")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(("kwargs", "values", "needle"), [
    ({"scope": "rack"}, {}, "unknown heatmap scope 'rack'; use one of auto, system, sip, cube"),
    ({"scope": "sip", "sip": 3}, {}, "SIP 3 does not exist; topology 'ahbm' has SIPs 0..0"),
    ({"scope": "cube", "cube": 9}, {}, "cube 9 does not exist"),
    ({}, {("x", "y"): 0.1}, "1 link(s) of the data are not in topology 'ahbm', e.g. x → y"),
])
def test_heatmap_errors_say_what_and_how(graph, kwargs, values, needle):
    with pytest.raises(HeatmapError) as err:
        render_heatmap(graph, values, title="t", **kwargs)
    assert needle in str(err.value)


def test_heatmap_file_type_and_unwritable_path(graph, tmp_path):
    with pytest.raises(HeatmapError, match=r"must end in \.svg, \.png or \.pdf"):
        write_heatmap(graph, {}, tmp_path / "x.gif", title="t")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(HeatmapError, match="cannot write the heatmap"):
        write_heatmap(graph, {}, blocker / "x.svg", title="t")


C, D = nm.router(0, 0, 0, 0), nm.router(0, 0, 0, 1)


@pytest.mark.parametrize(("values", "top"), [
    ({(A, B): 0.3, (B, A): 0.12}, 30.0),               # the busiest link is drawn
    ({(A, B): 0.3, (B, A): 0.12, (C, D): 0.4}, 40.0),  # the run's busiest link lies in another cube
])
def test_colour_bar_tops_out_at_the_runs_busiest_link(graph, values, top):
    """A run whose busiest link is far below 100 %: the colour bar spans 0 .. that link's utilisation (in %), the
    same scale the links are coloured on, so the top of the bar is the darkest stop."""
    assert graph.has_edge(C, D)
    fig, info = render_heatmap(graph, values, title="t", scope="cube", sip=0, cube=1)
    assert info.busiest_run[2] == top / 100
    _, cax = fig.axes
    assert cax.get_ylim() == pytest.approx((0.0, top))
    (bar,) = [c for c in cax.collections if isinstance(c, QuadMesh)]  # the bar's swatch: its norm and colours
    assert (bar.norm.vmin, bar.norm.vmax) == pytest.approx((0.0, top))
    drawn = "#" + "".join(f"{round(255 * x):02x}" for x in bar.to_rgba(top)[:3])
    assert drawn == LINK_COLOURS[-1] == link_colour(top / 100, top / 100)
