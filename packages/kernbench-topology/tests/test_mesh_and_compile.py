"""Tests of the cube mesh layout, the mesh cache, the compiled graph, disabled links and the views.

All expected numbers are worked out by hand from the default spec values:

* cube 12 x 12 mm, PE inset 1.5 mm, pitch 3 mm -> PE x positions 1.5, 4.5 (west), 10.5, 7.5 (east),
  y 1.5 (north) and 10.5 (south); column gaps are 3 mm = max_spacing, so no relay columns;
* 2 UCIe connections -> one row per half; HBM rows at 6 -+ 1.5 = 4.5 and 7.5 -> rows 1.5, 4.5, 7.5, 10.5;
* HBM exclusion zone: rows 1-2 x columns 1-2 -> 16 - 4 = 12 routers per cube.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from kernbench.topology import SpecError, TopologyError, compile_spec, load_spec, load_topology, spec_from_dict
from kernbench.topology.builtins import topologies_folder
from kernbench.topology.mesh_gen import generate_mesh, mesh_path_for, source_hash

TOPOLOGIES = topologies_folder(Path(__file__))
DEFAULT_YAML = TOPOLOGIES / "topology.yaml"

PE_BLOCKS = ("pe_cpu", "pe_scheduler", "pe_dma", "pe_fetch_store", "pe_gemm", "pe_math",
             "pe_tcm", "pe_mmu", "pe_ipcq")
ZONE = {(1, 1), (1, 2), (2, 1), (2, 2)}
PRESENT = {(r, c) for r in range(4) for c in range(4)} - ZONE
# PE p -> router slot: NW (1.5,1.5),(4.5,1.5); NE (10.5,1.5),(7.5,1.5); SW, SE likewise on row 10.5.
PE_ROUTER = {0: (0, 0), 1: (0, 1), 2: (0, 3), 3: (0, 2), 4: (3, 0), 5: (3, 1), 6: (3, 3), 7: (3, 2)}
# UCIe PHYs, 2 per side, spread over the boundary routers: index int((i + 0.5) * 4 / 2) -> 1, 3.
UCIE_ROUTER = {("n", 0): (0, 1), ("n", 1): (0, 3), ("s", 0): (3, 1), ("s", 1): (3, 3),
               ("e", 0): (1, 3), ("e", 1): (3, 3), ("w", 0): (1, 0), ("w", 1): (3, 0)}


@pytest.fixture(scope="module")
def graph():
    return compile_spec(load_spec(DEFAULT_YAML))


def small(**overrides):
    """A 1-SIP, 2x2-cube topology with deep-merged overrides."""
    data = {"system": {"sips": {"count": 1}}, "sip": {"cube_mesh": {"w": 2, "h": 2}}}
    for section, values in overrides.items():
        if isinstance(values, dict):
            _merge(data.setdefault(section, {}), values)
        else:
            data[section] = values
    return spec_from_dict(data)


def _merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict):
            _merge(dst.setdefault(k, {}), v)
        else:
            dst[k] = v


def routers_of(graph, node_id):
    return [e.dst for e in graph.out_edges(node_id) if graph.nodes[e.dst].type == "router"]


# --------------------------------------------------------------------------- mesh layout


def test_default_columns_and_rows(graph):
    assert graph.mesh.col_xs == (1.5, 4.5, 7.5, 10.5)
    assert graph.mesh.row_ys == (1.5, 4.5, 7.5, 10.5)


def test_default_hbm_zone_and_present(graph):
    assert graph.mesh.hbm_zone == (1, 2, 1, 2)
    assert set(graph.mesh.present) == PRESENT
    assert len(graph.mesh.present) == 12


def test_hbm_zone_holds_no_router(graph):
    for sip in range(2):
        for cube in range(16):
            for r, c in ZONE:
                assert f"sip{sip}.cube{cube}.noc.r{r}c{c}" not in graph.nodes
            for r, c in PRESENT:
                assert graph.nodes[f"sip{sip}.cube{cube}.noc.r{r}c{c}"].type == "router"


def test_pe_positions(graph):
    assert graph.mesh.pe_positions == ((1.5, 1.5), (4.5, 1.5), (10.5, 1.5), (7.5, 1.5),
                                       (1.5, 10.5), (4.5, 10.5), (10.5, 10.5), (7.5, 10.5))


def test_every_pe_dma_attaches_to_exactly_one_router(graph):
    dmas = graph.nodes_of_type("pe_dma")
    assert len(dmas) == 2 * 16 * 8
    for dma in dmas:
        routers = routers_of(graph, dma)
        assert len(routers) == 1, dma
        edge = graph.edge(dma, routers[0])
        assert edge.kind == "pe_to_router"
        assert graph.edge(routers[0], dma).kind == "router_to_pe"


def test_pe_router_assignment_by_hand(graph):
    for p, (r, c) in PE_ROUTER.items():
        for block in ("pe_dma", "pe_cpu", "pe_mmu"):
            assert routers_of(graph, f"sip1.cube7.pe{p}.{block}") == [f"sip1.cube7.noc.r{r}c{c}"]
        assert routers_of(graph, f"sip1.cube7.hbm_ctrl.pe{p}") == [f"sip1.cube7.noc.r{r}c{c}"]
        # blocks that are not attached have no router link
        for block in ("pe_tcm", "pe_gemm", "pe_scheduler"):
            assert routers_of(graph, f"sip1.cube7.pe{p}.{block}") == []


def test_default_mcpu_and_sram_routers(graph):
    # M_CPU (1.5, 5.5): r1c0 at (1.5, 4.5) is 1 mm away, r2c0 at (1.5, 7.5) is 2 mm.
    # SRAM (1.5, 8.5): r2c0 is 1 mm away.
    assert graph.mesh.m_cpu_router == (1, 0)
    assert graph.mesh.sram_router == (2, 0)
    assert routers_of(graph, "sip0.cube3.m_cpu") == ["sip0.cube3.noc.r1c0"]
    assert routers_of(graph, "sip0.cube3.sram") == ["sip0.cube3.noc.r2c0"]
    assert graph.edge("sip0.cube3.noc.r1c0", "sip0.cube3.m_cpu").kind == "router_to_mcpu"
    assert graph.edge("sip0.cube3.m_cpu", "sip0.cube3.noc.r1c0").kind == "mcpu_to_router"
    assert graph.edge("sip0.cube3.noc.r2c0", "sip0.cube3.sram").kind == "router_to_sram"
    assert graph.edge("sip0.cube3.sram", "sip0.cube3.noc.r2c0").kind == "sram_to_router"


@pytest.mark.parametrize("pos, expected", [
    # (11, 6.5): r2c3 (10.5, 7.5) is hypot(0.5, 1) = 1.12 mm; r1c3 (10.5, 4.5) is 2.06 mm.
    ((11.0, 6.5), (2, 3)),
    # (6, 1): r0c1 (4.5, 1.5) and r0c2 (7.5, 1.5) tie at 1.58 mm -> first in row-major order.
    ((6.0, 1.0), (0, 1)),
    # die centre: the zone routers are absent; 8 routers tie at hypot(1.5, 4.5) -> r0c1 first.
    ((6.0, 6.0), (0, 1)),
    # (12, 12): r3c3 (10.5, 10.5).
    ((12.0, 12.0), (3, 3)),
])
def test_placement_nearest_router(pos, expected):
    spec = small(cube={"placement": {"m_cpu_pos_mm": list(pos), "sram_pos_mm": list(pos)}})
    g = compile_spec(spec)
    r, c = expected
    assert g.mesh.m_cpu_router == expected
    assert g.mesh.sram_router == expected
    assert routers_of(g, "sip0.cube2.m_cpu") == [f"sip0.cube2.noc.r{r}c{c}"]
    assert routers_of(g, "sip0.cube2.sram") == [f"sip0.cube2.noc.r{r}c{c}"]


def test_ucie_phy_attachment(graph):
    ports = {(p.side, p.index): (p.row, p.col) for p in graph.mesh.ucie}
    assert ports == UCIE_ROUTER
    for (side, k), (r, c) in UCIE_ROUTER.items():
        phy = f"sip0.cube5.ucie_{side}.c{k}"
        assert routers_of(graph, phy) == [f"sip0.cube5.noc.r{r}c{c}"]
        assert graph.edge(f"sip0.cube5.noc.r{r}c{c}", phy).kind == "router_to_ucie_conn"
        assert graph.edge(phy, f"sip0.cube5.noc.r{r}c{c}").kind == "ucie_conn_to_router"


def test_more_ucie_connections_add_rows():
    # 4 connections -> 2 rows per half: step (4.5 - 1.5) / 2 = 1.5 -> rows 1.5, 3, 4.5, 7.5, 9, 10.5.
    m = generate_mesh(small(cube={"noc": {"ucie_connections": 4}}))
    assert m.row_ys == (1.5, 3.0, 4.5, 7.5, 9.0, 10.5)
    assert m.hbm_zone == (2, 3, 1, 2)
    assert len(m.present) == 6 * 4 - 4
    assert sum(1 for p in m.ucie if p.side == "e") == 4


def test_one_relay_column():
    # w 15: PE xs 1.5, 4.5, 10.5, 13.5; the 6 mm gap needs ceil(6/3) - 1 = 1 relay at 7.5.
    m = generate_mesh(small(cube={"geometry": {"w_mm": 15.0}}))
    assert m.col_xs == (1.5, 4.5, 7.5, 10.5, 13.5)
    assert len(m.present) == 5 * 4 - 4


def test_wide_cube_compiles_with_relay_routers():
    g = compile_spec(small(cube={"geometry": {"w_mm": 15.0}}))
    # 16 routers per cube in 4 cubes; PE blocks, hbm, sram, m_cpu, 8 PHYs unchanged.
    assert len(g.nodes_of_type("router")) == 16 * 4
    assert len(g.nodes) == 4 * (16 + 72 + 8 + 1 + 1 + 8) + 5 + 2
    # relay router r0c2 at x 7.5 links the two PE routers either side of it
    assert g.edge("sip0.cube0.noc.r0c1", "sip0.cube0.noc.r0c2").distance_mm == 3.0
    assert g.edge("sip0.cube0.noc.r0c2", "sip0.cube0.noc.r0c3").distance_mm == 3.0


def test_wider_cube_relay_columns():
    # w 20: PE xs 1.5, 4.5, 15.5, 18.5; the 11 mm gap needs ceil(11/3) - 1 = 3 relays, step 11/4 = 2.75.
    # (Regression: the relays once compounded to 7.25, 12.75, 21.0.)
    g = compile_spec(small(cube={"geometry": {"w_mm": 20.0}}))
    assert g.mesh.col_xs == (1.5, 4.5, 7.25, 10.0, 12.75, 15.5, 18.5)
    # 7 columns x 4 rows minus the 2 x 2 HBM zone
    assert len(g.mesh.present) == 7 * 4 - 4
    # the top row is a chain of routers 2.75 mm apart between the PE routers at 4.5 and 15.5
    for c in range(1, 5):
        e = g.edge(f"sip0.cube0.noc.r0c{c}", f"sip0.cube0.noc.r0c{c + 1}")
        assert e.distance_mm == pytest.approx(2.75)
    assert routers_of(g, "sip0.cube0.pe2.pe_dma") == ["sip0.cube0.noc.r0c6"]  # NE PE at x 18.5


def _column_invariants(spec):
    m = generate_mesh(spec)
    xs = m.col_xs
    geo = spec.cube.geometry
    assert list(xs) == sorted(xs)
    assert all(0.0 <= x <= geo.w_mm for x in xs)
    assert {p[0] for p in m.pe_positions} <= set(xs)
    assert all(b - a <= geo.max_spacing_mm + 1e-6 for a, b in itertools.pairwise(xs))


@pytest.mark.parametrize("w_mm, spacing", [(12.0, 3.0), (15.0, 3.0), (13.0, 2.5), (14.0, 3.5)])
def test_column_gaps_single_relay(w_mm, spacing):
    _column_invariants(small(cube={"geometry": {"w_mm": w_mm, "max_spacing_mm": spacing}}))


@pytest.mark.parametrize("w_mm, spacing", [(20.0, 3.0), (12.0, 1.0), (30.0, 3.0)])
def test_column_gaps_several_relays(w_mm, spacing):
    _column_invariants(small(cube={"geometry": {"w_mm": w_mm, "max_spacing_mm": spacing}}))


def test_column_gaps_sweep():
    # A deterministic sweep rather than hypothesis: widths 9..40 mm x a range of spacings.
    for w_mm in [9.0 + 0.75 * i for i in range(42)]:
        for spacing in (0.8, 1.3, 2.2, 3.0, 4.1, 6.0):
            _column_invariants(small(cube={"geometry": {"w_mm": w_mm, "max_spacing_mm": spacing}}))


def test_source_hash_depends_only_on_layout_inputs():
    base = source_hash(small())
    assert source_hash(small(cube={"noc": {"link_bw_gbs": 1.0}, "hbm": {"bw_gbs": 5.0}})) == base
    assert source_hash(small(pe={"clock_ghz": 2.0}, fabric={"flit_bytes": 128})) == base
    assert source_hash(small(sip={"cube_mesh": {"w": 1}})) == base
    assert source_hash(small(cube={"geometry": {"w_mm": 13.0}})) != base
    assert source_hash(small(cube={"noc": {"ucie_connections": 3}})) != base
    assert source_hash(small(cube={"placement": {"sram_pos_mm": [2.0, 8.5]}})) != base
    assert source_hash(small(cube={"pe_layout": {"pe_per_corner": 1}, "hbm": {"pseudo_channels": 4}})) != base


# --------------------------------------------------------------------------- compiled graph


def test_default_node_count_by_hand(graph):
    per_cube = 12 + 9 * 8 + 8 + 1 + 1 + 8  # routers, PE blocks, hbm_ctrl, sram, m_cpu, UCIe PHYs = 102
    per_sip_io = 3 + 2  # pcie_ep, io_noc, io_cpu + one io_ucie per west PHY
    assert len(graph.nodes) == 2 * 16 * per_cube + 2 * per_sip_io + 2 == 3276


def test_default_node_type_counts(graph):
    counts: dict[str, int] = {}
    for n in graph.nodes.values():
        counts[n.type] = counts.get(n.type, 0) + 1
    expected = {b: 256 for b in PE_BLOCKS}
    expected.update(router=384, hbm_ctrl=256, sram=32, m_cpu=32, ucie_phy=256, io_ucie=4, pcie_ep=2,
                    io_noc=2, io_cpu=2, host_cpu=1, switch=1)
    assert counts == expected


def test_default_edge_kind_counts_by_hand(graph):
    pes, cubes, sips = 256, 32, 2
    expected = {
        "pcie": 2 + 2 * sips,                       # host<->switch, switch<->each pcie_ep
        "io_internal": sips * (2 + 2 * 2),          # ep<->noc, noc<->2 io_ucie
        "command": sips * 2 + pes * 4,              # noc<->io_cpu; pe_cpu, pe_mmu <-> router
        "router_mesh": cubes * 12 * 2,              # the 12 routers form a ring of 12 links
        "pe_internal": pes * 13 * 2,
        "pe_to_router": pes, "router_to_pe": pes,
        "router_to_hbm": pes, "hbm_to_router": pes,
        "router_to_mcpu": cubes, "mcpu_to_router": cubes,
        "router_to_sram": cubes, "sram_to_router": cubes,
        "router_to_ucie_conn": cubes * 8, "ucie_conn_to_router": cubes * 8,
        "ucie_mesh": sips * 24 * 2 * 2,             # 24 neighbour pairs in a 4x4 mesh, 2 PHYs, 2 directions
        "io_to_cube": sips * 2, "cube_to_io": sips * 2,
    }
    assert graph.edge_kind_counts() == dict(sorted(expected.items()))


def test_required_edge_kinds_present(graph):
    kinds = set(graph.edge_kind_counts())
    required = {"pe_internal", "pe_to_router", "router_to_pe", "router_mesh", "router_to_hbm", "hbm_to_router",
                "router_to_mcpu", "router_to_sram", "router_to_ucie_conn", "ucie_conn_to_router", "ucie_mesh",
                "io_internal", "io_to_cube", "cube_to_io", "pcie", "command"}
    assert required <= kinds


def test_edges_sane_and_bidirectional(graph):
    pairs = [(e.src, e.dst) for e in graph.edges]
    assert len(set(pairs)) == len(pairs), "parallel duplicate edges"
    for e in graph.edges:
        assert e.bw_gbs > 0, e
        assert e.latency_ns >= 0, e
        assert e.distance_mm >= 0, e
        assert e.routing_weight_mm >= 0, e
        assert e.src in graph.nodes and e.dst in graph.nodes
        assert graph.has_edge(e.dst, e.src), e
        assert e.src != e.dst


def test_out_edges_cover_all_edges(graph):
    assert sum(len(graph.out_edges(n)) for n in graph.nodes) == len(graph.edges)


def test_router_mesh_edge_values(graph):
    e = graph.edge("sip0.cube0.noc.r0c0", "sip0.cube0.noc.r0c1")
    assert e.kind == "router_mesh"
    assert e.bw_gbs == 256.0
    assert e.distance_mm == pytest.approx(3.0)
    assert e.latency_ns == pytest.approx(3.0 * 0.1)  # wire_ns_per_mm
    assert e.routing_weight_mm == pytest.approx(3.0)
    assert not graph.has_edge("sip0.cube0.noc.r0c0", "sip0.cube0.noc.r1c1")  # no diagonal links


def test_ucie_mesh_edge_values(graph):
    # cube0's east PHY sits on x = 12 of cube0, cube1's west PHY on x = 0 of cube1: the 2 mm gap apart.
    e = graph.edge("sip0.cube0.ucie_e.c0", "sip0.cube1.ucie_w.c0")
    assert e.kind == "ucie_mesh"
    assert e.bw_gbs == 512.0
    assert e.distance_mm == pytest.approx(2.0)
    assert e.latency_ns == pytest.approx(8.0)  # off-die: exactly the UCIe crossing latency
    assert e.routing_weight_mm == 1.0
    v = graph.edge("sip0.cube0.ucie_s.c1", "sip0.cube4.ucie_n.c1")
    assert v.kind == "ucie_mesh"
    assert v.distance_mm == pytest.approx(2.0)
    assert not graph.has_edge("sip0.cube3.ucie_e.c0", "sip0.cube4.ucie_w.c0")  # no wrap-around


def test_io_to_cube_edge_values(graph):
    e = graph.edge("sip1.io0.io_ucie.c1", "sip1.cube0.ucie_w.c1")
    assert e.kind == "io_to_cube"
    assert e.bw_gbs == 512.0
    assert e.distance_mm == pytest.approx(2.0)  # IO chiplet edge to cube0 across the 2 mm gap
    assert e.routing_weight_mm == 1.0
    assert graph.edge("sip1.cube0.ucie_w.c1", "sip1.io0.io_ucie.c1").kind == "cube_to_io"


def test_pcie_edges(graph):
    for a, b in (("tray.host_cpu", "fabric.switch0"), ("fabric.switch0", "sip0.io0.pcie_ep"),
                 ("fabric.switch0", "sip1.io0.pcie_ep"), ("sip1.io0.pcie_ep", "fabric.switch0")):
        e = graph.edge(a, b)
        assert e.kind == "pcie"
        assert e.bw_gbs == 768.0
        assert e.latency_ns == pytest.approx(50.0)  # off-die: exactly the PCIe latency
    assert not graph.has_edge("sip0.io0.pcie_ep", "sip1.io0.pcie_ep")


def test_other_attachment_bandwidths(graph):
    assert graph.edge("sip0.cube0.noc.r2c0", "sip0.cube0.sram").bw_gbs == 128.0
    assert graph.edge("sip0.cube0.noc.r0c0", "sip0.cube0.hbm_ctrl.pe0").bw_gbs == 256.0
    assert graph.edge("sip0.io0.pcie_ep", "sip0.io0.io_noc").bw_gbs == 512.0
    assert graph.edge("sip0.io0.io_noc", "sip0.io0.io_cpu").kind == "command"


def test_tcm_read_and_write_bandwidths():
    g = compile_spec(small(pe={"internal_bw_gbs": 300.0, "tcm": {"read_bw_gbs": 100.0, "write_bw_gbs": 200.0}}))
    pre = "sip0.cube1.pe4."
    for writer in ("pe_dma", "pe_fetch_store"):
        assert g.edge(pre + writer, pre + "pe_tcm").bw_gbs == 200.0
        assert g.edge(pre + "pe_tcm", pre + writer).bw_gbs == 100.0
    assert g.edge(pre + "pe_scheduler", pre + "pe_gemm").bw_gbs == 300.0
    assert g.edge(pre + "pe_gemm", pre + "pe_scheduler").bw_gbs == 300.0
    assert not g.has_edge(pre + "pe_gemm", pre + "pe_tcm")


def test_pe_internal_links_by_hand(graph):
    links = {("pe_cpu", "pe_scheduler"), ("pe_cpu", "pe_mmu"), ("pe_scheduler", "pe_dma"),
             ("pe_scheduler", "pe_fetch_store"), ("pe_scheduler", "pe_gemm"), ("pe_scheduler", "pe_math"),
             ("pe_scheduler", "pe_ipcq"), ("pe_dma", "pe_tcm"), ("pe_dma", "pe_mmu"), ("pe_dma", "pe_ipcq"),
             ("pe_fetch_store", "pe_tcm"), ("pe_fetch_store", "pe_gemm"), ("pe_fetch_store", "pe_math")}
    pre = "sip0.cube9.pe5."
    got = {(e.src[len(pre):], e.dst[len(pre):]) for b in PE_BLOCKS for e in graph.out_edges(pre + b)
           if e.kind == "pe_internal"}
    assert got == links | {(b, a) for a, b in links}


def test_node_attributes(graph):
    h = graph.nodes["sip0.cube0.hbm_ctrl.pe3"]
    assert h.type == "hbm_ctrl"
    assert h.attrs["pe"] == 3
    assert h.attrs["channels"] == 8
    assert h.attrs["channel_bw_gbs"] == 16.0
    assert h.attrs["burst_bytes"] == 256
    assert h.attrs["slice_bytes"] == 6 * (1 << 30)
    assert h.overhead_ns == 10.0
    assert graph.nodes["sip0.cube0.sram"].attrs["capacity_bytes"] == 32 * (1 << 20)
    assert graph.nodes["sip0.cube0.sram"].overhead_ns == 5.0
    assert graph.nodes["sip0.cube0.m_cpu"].overhead_ns == 10.0
    assert graph.nodes["sip0.cube0.noc.r0c0"].overhead_ns == 2.0
    assert graph.nodes["sip0.cube0.pe0.pe_cpu"].overhead_ns == 2.0
    assert graph.nodes["sip0.cube0.pe0.pe_scheduler"].overhead_ns == 1.0
    assert graph.nodes["sip0.cube0.pe0.pe_dma"].overhead_ns == 2.0
    assert graph.nodes["sip0.cube0.pe0.pe_gemm"].overhead_ns == 0.0
    assert graph.nodes["sip0.io0.io_cpu"].overhead_ns == 20.0
    assert graph.nodes["sip0.io0.pcie_ep"].overhead_ns == 10.0
    assert graph.nodes["fabric.switch0"].overhead_ns == 20.0
    assert graph.nodes["tray.host_cpu"].overhead_ns == 0.0


def test_node_positions(graph):
    # SIP width = io 6 + gap 2 + 4 cubes x 12 + 3 gaps x 2 = 62 mm; cube origin x = 8 + col x 14, y = row x 14.
    assert (graph.nodes["sip0.cube0.noc.r0c0"].x_mm, graph.nodes["sip0.cube0.noc.r0c0"].y_mm) == (9.5, 1.5)
    assert (graph.nodes["sip0.cube1.noc.r0c0"].x_mm, graph.nodes["sip0.cube1.noc.r0c0"].y_mm) == (23.5, 1.5)
    assert (graph.nodes["sip0.cube4.noc.r3c3"].x_mm, graph.nodes["sip0.cube4.noc.r3c3"].y_mm) == (18.5, 24.5)
    # ring_1d lays SIPs in one row: SIP 1 starts at 62 + 10 = 72 mm.
    assert graph.nodes["sip1.cube0.noc.r0c0"].x_mm == 72 + 9.5
    # PE blocks: 3 x 3 grid of pitch 2/3 mm centred on the PE position, pe_dma in the middle.
    dma = graph.nodes["sip0.cube0.pe0.pe_dma"]
    assert (dma.x_mm, dma.y_mm) == (9.5, 1.5)
    cpu = graph.nodes["sip0.cube0.pe0.pe_cpu"]
    assert cpu.x_mm == pytest.approx(9.5 - 2 / 3, abs=1e-6)
    assert cpu.y_mm == pytest.approx(1.5 - 2 / 3, abs=1e-6)


def test_grid_layout_of_torus_sips():
    g = compile_spec(load_spec(TOPOLOGIES / "6sip_2x3_torus_2d.yaml"))
    assert len(g.nodes) == 6 * 16 * 102 + 6 * 5 + 2
    # SIP height = 4 x 12 + 3 x 2 = 54 mm; SIP 4 sits at grid row 1, column 1.
    r0 = g.nodes["sip4.cube0.noc.r0c0"]
    assert (r0.x_mm, r0.y_mm) == (72 + 9.5, 64 + 1.5)
    assert len(g.nodes_of_type("pcie_ep")) == 6
    assert all(g.has_edge("fabric.switch0", f"sip{s}.io0.pcie_ep") for s in range(6))


def test_small_topology_counts():
    g = compile_spec(small())
    assert len(g.nodes) == 4 * 102 + 5 + 2
    assert g.edge_kind_counts()["ucie_mesh"] == 4 * 2 * 2  # 4 neighbour pairs in 2x2


def test_attach_cube_moves_the_io_link():
    g = compile_spec(small(sip={"io": {"attach_cube": 2}}))
    assert g.edge("sip0.io0.io_ucie.c0", "sip0.cube2.ucie_w.c0").kind == "io_to_cube"
    assert not g.has_edge("sip0.io0.io_ucie.c0", "sip0.cube0.ucie_w.c0")


def test_graph_lookup_errors(graph):
    with pytest.raises(TopologyError, match=re.escape("no link for sip0.cube0.pe0.pe_dma → sip0.cube0.pe0.pe_gemm")):
        graph.edge("sip0.cube0.pe0.pe_dma", "sip0.cube0.pe0.pe_gemm")
    with pytest.raises(TopologyError, match=re.escape("sip9.cube0.m_cpu")):
        graph.node("sip9.cube0.m_cpu")
    assert graph.node("sip0.cube0.m_cpu").type == "m_cpu"


def test_graph_is_read_only(graph):
    with pytest.raises(TypeError):
        graph.nodes["x"] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        graph.views["x"] = None  # type: ignore[index]


# --------------------------------------------------------------------------- mesh cache


def _copy_default(tmp_path: Path, name: str = "mytopo.yaml") -> Path:
    p = tmp_path / name
    shutil.copy(DEFAULT_YAML, p)
    return p


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private user cache directory for the mesh cache."""
    root = tmp_path / "cache"
    monkeypatch.setenv("KERNBENCH_CACHE_DIR", str(root))
    return root / "cube-mesh"


