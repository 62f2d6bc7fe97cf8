"""The decoder block of the MoE study: its parts are the layers' own times, composed as documented."""

from __future__ import annotations

import pytest

import kernbench.ccl  # noqa: F401  (torch.distributed)
from kernbench.layers.attention import gqa_prefill
from kernbench.layers.ffn import swiglu_ffn
from kernbench.layers.moe import MoeConfig, MoeLayer
from kernbench.runtime import session
from kernbench.studies.base import StudyError
from kernbench.studies.decoder import BLOCK, _inputs, run_block


def _alone(rank: int):
    """Rank ``rank``'s attention and dense FFN of the expert placement, each run alone on its SIP."""
    q, k, v, dense, _, tokens = _inputs(BLOCK, 2)
    with session() as torch:
        torch.ahbm.set_device(rank)
        a = gqa_prefill(torch, q[rank:rank + 1], k[rank:rank + 1], v[rank:rank + 1], mode="short", pes=8)
        f = swiglu_ffn(torch, tokens[rank], *dense, pes=8, cubes=2)
    return a.latency_ns, f.latency_ns


def test_the_expert_placement_is_each_ranks_attention_and_ffn_as_they_run_alone():
    with session() as torch:
        times = run_block(torch, "expert", "dense")
    alone = [_alone(r) for r in range(2)]
    assert times.attention_ns == pytest.approx(max(a for a, _ in alone), rel=1e-12)
    assert times.ffn_ns == pytest.approx(max(f for _, f in alone), rel=1e-12)
    assert times.handoff_ns == 0
    assert times.block_ns == times.attention_ns + times.ffn_ns


def test_the_moe_part_is_the_moe_layer_over_the_ranks():
    _, _, _, _, weights, tokens = _inputs(BLOCK, 2)
    layer = MoeLayer(weights, MoeConfig(k=BLOCK.topk, cubes=1, pes=8))
    alone = {}
    with session() as torch:
        def worker(rank: int) -> None:
            torch.distributed.init_process_group(backend="ahbm")
            alone[rank] = layer(torch, tokens[rank]).latency_ns

        torch.multiprocessing.spawn(worker, nprocs=2)
    with session() as torch:
        times = run_block(torch, "sequence", "moe")
    assert times.ffn_ns == pytest.approx(max(alone.values()), rel=1e-9)


def test_the_tensor_placement_gathers_the_attention_outputs_and_all_reduces_the_ffn():
    with session() as torch:
        times = run_block(torch, "tensor", "dense")
        gathers = torch.distributed.collective_results["all_gather"]
        reduces = torch.distributed.collective_results["all_reduce"]
    assert len(gathers) == 2 and len(reduces) == 2 and times.handoff_ns > 0
    assert times.block_ns == pytest.approx(times.attention_ns + times.handoff_ns + times.ffn_ns)


def test_unknown_placements_are_refused():
    with session() as torch, pytest.raises(StudyError, match="placement 'pipeline'"):
        run_block(torch, "pipeline", "dense")
