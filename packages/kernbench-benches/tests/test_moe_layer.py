"""The MoE layer on the simulator: exact against numpy for every placement, and its steps as planned."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401  (torch.distributed)
from kernbench.benches.moe import Preset, expected, layer_weights, rank_tokens
from kernbench.layers.moe import MoeConfig, MoeLayer, MoePlacementError, MoeRoutingError, place_experts
from kernbench.runtime import session
from kernbench.topology import compile_spec, spec_from_dict

SMALL = Preset(24, 64, 128, 8, 2, False)
SHARED = Preset(24, 64, 128, 8, 2, True)


def _run(preset: Preset, config: MoeConfig, ranks: int | None = None, data: bool = True):
    """Run the layer on every SIP (``ranks`` None) or on SIP 0 alone; returns rank -> result and the oplog."""
    weights = layer_weights(preset, 3)
    layer = MoeLayer(weights, config)
    results = {}
    with session(data=data) as torch:
        if ranks == 1:
            results[0] = layer(torch, rank_tokens(preset, 0, 3))
        else:
            def worker(rank: int) -> None:
                torch.distributed.init_process_group(backend="ahbm")
                results[rank] = layer(torch, rank_tokens(preset, rank, 3))

            torch.multiprocessing.spawn(worker, nprocs=torch.spec.system.sips.count)
        records = list(torch.oplog.records)
    return weights, results, records


def _check_numerics(preset, weights, results):
    for rank, r in results.items():
        want = expected(weights, rank_tokens(preset, rank, 3), r.routing)
        np.testing.assert_allclose(r.out, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
        assert np.abs(want).max() > 0.05  # a layer that outputs zeros cannot pass


@pytest.mark.parametrize(("preset", "config", "ranks"), [
    (SMALL, MoeConfig(k=2, pes=8), 1),                        # one expert per PE
    (SMALL, MoeConfig(k=2, pes=4), 1),                        # two experts per PE
    (SMALL, MoeConfig(k=2, pes=8, cubes=2), 1),               # each expert over two PEs (tensor parallel)
    (SHARED, MoeConfig(k=2, pes=4, capacity_factor=0.75), 1),  # shared expert, drops
    (SMALL, MoeConfig(k=2, pes=8), None),                     # expert parallel over the SIPs
    (SMALL, MoeConfig(k=3, pes=2, distribution="zipf", skew=1.5), None),
    (SHARED, MoeConfig(k=2, pes=8, cubes=2, capacity_factor=1.0), None),
], ids=["one-per-pe", "two-per-pe", "tp2", "shared-capacity", "ep", "zipf-k3", "ep-shared-tp"])
def test_the_layer_matches_numpy(preset, config, ranks):
    weights, results, _ = _run(preset, config, ranks)
    _check_numerics(preset, weights, results)
    for r in results.values():
        assert r.latency_ns == pytest.approx(sum(r.phases.values()))
        assert all(v > 0 for k, v in r.phases.items() if ranks != 1 or k in ("router", "experts", "combine"))
        if ranks == 1:
            assert r.phases["dispatch"] == r.phases["permute"] == r.phases["combine_exchange"] == 0


def test_capacity_drops_are_counted_and_add_nothing():
    _, results, _ = _run(SMALL, MoeConfig(k=2, pes=8, capacity_factor=0.5), 1)
    r = results[0].routing
    cap = -(-SMALL.tokens * 2 // 2 // 8)  # ceil(0.5 * 24 * 2 / 8) = 3
    assert r.capacity == cap and r.counts.max() == cap
    assert r.dropped == SMALL.tokens * 2 - int(r.counts.sum()) > 0


def test_a_rank_that_receives_no_token_still_gives_the_right_answer():
    # a Zipf skew of 8 sends almost every token to expert 0, held by rank 0: rank 1's experts get nothing
    preset = Preset(4, 64, 128, 8, 2, False)
    weights, results, _ = _run(preset, MoeConfig(k=2, pes=8, distribution="zipf", skew=8.0))
    got = {rank: int(r.plan.send_counts[1]) for rank, r in results.items()}
    assert got == {0: 0, 1: 0}
    _check_numerics(preset, weights, results)


def test_a_tensor_parallel_expert_sums_its_partials_over_the_ipcq():
    # 8 experts on 16 PEs: each expert on 2 PEs of one row; every expert with rows sends one partial per chunk
    _, results, records = _run(SMALL, MoeConfig(k=2, pes=8, cubes=2), 1)
    busy = int(np.count_nonzero(results[0].routing.counts))
    sends = [r for r in records if r.op_name == "ipcq_copy"]
    assert busy == 8 and len(sends) == 8  # one chunk per expert: the second PE of each pair sends once


def test_the_expert_kernel_issues_one_gather_dma_per_run_of_rows():
    _, results, records = _run(SMALL, MoeConfig(k=2, pes=8), 1)
    plan = results[0].plan
    starts = np.concatenate([[0], np.cumsum(plan.rows_per_expert)])
    runs = 0
    for e in range(8):
        tokens = plan.token_of_row[starts[e]:starts[e + 1]]
        runs += 1 + int(np.count_nonzero(np.diff(tokens) != 1)) if tokens.size else 0
    x_bytes = SMALL.tokens * SMALL.hidden * 2
    first_write = next(r for r in records if r.op_name == "hbm_write")
    assert (first_write.params["addr"], first_write.params["nbytes"]) == (0, x_bytes)  # x: the first tensor, PA 0
    reads_of_x = [r for r in records if r.op_name == "dma_read" and r.params["src"] < x_bytes]
    # every run of consecutive tokens of an expert is one DMA, plus the router's one load of the whole of x
    assert len(reads_of_x) == runs + 1
    assert sum(r.params["nbytes"] for r in reads_of_x) == x_bytes * (1 + 2)  # each token read by its k = 2 experts


def test_placement_rules():
    spec = compile_spec(spec_from_dict({})).spec
    assert place_experts(spec, 8, 1, shared=False, cubes=1, pes=8).per_slot == 1
    p = place_experts(spec, 8, 1, shared=True, cubes=1, pes=4)  # 9 experts on 4 PEs: 3, 2, 2, 2
    assert (p.tp, p.per_slot) == (1, 3)
    assert [len(p.jobs_of(s)) for s in range(4)] == [3, 2, 2, 2]
    p = place_experts(spec, 8, 2, shared=True, cubes=2, pes=8)  # 5 experts on 16 PEs: 2 PEs each, 6 idle
    assert p.tp == 2 and [p.jobs_of(s) for s in (0, 1, 9, 10)] == [[(0, 0)], [(0, 1)], [(4, 1)], []]
    assert place_experts(spec, 2, 1, shared=False, cubes=1, pes=8).tp == 4
    with pytest.raises(MoePlacementError, match="8 experts do not divide over 3 rank"):
        place_experts(spec, 8, 3, shared=False, cubes=1, pes=8)
    with pytest.raises(MoePlacementError, match="pes = 9; use 1 to 8"):
        place_experts(spec, 8, 1, shared=False, cubes=1, pes=9)


def test_bad_shapes_are_refused_in_one_line():
    weights = layer_weights(SMALL, 0)
    layer = MoeLayer(weights, MoeConfig(k=2))
    with session(data=False) as torch, pytest.raises(MoeRoutingError,
                                                     match=r"x has shape \(4, 32\); pass \[tokens, H\] with H = 64"):
        layer(torch, np.zeros((4, 32), np.float16))


def test_timing_mode_gives_the_data_mode_times():
    _, timed, _ = _run(SMALL, MoeConfig(k=2, pes=8), None, data=False)
    _, data, _ = _run(SMALL, MoeConfig(k=2, pes=8), None, data=True)
    assert {r: v.phases for r, v in timed.items()} == {r: v.phases for r, v in data.items()}
