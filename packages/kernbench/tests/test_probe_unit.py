"""Probe internals against hand-computed numbers (no subprocess)."""

from __future__ import annotations

import itertools
import math

import pytest

from kernbench.cli.probe import ProbeError, case_names, run_probe
from kernbench.cli.topology_cmd import summary
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def default_graph():
    return compile_spec(spec_from_dict({}))


def test_pe_local_hbm_latency_by_hand(default_graph) -> None:
    """pe_dma -> router r0c0 -> hbm_ctrl.pe0, 32 KiB, from the default parameters.

    overheads: DMA 2 + router 2 + HBM controller 10 = 14 ns.
    wires: the PE sits on its router (0 mm); the controller sits 35% of the way from the router at
    (1.5, 1.5) mm to the cube centre (6, 6) mm: 0.35 * 4.5 * sqrt(2) mm at 0.1 ns/mm.
    fill: one 256 B flit over two 256 GB/s links = 2 ns.
    drain: 128 bursts over 8 channels of 16 GB/s (16 ns per burst), arriving 1 ns apart:
    16 + max(127 * 1, 7 * 1 + 15 * 16) = 263 ns.
    """
    expected = 14 + 0.35 * 4.5 * math.sqrt(2) * 0.1 + 2 + 263
    res = run_probe(default_graph, "pe-local-hbm", sweep=False)
    (case,) = res.cases
    assert case.actual_ns == pytest.approx(expected, rel=1e-6)  # edge lengths are stored to 1e-6 mm
    assert case.formula_ns == pytest.approx(expected, rel=1e-6)  # edge lengths are stored to 1e-6 mm
    assert case.bottleneck_bw_gbs == pytest.approx(8 * 16.0)
    assert case.path == ["sip0.cube0.pe0.pe_dma", "sip0.cube0.noc.r0c0", "sip0.cube0.hbm_ctrl.pe0"]


def test_catalog_follows_the_mesh() -> None:
    small = compile_spec(spec_from_dict({"system": {"sips": {"count": 1, "grid": [1, 1]}},
                                         "sip": {"cube_mesh": {"w": 2, "h": 2}}}))
    names = case_names(small)
    assert [n for n in names if n.startswith("h2d")] == ["h2d-1hop", "h2d-2hop"]
    assert "pe-cross-sip-hbm" not in names
    res = run_probe(small, sweep=False)
    assert res.all_pass, res.invariants


def test_unknown_case_is_an_error(default_graph) -> None:
    with pytest.raises(ProbeError, match="valid cases: h2d-1hop"):
        run_probe(default_graph, "h2d-9hop")


def test_sweep_utilisation_rises_with_size(default_graph) -> None:
    res = run_probe(default_graph, "pe-local-hbm")
    utils = [r["util_pct"] for r in res.sweep]
    assert len(utils) == 5 and all(a < b for a, b in itertools.pairwise(utils))
    assert utils[-1] <= 100.0


def test_topology_summary_counts(default_graph) -> None:
    info = summary(default_graph)
    assert (info["sips"], info["cubes_per_sip"], info["pes_per_cube"]) == (2, 16, 8)
    assert info["nodes"] == len(default_graph.nodes)
    assert info["edges"] == sum(info["edge_kinds"].values()) == len(default_graph.edges)
    # 9 blocks x 8 PEs x 32 cubes, 13 links each way inside every PE
    assert info["edge_kinds"]["pe_internal"] == 13 * 2 * 8 * 32
