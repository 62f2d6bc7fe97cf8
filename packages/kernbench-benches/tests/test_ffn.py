"""The SwiGLU FFN layer: exact against numpy, its reduction tree, its limits and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.layers.ffn import FfnConfigError, swiglu_ffn, swiglu_reference
from kernbench.runtime import session


def _weights(m: int, h: int, f: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, h)) * 0.5).astype(np.float16)
    wg, wu = ((rng.standard_normal((h, f)) * 0.1).astype(np.float16) for _ in range(2))
    wd = (rng.standard_normal((f, h)) * 0.1).astype(np.float16)
    return x, wg, wu, wd


def _sends(torch) -> list[tuple[str, str]]:
    return [(r.component_id.rsplit(".", 1)[0], r.params["peer"].rsplit(".", 1)[0]) for r in torch.oplog.records
            if r.op_name == "ipcq_send"]


def _tree(pes: int, cubes: int, cube_w: int = 4, grid_cols: int = 4) -> set[tuple[str, str]]:
    """The sends of the reduction, worked out by hand: along each PE row to column 0, up column 0 to PE 0, then
    along each cube row to cube column 0 and up to cube 0 (each rank's sends are one hop towards its root)."""
    sends = set()
    for c in range(cubes):
        for p in range(pes):
            row, col = divmod(p, grid_cols)
            if col > 0:
                sends.add((f"sip0.cube{c}.pe{p}", f"sip0.cube{c}.pe{p - 1}"))
            elif row > 0:
                sends.add((f"sip0.cube{c}.pe{p}", f"sip0.cube{c}.pe{p - grid_cols}"))
        cy, cx = divmod(c, cube_w)
        if cx > 0:
            sends.add((f"sip0.cube{c}.pe0", f"sip0.cube{c - 1}.pe0"))
        elif cy > 0:
            sends.add((f"sip0.cube{c}.pe0", f"sip0.cube{c - cube_w}.pe0"))
    return sends


@pytest.mark.parametrize(("pes", "cubes"), [(1, 1), (2, 1), (3, 1), (4, 1), (8, 1), (1, 4), (8, 2), (2, 8)])
def test_matches_numpy_and_sums_along_the_planned_tree(pes, cubes):
    x, wg, wu, wd = _weights(16, 64, 384)
    with session(data=True) as torch:
        r = swiglu_ffn(torch, x, wg, wu, wd, pes=pes, cubes=cubes)
        sends = _sends(torch)
    np.testing.assert_allclose(r.out, swiglu_reference(x, wg, wu, wd), rtol=1e-4, atol=1e-5)
    assert len(sends) == pes * cubes - 1
    assert set(sends) == _tree(pes, cubes)
    assert r.latency_ns > 0 and len(r.launch.reports) == pes * cubes


def test_timing_mode_costs_the_same_and_splitting_a_wide_layer_helps():
    x, wg, wu, wd = _weights(32, 128, 1024)
    runs = {}
    for data in (False, True):
        with session(data=data) as torch:
            runs[data] = [swiglu_ffn(torch, x, wg, wu, wd, pes=p, cubes=1) for p in (1, 8)]
    assert runs[False][0].out is None and runs[True][0].out is not None
    assert [r.latency_ns for r in runs[False]] == [r.latency_ns for r in runs[True]]
    one, eight = runs[False]
    assert eight.latency_ns < one.latency_ns


def test_every_rank_gets_the_whole_output_and_the_group_keeps_its_links():
    x, wg, wu, wd = _weights(16, 64, 256, seed=3)
    want = swiglu_reference(x, wg, wu, wd)
    with session(data=True) as torch:
        outs, before, after = {}, {}, {}

        def worker(rank: int) -> None:
            torch.distributed.init_process_group(backend="ahbm")
            ipcq = torch.engine.components[f"sip{rank}.cube0.pe0.pe_ipcq"]
            before[rank] = dict(ipcq.links)
            outs[rank] = swiglu_ffn(torch, x, wg, wu, wd, pes=4, cubes=2).out
            after[rank] = dict(ipcq.links)

        torch.multiprocessing.spawn(worker, nprocs=torch.spec.system.sips.count)
    assert sorted(outs) == [0, 1]
    for out in outs.values():
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    assert before == after and all("intra_E" not in links for links in after.values())


def test_the_partial_output_must_fit_one_ipcq_slot():
    """M x H float32 partials: exactly one 128 KiB slot runs, one more row is refused before anything runs."""
    h = 1024
    x, wg, wu, wd = _weights(32, h, 64)
    with session(data=False) as torch:
        swiglu_ffn(torch, x, wg, wu, wd, pes=2)
        x33 = np.zeros((33, h), np.float16)
        with pytest.raises(FfnConfigError, match=r"33 x 1024 float32 values \(135168 B\) does not fit one PE_IPCQ "
                                                 r"slot \(131072 B\)"):
            swiglu_ffn(torch, x33, wg, wu, wd, pes=2)


@pytest.mark.parametrize(("kw", "match"), [
    ({"pes": 6}, r"pes = 6: use at most 4 or a multiple of 4"),
    ({"pes": 9}, r"pes = 9; use 1 to 8"),
    ({"cubes": 6}, r"cubes = 6: use at most 4 or a multiple of 4"),
    ({"pes": 8, "cubes": 8, "f": 96}, r"F = 96 does not split into 64 equal blocks"),
    ({"f": 96, "down": 64}, r"shapes do not chain"),
])
def test_bad_shapes_and_placements_are_one_line_errors(kw, match):
    f = kw.pop("f", 256)
    down = kw.pop("down", f)
    x, wg, wu, _ = _weights(8, 64, f)
    wd = np.zeros((down, 64), np.float16)
    with session(data=False) as torch:
        with pytest.raises(FfnConfigError, match=match):
            swiglu_ffn(torch, x, wg, wu, wd, **kw)
        assert not torch.oplog.records  # refused before anything was deployed or launched
