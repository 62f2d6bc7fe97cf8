"""The gemm study: its grid, fill caps from the topology's tile, the pipeline model against closed forms and runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kernbench.studies.base import PointContext, StudyError
from kernbench.studies.figures.gemm import BAND_WIDE
from kernbench.studies.gemm import SHAPES, STUDY, TILE_COUNTS
from kernbench.studies.gemm_model import predict
from kernbench.studies.graphs import study_graph

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
CTX = PointContext(TOPOLOGIES)


def _point(**params):
    return STUDY.point({"series": "shapes", "topology": "topology.yaml", **params}, CTX)


def test_grid_is_eight_shapes_by_three_stagings_and_one_to_48_tiles():
    grid = STUDY.grid()
    shapes = [p.params for p in grid if p.labels["series"] == "shapes"]
    assert {(p["m"], p["k"], p["n"]) for p in shapes} == {
        (32, 32, 32), (32, 64, 32), (32, 128, 32), (32, 128, 128), (32, 3072, 32), (8, 128, 128), (128, 8, 128),
        (512, 512, 512)}
    assert len(shapes) == 24 and len(SHAPES) == 8
    tiles = [p.params for p in grid if p.labels["series"] == "tiles"]
    assert sorted({p["k_tiles"] for p in tiles}) == list(range(1, 49)) == list(TILE_COUNTS)
    assert len(tiles) == 3 * 48


def _with_tile(tmp_path: Path, tm: int, tn: int, tk: int) -> PointContext:
    """A copy of the default topology with the GEMM tile set to tm x tn x tk (M, N, K)."""
    spec = yaml.safe_load((TOPOLOGIES / "topology.yaml").read_text())
    spec["pe"]["gemm"].update(tile_m=tm, tile_n=tn, tile_k=tk)
    folder = tmp_path / f"tile{tm}x{tn}x{tk}"
    folder.mkdir()
    (folder / "topology.yaml").write_text(yaml.safe_dump(spec))
    return PointContext(folder)


@pytest.mark.parametrize(("tile", "caps"), [
    # M32 x N64 x K32: 32^3 fills half of N; M = 8 a quarter of M; K = 8 a quarter of K (N = 128 fills N)
    ((32, 64, 32), {(32, 32, 32): 0.5, (8, 128, 128): 0.25, (128, 8, 128): 0.25}),
    # the seed's M32 x K64 x N32: 32^3 fills half of K; M = 8 a quarter; K = 8 an eighth
    ((32, 32, 64), {(32, 32, 32): 0.5, (8, 128, 128): 0.25, (128, 8, 128): 0.125}),
])
def test_fill_caps_follow_the_topology_tile(tmp_path, tile, caps):
    """The caps are computed from the tile in the topology file, so a tile change needs no code change."""
    ctx = _with_tile(tmp_path, *tile)
    for (m, k, n), cap in caps.items():
        r = STUDY.point({"series": "shapes", "topology": "topology.yaml", "variant": "load_load", "m": m, "k": k,
                         "n": n}, ctx)
        assert (r["tile_m"], r["tile_n"], r["tile_k"]) == tile
        assert r["fill_ratio"] == cap
        assert r["mac_efficiency"] <= cap  # a shape never beats its cap
    r = STUDY.point({"series": "tiles", "topology": "topology.yaml", "variant": "load_load", "k_tiles": 5}, ctx)
    assert (r["m"], r["k"], r["n"], r["tiles"]) == (tile[0], 5 * tile[2], tile[1], 5)  # the tile series follows too


def test_gemm_bound_tiles_add_one_gemm_tile_each():
    """load_load, one output tile: each extra K tile adds exactly G = 2*tm*tn*tk / peak (closed form)."""
    spec = study_graph(TOPOLOGIES, "topology.yaml").spec.pe.gemm
    g = 2 * spec.tile_m * spec.tile_n * spec.tile_k / (spec.peak_tflops * 1e3)
    times = [STUDY.point({"series": "tiles", "topology": "topology.yaml", "variant": "load_load", "k_tiles": t},
                         CTX)["composite_ns"] for t in (8, 9, 16)]
    assert times[1] - times[0] == pytest.approx(g, abs=1e-6)
    assert times[2] - times[0] == pytest.approx(8 * g, abs=1e-6)


@pytest.mark.parametrize(("variant", "shape"), [("load_load", (32, 3072, 32)), ("load_ref", (32, 3072, 32)),
                                                  ("ref_ref", (32, 128, 128)), ("load_ref", (8, 128, 128))])
def test_a_point_records_the_independent_model_beside_the_measurement(variant, shape):
    """The point's model fields are the model's prediction from the spec alone, and the model (an independent
    check, not a copy of the simulator) stays inside the report's wide band at these points."""
    m, k, n = shape
    r = _point(variant=variant, m=m, k=k, n=n)
    model = predict(study_graph(TOPOLOGIES, "topology.yaml").spec, m, k, n, variant)
    assert r["model_ns"] == model.total_ns and r["model_bottleneck"] == model.bottleneck
    assert r["model_error"] == pytest.approx((r["model_ns"] - r["composite_ns"]) / r["composite_ns"])
    assert abs(r["model_error"]) <= BAND_WIDE
    assert r["model_efficiency"] == pytest.approx(r["macs"] / (4000.0 * r["model_ns"]))
    assert r["mac_efficiency"] == pytest.approx(r["macs"] / (4000.0 * r["composite_ns"]))
    expected = {"load_load": "GEMM", "load_ref": "DMA_READ", "ref_ref": "DMA_READ"}[variant]
    assert r["model_bottleneck"] == expected
    assert r["busy_gemm_ns"] == pytest.approx(r["tiles"] * r["model_gemm_ns"])  # every tile pays a full GEMM tile
    assert r["compute_bound_efficiency"] >= r["mac_efficiency"] - 1e-9


def test_bad_variant_is_a_study_error():
    with pytest.raises(StudyError, match="variant 'bogus'"):
        _point(variant="bogus", m=32, k=32, n=32)


def test_missing_topology_file_names_the_folder(tmp_path):
    with pytest.raises(StudyError, match="--topologies"):
        STUDY.point({"series": "shapes", "topology": "topology.yaml", "variant": "load_load", "m": 32, "k": 32,
                     "n": 32}, PointContext(tmp_path))


def test_tile_series_shape_comes_from_a_copied_topology(tmp_path):
    shutil.copy(TOPOLOGIES / "topology.yaml", tmp_path / "topology.yaml")
    g = study_graph(tmp_path, "topology.yaml").spec.pe.gemm
    r = STUDY.point({"series": "tiles", "topology": "topology.yaml", "variant": "ref_ref", "k_tiles": 2},
                    PointContext(tmp_path))
    assert (r["m"], r["k"], r["n"], r["tiles"], r["output_tiles"]) == (g.tile_m, 2 * g.tile_k, g.tile_n, 2, 1)