def test_load_topology_caches_the_mesh_in_the_user_cache_not_beside_the_file(tmp_path, cache_dir):
    p = _copy_default(tmp_path)
    g = load_topology(p)
    cache = cache_dir / f"{source_hash(g.spec)}.yaml"
    assert mesh_path_for(g.spec) == cache == g.mesh_path
    assert cache.is_file()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cache", "mytopo.yaml"]
    data = yaml.safe_load(cache.read_text(encoding="utf-8"))
    assert len(data["source_hash"]) == 16
    int(data["source_hash"], 16)
    assert data["col_xs"] == [1.5, 4.5, 7.5, 10.5]
    assert data["m_cpu_router"] == [1, 0]
    assert not list(cache_dir.glob(".*"))  # no temporary file left behind


def test_cached_mesh_equals_generated_mesh(tmp_path, cache_dir):
    p = _copy_default(tmp_path)
    first = load_topology(p)
    second = load_topology(p)  # from the cache
    assert second.mesh == generate_mesh(second.spec)
    assert dict(second.nodes) == dict(first.nodes)
    assert second.edges == first.edges


def test_bandwidth_change_keeps_cache(tmp_path, cache_dir):
    p = _copy_default(tmp_path)
    cache = load_topology(p).mesh_path
    old = 1_000_000_000
    os.utime(cache, (old, old))
    content = cache.read_bytes()
    _edit(p, "link_bw_gbs: 256.0", "link_bw_gbs: 300.0")
    g = load_topology(p)
    assert g.mesh_path == cache and cache.read_bytes() == content
    assert cache.stat().st_mtime == old
    assert g.edge("sip0.cube0.noc.r0c0", "sip0.cube0.noc.r0c1").bw_gbs == 300.0


