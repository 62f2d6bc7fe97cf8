"""The gqa study: its grid, KV placement against closed forms, and dispatch cycles per KV tile."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench.studies.base import PointContext, StudyError
from kernbench.studies.figures.gqa import dispatch_per_tile
from kernbench.studies.gqa import STUDY

ROOT = Path(__file__).resolve().parents[3]
CTX = PointContext(ROOT / "topologies")
KV_BYTES = 2 * 4096 * 64 * 2  # K and V, S = 4096 keys, d = 64, float16


def _run(**params):
    return STUDY.point({"topology": "topology.yaml", **params}, CTX)


def test_grid():
    grid = STUDY.grid()
    panels = {}
    for p in grid:
        panels.setdefault(p.labels["panel"], []).append(p.params)
    assert [p["name"] for p in panels["headline"]] == ["prefill_c1", "prefill_c4_ring", "decode_c1_p8",
                                                       "decode_c4_p8"]
    assert {p["partition"] for p in panels["long_context"]} == {"cube_sp_pe_tp", "cube_repl_pe_tp",
                                                                "cube_repl_pe_sp", "cube_sp_pe_sp"}
    assert max(p["keys"] for p in panels["long_context"]) == 128 * 1024
    assert {(p["variant"], p["kv_tiles"]) for p in panels["dispatch"]} == {
        (v, t) for v in ("opt1", "opt2", "opt3") for t in (16, 32)}


@pytest.mark.parametrize(("partition", "per_cube"), [
    ("cube_sp_pe_sp", KV_BYTES // 8),   # the keys split over 8 cubes (and over the PEs inside each)
    ("cube_repl_pe_sp", KV_BYTES),      # every cube holds the whole cache, split over its PEs
])
def test_kv_bytes_per_cube_follow_the_partitioning(partition, per_cube):
    r = _run(panel="long_context", partition=partition, keys=4096)
    assert r["kv_bytes_max_cube"] == per_cube
    assert r["kv_bytes_total"] == 8 * per_cube
    assert r["latency_ns"] > 0 and r["op_gemm"] > 0


def test_dispatch_cycles_per_tile_are_whole_commands():
    """opt2 per KV tile: (cycles at 32 tiles - at 16) / 16, at least the fixed 40 cycles of each extra command."""
    rows = [{"panel": "dispatch", "variant": "opt2", "kv_tiles": t, **_run(panel="dispatch", variant="opt2",
                                                                          kv_tiles=t)} for t in (16, 32)]
    doc = {"points": [{"labels": {"panel": "dispatch"}, "params": {k: r[k] for k in ("panel", "variant",
                                                                                       "kv_tiles")},
                       "values": r} for r in rows]}
    per = dispatch_per_tile(doc)["opt2"]
    commands = (rows[1]["commands"] - rows[0]["commands"]) / 16
    assert per == pytest.approx((rows[1]["dispatch_cycles"] - rows[0]["dispatch_cycles"]) / 16)
    assert 40 * commands <= per <= (40 + 0.0625 * 1024) * commands


def test_unknown_headline_panel():
    with pytest.raises(StudyError, match="unknown headline panel 'nope'"):
        _run(panel="headline", name="nope")
