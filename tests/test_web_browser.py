"""`kernbench web` in headless Chromium: the four views, clicks, link colours, the route finder, runs, errors.

Every expectation is computed here in Python from the compiled graph (the views of
``kernbench.topology.views``, ``PathRouter`` paths, the engine's own hop trace, ``link_colour`` of the
loaded utilisations), then compared with what the page shows. No test tolerates a console error.
"""

from __future__ import annotations

import json
import random
import time

import pytest

from kernbench.cli.web import ViewerServer, ViewerState, export_viewer
from kernbench.components import default_registry
from kernbench.sim import GraphEngine, MemoryWriteMsg
from kernbench.sim.links import LinkRecord, LinksReport, read_links, write_links
from kernbench.topology import AddressResolver, PathRouter, RoutingError, load_topology
from kernbench.topology import naming as nm
from kernbench.topology.heatmap import IDLE_COLOUR, link_colour

from .browser import click_on, console_errors, js, show, start_driver, wait_ready
from .conftest import DEFAULT_TOPOLOGY

LEVELS = ("system", "sip", "cube", "pe")
R00, R01 = nm.router(0, 0, 0, 0), nm.router(0, 0, 0, 1)
DMA, TCM = nm.pe_block(0, 0, 0, "pe_dma"), nm.pe_block(0, 0, 0, "pe_tcm")
# Utilisations the synthetic links file gives a few links (everything else is idle).
LOADED = {(nm.HOST, nm.SWITCH): 0.6, (R00, R01): 0.3, (R01, R00): 0.05, (DMA, TCM): 0.15,
          (nm.switch(), nm.pcie_ep(1)): 0.2}


@pytest.fixture(scope="module")
def graph():
    return load_topology(DEFAULT_TOPOLOGY)