def test_geometry_change_is_cached_under_its_own_hash(tmp_path, cache_dir):
    p = _copy_default(tmp_path)
    first = load_topology(p).mesh_path
    content = first.read_bytes()
    _edit(p, "{w_mm: 12.0", "{w_mm: 13.0")
    g = load_topology(p)
    assert g.mesh_path != first and first.read_bytes() == content  # both layouts stay cached
    data = yaml.safe_load(g.mesh_path.read_text(encoding="utf-8"))
    assert data["source_hash"] == source_hash(g.spec) == g.mesh_path.stem
    # w 13: PE xs 1.5, 4.5, 8.5, 11.5; the 4 mm gap gets one relay at 6.5.
    assert data["col_xs"] == [1.5, 4.5, 6.5, 8.5, 11.5]
    assert g.mesh.col_xs == (1.5, 4.5, 6.5, 8.5, 11.5)


@pytest.mark.parametrize("damage", ["truncated", "binary", "not yaml", "missing keys", "wrong types", "a list"])
def test_a_corrupt_cache_entry_is_regenerated_with_a_warning(tmp_path, cache_dir, damage):
    from kernbench.topology.mesh_gen import CacheWarning

    p = _copy_default(tmp_path)
    cache = load_topology(p).mesh_path
    good = cache.read_text(encoding="utf-8")
    data = yaml.safe_load(good)
    if damage == "missing keys":
        del data["ucie"]
    elif damage == "wrong types":
        data["pe_routers"] = [["a", 1]] * 8
    bad = {"truncated": good[: len(good) // 2], "not yaml": "::: [not yaml", "a list": "- 1\n- 2\n",
           "missing keys": yaml.safe_dump(data), "wrong types": yaml.safe_dump(data)}
    if damage == "binary":
        cache.write_bytes(b"\xff\xfe\x00garbage\x80")
    else:
        cache.write_text(bad[damage], encoding="utf-8")
    with pytest.warns(CacheWarning, match=f"cube-mesh cache {re.escape(str(cache))} is unusable"):
        g = load_topology(p)
    assert g.mesh == generate_mesh(g.spec)
    assert cache.read_text(encoding="utf-8") == good


def test_a_cache_entry_for_another_layout_is_not_used(tmp_path, cache_dir):
    p = _copy_default(tmp_path)
    cache = load_topology(p).mesh_path
    data = yaml.safe_load(cache.read_text(encoding="utf-8"))
    data["source_hash"] = "0" * 16
    data["col_xs"] = [0.0]
    cache.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_topology(p).mesh.col_xs == (1.5, 4.5, 7.5, 10.5)
    assert yaml.safe_load(cache.read_text(encoding="utf-8"))["source_hash"] == cache.stem


def test_a_hand_edited_cache_entry_is_regenerated_not_honoured(tmp_path, cache_dir):
    # The cache holds the SHA-256 of the layout it generated: an edit that keeps source_hash (and is otherwise
    # well formed) no longer changes the routing; it is regenerated with a warning (tests/reliability round 2).
    p = _copy_default(tmp_path)
    first = load_topology(p)
    cache = first.mesh_path
    data = yaml.safe_load(cache.read_text(encoding="utf-8"))
    data["sram_router"] = [0, 3]
    cache.write_text(yaml.safe_dump(data), encoding="utf-8")
    from kernbench.topology.mesh_gen import CacheWarning

    with pytest.warns(CacheWarning, match="does not match its content_sha256"):
        g = load_topology(p)
    assert routers_of(g, "sip0.cube0.sram") == routers_of(first, "sip0.cube0.sram") != ["sip0.cube0.noc.r0c3"]


def test_an_unwritable_cache_runs_uncached(tmp_path, monkeypatch):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("KERNBENCH_CACHE_DIR", str(blocker))
    g = load_topology(_copy_default(tmp_path))
    assert g.mesh == generate_mesh(g.spec)



# --------------------------------------------------------------------------- disabled links


def test_disabling_required_pe_link_raises():
    spec = small(disabled_links=[["sip0.cube0.pe0.pe_dma", "sip0.cube0.noc.r0c0"]])
    with pytest.raises(TopologyError) as info:
        compile_spec(spec)
    assert "no link for sip0.cube0.pe0.pe_dma → sip0.cube0.noc.r0c0" in str(info.value)


def test_disabling_required_pe_internal_link_raises():
    spec = small(disabled_links=[["sip0.cube1.pe2.pe_tcm", "sip0.cube1.pe2.pe_dma"]])
    with pytest.raises(TopologyError, match=re.escape("no link for sip0.cube1.pe2.pe_tcm → sip0.cube1.pe2.pe_dma")):
        compile_spec(spec)


def test_disabling_host_link_raises():
    spec = small(disabled_links=[["fabric.switch0", "tray.host_cpu"]])
    with pytest.raises(TopologyError, match=re.escape("no link for fabric.switch0 → tray.host_cpu")):
        compile_spec(spec)


@pytest.mark.parametrize("link", [
    ["sip0.cube0.noc.r1c1", "sip0.cube0.noc.r1c2"],   # zone slots: no such routers
    ["sip0.cube0.noc.r0c0", "sip0.cube0.noc.r1c1"],   # diagonal
    ["sip0.cube0.pe0.pe_gemm", "sip0.cube0.pe0.pe_tcm"],
    ["sip7.cube0.m_cpu", "sip7.cube0.noc.r1c0"],
])
def test_disabling_nonexistent_link_raises(link):
    with pytest.raises(TopologyError) as info:
        compile_spec(small(disabled_links=[link]))
    assert f"{link[0]} → {link[1]}" in str(info.value)
    assert "not a link" in str(info.value)


def test_disabling_hbm_data_path_raises():
    spec = small(disabled_links=[["sip0.cube0.noc.r0c0", "sip0.cube0.hbm_ctrl.pe0"]])
    with pytest.raises(TopologyError, match=re.escape("data path from tray.host_cpu to sip0.cube0.hbm_ctrl.pe0")):
        compile_spec(spec)
    spec = small(disabled_links=[["sip0.cube0.hbm_ctrl.pe0", "sip0.cube0.noc.r0c0"]])
    with pytest.raises(TopologyError, match=re.escape("data path to tray.host_cpu from sip0.cube0.hbm_ctrl.pe0")):
        compile_spec(spec)


def test_disabling_optional_mesh_link():
    a, b = "sip0.cube0.noc.r0c0", "sip0.cube0.noc.r0c1"
    base = compile_spec(small())
    g = compile_spec(small(disabled_links=[[a, b], [b, a]]))
    assert len(g.edges) == len(base.edges) - 2
    assert not g.has_edge(a, b) and not g.has_edge(b, a)
    assert g.has_edge("sip0.cube1.noc.r0c0", "sip0.cube1.noc.r0c1")
    assert set(g.nodes) == set(base.nodes)


def test_disabled_link_error_names_the_file(tmp_path):
    p = _copy_default(tmp_path, "broken.yaml")
    with p.open("a", encoding="utf-8") as f:
        f.write('\ndisabled_links:\n  - ["sip0.cube0.pe0.pe_dma", "sip0.cube0.noc.r0c0"]\n')
    with pytest.raises(TopologyError) as info:
        load_topology(p)
    assert str(p) in str(info.value)
    assert "no link for sip0.cube0.pe0.pe_dma → sip0.cube0.noc.r0c0" in str(info.value)


# --------------------------------------------------------------------------- views


def test_four_views(graph):
    assert set(graph.views) == {"system", "sip", "cube", "pe"}
    for name, view in graph.views.items():
        assert view.name == name
        ids = {n.id for n in view.nodes}
        assert len(ids) == len(view.nodes)
        for e in view.edges:
            assert e.src in ids and e.dst in ids
            assert e.count >= 1


def test_pe_view_has_the_nine_blocks(graph):
    v = graph.views["pe"]
    assert {n.id for n in v.nodes} == {f"sip0.cube0.pe0.{b}" for b in PE_BLOCKS}
    assert len(v.nodes) == 9
    assert len(v.edges) == 26
    assert {e.kind for e in v.edges} == {"pe_internal"}
    assert all(e.count == 1 for e in v.edges)


def test_system_view(graph):
    v = graph.views["system"]
    assert {n.id for n in v.nodes} == {"tray.host_cpu", "fabric.switch0", "sip0", "sip1"}
    pairs = {(e.src, e.dst): e for e in v.edges}
    assert set(pairs) == {("tray.host_cpu", "fabric.switch0"), ("fabric.switch0", "tray.host_cpu"),
                          ("fabric.switch0", "sip0"), ("sip0", "fabric.switch0"),
                          ("fabric.switch0", "sip1"), ("sip1", "fabric.switch0")}
    assert pairs[("fabric.switch0", "sip1")].kind == "pcie"
    assert pairs[("fabric.switch0", "sip1")].count == 1


def test_sip_view(graph):
    v = graph.views["sip"]
    assert len(v.nodes) == 1 + 16
    pairs = {(e.src, e.dst): e for e in v.edges}
    assert len(pairs) == 24 * 2 + 2
    assert pairs[("sip0.cube0", "sip0.cube1")].count == 2  # two UCIe PHYs per side
    assert pairs[("sip0.cube0", "sip0.cube1")].kind == "ucie_mesh"
    assert pairs[("sip0.io0", "sip0.cube0")].count == 2
    assert ("sip0.cube0", "sip0.cube5") not in pairs
    assert ("sip0.cube3", "sip0.cube4") not in pairs


def test_cube_view(graph):
    v = graph.views["cube"]
    # 12 routers, 8 PE boxes, 8 hbm_ctrl, sram, m_cpu, 8 UCIe PHYs
    assert len(v.nodes) == 38
    pairs = {(e.src, e.dst): e for e in v.edges}
    # router ring 24 + PE<->router 16 + hbm<->router 16 + sram 2 + m_cpu 2 + PHY<->router 16
    assert len(pairs) == 76
    pe0 = pairs[("sip0.cube0.pe0", "sip0.cube0.noc.r0c0")]
    assert pe0.count == 3  # pe_dma, pe_cpu, pe_mmu merged
    assert pe0.kind == "pe_to_router"
    box = next(n for n in v.nodes if n.id == "sip0.cube0.pe0")
    assert (box.x_mm, box.y_mm) == (9.5, 1.5)
    assert math.isclose(box.w_mm, 2.0)


def test_compile_without_a_cache_writes_nothing(tmp_path, cache_dir):
    p = _copy_default(tmp_path)
    compile_spec(load_spec(p))
    assert sorted(x.name for x in tmp_path.iterdir()) == ["mytopo.yaml"]


# ---------------------------------------------------------------------------------------------- builtin topologies
REPO_TOPOLOGIES = {"default": "topology.yaml", "6sip_2x3_torus_2d": "6sip_2x3_torus_2d.yaml",
                   "6sip_2x3_ring_1d": "6sip_2x3_ring_1d.yaml",
                   "6sip_2x3_mesh_2d_no_wrap": "6sip_2x3_mesh_2d_no_wrap.yaml",
                   "16sip_4x4_torus_2d": "16sip_4x4_torus_2d.yaml"}


def test_packaged_topologies_are_the_repository_sources():
    from kernbench.topology import builtin_names
    from kernbench.topology.builtins import text

    assert builtin_names() == ["default", "16sip_4x4_torus_2d", "6sip_2x3_mesh_2d_no_wrap", "6sip_2x3_ring_1d",
                               "6sip_2x3_torus_2d"]
    for name, file in REPO_TOPOLOGIES.items():
        assert text(name) == (DEFAULT_YAML.parent / file).read_text(encoding="utf-8"), \
            f"packaged {name}.yaml differs from topologies/{file}: copy the edited file into the package"


def test_builtin_and_resolve_work_from_any_folder(tmp_path, monkeypatch, cache_dir):
    from kernbench.topology import builtin, resolve

    monkeypatch.chdir(tmp_path)
    g = builtin()
    assert g.spec.source == "builtin:default" and g.spec == spec_from_dict(
        yaml.safe_load(DEFAULT_YAML.read_text(encoding="utf-8")), "builtin:default")
    assert resolve(None).spec == g.spec
    assert resolve("6sip_2x3_torus_2d").spec.system.sips.count == 6
    copy = _copy_default(tmp_path)
    assert resolve(str(copy)).spec.source == str(copy)
    with pytest.raises(SpecError, match="unknown builtin topology 'nope'; builtin topologies: default"):
        resolve("nope")
    with pytest.raises(SpecError, match=r"topology file not found: missing\.yaml"):
        resolve("missing.yaml")


def test_export_writes_an_editable_copy_and_never_overwrites(tmp_path):
    from kernbench.topology.builtins import export, text

    out = export("6sip_2x3_ring_1d", tmp_path)
    assert out == tmp_path / "6sip_2x3_ring_1d.yaml" and out.read_text(encoding="utf-8") == text("6sip_2x3_ring_1d")
    with pytest.raises(SpecError, match="already exists"):
        export("6sip_2x3_ring_1d", out)
    assert load_topology(out).spec.system.sips.count == 6