@pytest.fixture(scope="module")
def links_file(graph, tmp_path_factory):
    recs = []
    for e in graph.edges:
        u = LOADED.get((e.src, e.dst), 0.0)
        n = int(u * 1e6)
        recs.append(LinkRecord(e.src, e.dst, e.kind, e.bw_gbs, e.latency_ns, n, -(-n // 4096), 1 if n else 0,
                               u * 1000.0, u, 0.0))
    report = LinksReport({"bench": "synthetic", "device": 0, "topology": graph.spec.name}, 1000.0,
                         {"flit_bytes": 256, "packet_bytes": 4096, "control_bytes": 64}, tuple(recs))
    return write_links(report, tmp_path_factory.mktemp("links") / "synthetic.links.json")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = start_driver(tmp_path_factory.mktemp("chromium-profile"))
    yield d
    d.quit()


@pytest.fixture(scope="module")
def server(graph, links_file):
    srv = ViewerServer(ViewerState(graph, None, str(links_file)), "127.0.0.1", 0).start()
    yield srv
    srv.stop()


@pytest.fixture
def page(driver, server):
    """The served viewer, loaded fresh; the test must leave no console error behind."""
    driver.get("about:blank")  # so that the next load is a fresh page, not a hash change
    driver.get(server.url + "#view=system&sip=0&cube=0&pe=0")
    assert wait_ready(driver) == "1"
    yield driver
    assert console_errors(driver) == []




def python_view(graph, level):
    v = graph.views[level]
    boxes = {n.id: (n.label, n.kind, n.x_mm, n.y_mm, n.w_mm, n.h_mm) for n in v.nodes}
    edges = {(e.src, e.dst): (e.kind, e.bw_gbs, e.distance_mm, e.count) for e in v.edges}
    return boxes, edges


def test_each_view_is_the_python_projection_and_clicking_a_tab_draws_it(page, graph):
    for level in LEVELS:
        page.find_element("css selector", f"#tabs button[data-level={level}]").click()
        boxes, edges = python_view(graph, level)
        got = js(page, "return KB.view(arguments[0], 0, 0, 0)", level)
        got_boxes = {b[0]: tuple(b[1:]) for b in got["boxes"]}
        got_edges = {(e[0], e[1]): tuple(e[2:]) for e in got["edges"]}
        assert set(got_boxes) == set(boxes) and set(got_edges) == set(edges), level
        for k, want in boxes.items():
            assert got_boxes[k][:2] == want[:2] and got_boxes[k][2:] == pytest.approx(want[2:], abs=1e-9), k
        for k, want in edges.items():
            assert got_edges[k] == (want[0], pytest.approx(want[1]), pytest.approx(want[2]), want[3]), k
        drawn = js(page, "return [...document.querySelectorAll('rect.box')].map(r => r.getAttribute('data-id'))")
        assert sorted(drawn) == sorted(boxes)
        assert len(page.find_elements("css selector", "line.link")) == len(edges)
        assert page.find_element("id", "view-title").text.endswith(graph.views[level].title.split(": ", 1)[-1])


def test_views_of_another_sip_cube_and_pe_hold_exactly_their_nodes(page, graph):
    show(page, "cube", 1, 2, 3)
    ids = set(js(page, "return [...document.querySelectorAll('rect.box')].map(r => r.getAttribute('data-id'))"))
    inside = [n for n in graph.nodes if (nm.locate(n).sip, nm.locate(n).cube) == (1, 2)]
    want = {nm.pe_of(n) if nm.locate(n).unit in nm.PE_BLOCKS else n for n in inside}
    assert ids == want
    show(page, "pe", 1, 2, 3)
    ids = set(js(page, "return [...document.querySelectorAll('rect.box')].map(r => r.getAttribute('data-id'))"))
    assert ids == {nm.pe_block(1, 2, 3, b) for b in nm.PE_BLOCKS}
    assert page.find_element("id", "view-title").text.startswith("SIP 1, cube 2, PE 3: ")
    assert page.current_url.endswith("#view=pe&sip=1&cube=2&pe=3")


def click_box(driver, box_id, corner=False):
    """Click a box at its centre, or near its top-left corner (a PE box has its router in the middle)."""
    rect = driver.find_element("css selector", f'rect.box[data-id="{box_id}"]')
    if not corner:
        rect.click()
        return
    from selenium.webdriver import ActionChains

    size = rect.size
    ActionChains(driver).move_to_element_with_offset(rect, -int(size["width"] * 0.35),
                                                     -int(size["height"] * 0.35)).click().perform()



def param_rows(driver) -> dict[str, str]:
    rows = driver.find_elements("css selector", "#params tr")
    return {r.find_elements("tag name", "td")[-2].text: r.find_elements("tag name", "td")[-1].text
            for r in rows[1:]}


def number(text: str) -> float:
    return float(text.replace(",", ""))


def test_clicking_a_node_shows_its_id_kind_and_parameters(page, graph):
    for level, node_id in (("pe", TCM), ("pe", nm.pe_block(0, 0, 0, "pe_gemm")), ("cube", nm.hbm_ctrl(0, 0, 5))):
        show(page, level)
        click_box(page, node_id)
        assert page.find_element("css selector", "#details h3").text == node_id
        attrs = dict(graph.nodes[node_id].attrs)
        shown = param_rows(page)
        assert set(shown) == set(attrs)
        for k, v in attrs.items():
            assert number(shown[k]) == pytest.approx(v, rel=1e-4), k
        assert graph.nodes[node_id].type in page.find_element("id", "details").text
    show(page, "cube")
    click_box(page, nm.pe_prefix(0, 0, 2), corner=True)  # a PE box lists its blocks' parameters
    text = page.find_element("id", "params").text
    assert "pe_tcm read_bw_gbs" in text and "pe_gemm peak_tflops" in text


def test_clicking_a_link_shows_its_parameters_and_traffic(page, graph):
    show(page, "cube")
    click_on(page, page.find_element("css selector", f'line.link[data-src="{R00}"][data-dst="{R01}"]'))
    assert page.find_element("css selector", "#details h3").text == f"{R00} → {R01}"
    summary = page.find_element("id", "link-summary").text
    e = graph.edge(R00, R01)
    assert f"kind {e.kind}" in summary and f"bandwidth {e.bw_gbs:g} GB/s" in summary
    assert "utilisation (busiest lane) 30.00 %" in summary and "bytes 300,000" in summary


def owner_in(level, node_id):
    """The box of ``node_id`` in the SIP 0 / cube 0 / PE 0 view of ``level`` (None: not drawn), from naming."""
    loc = nm.locate(node_id)
    if level == "system":
        return node_id if loc.sip is None else nm.sip_prefix(loc.sip)
    if level == "sip":
        return None if loc.sip != 0 else (nm.owner_and_unit(node_id)[0] if loc.cube is None else
                                          nm.cube_prefix(0, loc.cube))
    if level == "cube":
        if (loc.sip, loc.cube) != (0, 0):
            return None
        return nm.pe_of(node_id) if loc.unit in nm.PE_BLOCKS else node_id
    return node_id if node_id.startswith(nm.pe_prefix(0, 0, 0) + ".") else None


def test_link_colours_follow_the_loaded_links_file(page, graph, links_file):
    vmax = max(r.utilisation for r in read_links(links_file).links)
    for level in LEVELS:
        show(page, level)
        want: dict[tuple[str, str], float] = {}
        for e in graph.edges:
            a, b = owner_in(level, e.src), owner_in(level, e.dst)
            if a is not None and b is not None and a != b:
                want[(a, b)] = max(want.get((a, b), 0.0), LOADED.get((e.src, e.dst), 0.0))
        got = js(page, "return [...document.querySelectorAll('line.link')].map(l => [l.getAttribute('data-src'), "
                       "l.getAttribute('data-dst'), l.getAttribute('stroke')])")
        assert {(a, b) for a, b, _ in got} == set(want)
        for a, b, stroke in got:
            assert stroke == link_colour(want[(a, b)], vmax), (level, a, b)
        assert sum(stroke != IDLE_COLOUR for _, _, stroke in got) == sum(1 for u in want.values() if u > 0)
    assert page.find_element("id", "legend-max").text == "60.0 %"
    assert page.find_element("id", "busiest").text == "Busiest: tray.host_cpu → fabric.switch0 (60.0 %)"


def route_pairs(graph, rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    by_type: dict[str, list[str]] = {}
    for node in graph.nodes.values():
        by_type.setdefault(node.type, []).append(node.id)
    kinds = [("pe_dma", "pe_dma", ("hbm_ctrl", "sram", "m_cpu", "pe_tcm")),
             ("mcpu_dma", "m_cpu", ("hbm_ctrl", "sram", "pe_tcm")),
             ("memory", "host_cpu", ("hbm_ctrl", "sram", "m_cpu")),
             ("control", "io_cpu", ("m_cpu", "pe_cpu", "pe_mmu")), ("control", "pe_cpu", ("m_cpu", "io_cpu"))]
    out = []
    for i in range(n):
        intent, src_type, dst_types = kinds[i % len(kinds)]
        out.append((intent, rng.choice(by_type[src_type]), rng.choice(by_type[rng.choice(dst_types)])))
    return out


def test_route_finder_takes_the_routers_path_for_20_random_pairs(page, graph):
    router = PathRouter(graph)
    methods = {"pe_dma": router.pe_dma_path, "mcpu_dma": router.mcpu_dma_path, "memory": router.memory_path,
               "control": router.control_path}
    pairs = route_pairs(graph, random.Random(2024), 20)
    assert len({(nm.locate(a).sip, nm.locate(b).sip) for _, a, b in pairs}) > 1  # same- and cross-SIP routes
    unreachable = 0
    for intent, src, dst in pairs:
        js(page, "document.getElementById('route-src').value = arguments[0];"
                 "document.getElementById('route-dst').value = arguments[1];"
                 "document.getElementById('route-intent').value = arguments[2];", src, dst, intent)
        page.find_element("id", "route-go").click()
        got = json.loads(page.find_element("id", "route-out").get_attribute("data-path"))
        try:
            want = list(methods[intent](src, dst))
        except RoutingError as exc:  # e.g. M_CPU DMA into a PE's TCM: that intent never enters a PE pipeline
            assert got is None and page.find_element("id", "route-error").text == str(exc)
            unreachable += 1
            continue
        assert got == want, (intent, src, dst)
        cells = js(page, "return [...document.querySelectorAll('#route-table tr')].slice(1)"
                         ".map(r => r.children[1].textContent)")
        assert cells == want  # after the header: the source, then the node each hop reaches
    assert unreachable < 5
    js(page, "document.getElementById('route-src').value = 'sip0.nowhere'")
    page.find_element("id", "route-go").click()
    assert page.find_element("id", "route-error").text == "node sip0.nowhere not found in topology 'ahbm-default'"


def test_route_hop_latencies_are_the_engines_unloaded_timing(page, graph):
    resolver = AddressResolver(graph)
    eng = GraphEngine(graph, default_registry(), record_hops=True)
    req = eng.submit(MemoryWriteMsg(resolver.hbm_addr(1, 3, 6), 1024))  # one packet of four flits
    eng.run()
    path = req.legs[0]
    arrivals = [t_in for kind, _, t_in, _ in req.hops if kind == "write"][1:]  # at nodes 1..n
    js(page, "document.getElementById('route-src').value = arguments[0];"
             "document.getElementById('route-dst').value = arguments[1];"
             "document.getElementById('route-intent').value = 'auto';", path[0], path[-1])
    page.find_element("id", "route-go").click()
    out = page.find_element("id", "route-out")
    assert json.loads(out.get_attribute("data-path")) == list(path)
    assert json.loads(out.get_attribute("data-head")) == pytest.approx(arrivals, rel=1e-12)
    control = json.loads(out.get_attribute("data-control"))
    assert control[-1] == pytest.approx(graph.nodes[path[0]].overhead_ns + eng.control_latency_ns(path), rel=1e-12)
    assert "memory intent" in page.find_element("id", "route-summary").text


def test_zoom_pan_and_drill_down(page):
    from selenium.webdriver import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    canvas = page.find_element("id", "canvas")
    transform = "return document.getElementById('world').getAttribute('transform')"
    assert js(page, transform) == "translate(0 0) scale(1)"
    ActionChains(page).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -300).perform()
    zoomed = js(page, transform)
    assert float(zoomed.rsplit("scale(", 1)[1].rstrip(")")) > 1
    ActionChains(page).move_to_element_with_offset(canvas, -200, -200).click_and_hold().move_by_offset(60, 40) \
        .release().perform()
    assert js(page, transform) != zoomed and js(page, transform).startswith("translate(")
    page.find_element("id", "zoom-fit").click()
    assert js(page, transform) == "translate(0 0) scale(1)"
    ActionChains(page).double_click(page.find_element("css selector", 'rect.box[data-id="sip1"]')).perform()
    assert page.find_element("id", "view-title").text.startswith("SIP 1: ")


def test_screenshot_of_the_viewer(page, tmp_path):
    show(page, "cube")
    shot = tmp_path / "viewer.png"
    assert page.save_screenshot(str(shot))
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[0] > 500 and img.shape[1] > 1000
    colours = {tuple(px) for px in (img[::20, ::20, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 10  # a drawn page, not a blank one


def test_the_exported_viewer_opens_from_disk_with_the_run(driver, graph, links_file, tmp_path):
    out = tmp_path / "export"
    from kernbench.cli.web.model import load_links

    export_viewer(graph, out, links=load_links(links_file, graph), initial={"view": "cube"})
    driver.get((out / "index.html").as_uri())
    assert wait_ready(driver) == "1"
    assert console_errors(driver) == []
    assert len(driver.find_elements("css selector", "rect.box")) == len(graph.views["cube"].nodes)
    stroke = driver.find_element("css selector", f'line.link[data-src="{R00}"][data-dst="{R01}"]') \
        .get_attribute("stroke")
    assert stroke == link_colour(0.3, 0.6)
    assert not driver.find_element("id", "run-form").is_displayed()  # no runs without a server


def test_a_run_started_from_the_page_colours_the_links(driver, graph):
    state = ViewerState(graph)
    srv = ViewerServer(state, "127.0.0.1", 0).start()
    try:
        driver.get(srv.url + "#view=cube")
        assert wait_ready(driver) == "1"
        strokes = js(driver, "return [...document.querySelectorAll('line.link')].map(l => l.getAttribute('stroke'))")
        assert strokes == [IDLE_COLOUR] * len(graph.views["cube"].edges)
        js(driver, "document.getElementById('run-bench').value = 'gemm-single-pe'")
        driver.find_element("id", "run-start").click()
        t0 = time.time()
        while not driver.find_element("id", "run-status").text.startswith("done") and time.time() - t0 < 60:
            time.sleep(0.1)
        assert driver.find_element("id", "run-status").text.startswith("done: gemm-single-pe latency ")
        links = state.page_run[1]["links"]
        top = max(links, key=lambda r: (r["utilisation"], r["bytes"]))
        assert driver.find_element("id", "busiest").text.startswith(f"Busiest: {top['src']} → {top['dst']}")
        assert js(driver, "return [...document.querySelectorAll('line.link')].filter(l => "
                          "Number(l.getAttribute('data-util')) > 0).length") > 0
        assert console_errors(driver) == []
    finally:
        srv.stop()


def test_a_malformed_links_file_shows_an_error_not_a_traceback(driver, graph, links_file, tmp_path):
    copy = tmp_path / "links.json"
    copy.write_bytes(links_file.read_bytes())
    srv = ViewerServer(ViewerState(graph, None, str(copy)), "127.0.0.1", 0).start()
    try:
        data = json.loads(copy.read_text())
        data["links"][0] = {"src": 1}
        copy.write_text(json.dumps(data))
        driver.get(srv.url)
        assert wait_ready(driver) == "1"  # the topology still shows
        errors = driver.find_element("id", "errors").text
        assert errors == (f"links file {copy}: links[0].src is 1; expected a non-empty string; regenerate it with "
                          f"`kernbench run --bench NAME --links FILE`")
        assert "Traceback" not in driver.page_source
        assert len(driver.find_elements("css selector", "rect.box")) == len(graph.views["system"].nodes)
        logged = console_errors(driver)
        assert len(logged) == 1 and "links.json" in logged[0] and "422" in logged[0]
    finally:
        srv.stop()


def test_the_address_bar_carries_view_route_and_selection(driver, server, graph):
    src, dst = nm.io_noc(0), nm.hbm_ctrl(0, 2, 5)
    driver.get("about:blank")
    driver.get(server.url + f"#view=cube&sip=0&cube=2&from={src}&to={dst}&intent=memory&node={dst}")
    assert wait_ready(driver) == "1"
    assert driver.find_element("css selector", "#details h3").text == dst
    path = json.loads(driver.find_element("id", "route-out").get_attribute("data-path"))
    assert path == list(PathRouter(graph).memory_path(src, dst))
    assert driver.find_elements("css selector", "#route polyline")  # the route is drawn on the view
    driver.get("about:blank")  # a fresh page: on the same page a hash change is handled in place
    driver.get(server.url + "#view=rack")
    assert wait_ready(driver) == "1"
    assert driver.find_element("id", "errors").text == "unknown view 'rack'; use system, sip, cube or pe"
    assert driver.find_element("id", "view-title").text == graph.views["system"].title
    assert console_errors(driver) == []
