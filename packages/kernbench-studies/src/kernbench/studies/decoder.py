"""A decoder block's placement: attention, then a dense FFN or a MoE layer, over the SIPs of a topology.

The block is the earlier report's open question (where should each layer's compute and state live?) asked of
the layers this project has: the attention core of :mod:`kernbench.layers.attention` (no QKV or output
projection), the SwiGLU FFN of :mod:`kernbench.layers.ffn` and the MoE layer of :mod:`kernbench.layers.moe`.
Every SIP is a rank; the workload is :data:`BLOCK`: one prefill sequence per rank. Three placements:

* ``tensor``: attention split by KV head over the ranks (rank ``r`` attends every sequence with KV heads
  ``r Hkv/W ..``, ``short`` mode over its cubes), then an ``all_gather_into_tensor`` of the attention outputs
  (each rank's ``[B S, H / W]`` columns, as a block of rows: the bytes are what matter), then the dense FFN split
  by width over the ranks with its all-reduce, or the MoE layer with each rank routing its own sequence;
* ``expert``: each rank attends its own sequence (``short`` mode, data parallel), then the dense FFN whole on
  each rank for its own tokens, or the MoE layer expert-parallel over the ranks;
* ``sequence``: as ``expert``, but each rank's attention is sequence parallel over its cubes (``ring`` mode: the
  key blocks rotate round the cubes).

Each part is timed as its own layer reports it (first PE start to last PE end, the largest over the ranks; a
collective from its earliest PE start to its latest PE end) and the block's time is their sum; moving a layer's
output into the next layer's layout is not simulated beyond the all-gather of ``tensor``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.layers.attention import gqa_prefill
from kernbench.layers.ffn import swiglu_ffn
from kernbench.layers.moe import MoeConfig, MoeLayer, MoeWeights
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.studies.base import StudyError

PLACEMENTS = ("tensor", "expert", "sequence")
FFN_KINDS = ("dense", "moe")


@dataclass(frozen=True)
class Block:
    """The block's shape: tokens per sequence (one sequence per rank), query and KV heads, head width, dense FFN
    width, MoE experts, their width and top-k. The model width is ``hq * d``."""

    seq: int = 64
    hq: int = 4
    hkv: int = 2
    d: int = 64
    ffn: int = 1024
    experts: int = 16
    expert_ffn: int = 256
    topk: int = 2

    @property
    def hidden(self) -> int:
        """Model width H."""
        return self.hq * self.d


BLOCK = Block()


@dataclass(frozen=True)
class BlockTimes:
    """One block run: ``attention_ns``, ``handoff_ns`` (the all-gather of ``tensor``; 0 otherwise), ``ffn_ns``
    (the FFN or MoE layer, its all-reduce included) and ``block_ns``, their sum."""

    attention_ns: float
    handoff_ns: float
    ffn_ns: float

    @property
    def block_ns(self) -> float:
        """The block's time, ns."""
        return self.attention_ns + self.handoff_ns + self.ffn_ns


def _inputs(block: Block, world: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape_q = (world, block.hq, block.seq, block.d)
    shape_kv = (world, block.hkv, block.seq, block.d)
    q, k, v = ((rng.standard_normal(s) * 0.5).astype(np.float16) for s in (shape_q, shape_kv, shape_kv))
    h, f = block.hidden, block.ffn
    wg, wu = ((rng.standard_normal((h, f)) / np.sqrt(h)).astype(np.float16) for _ in range(2))
    wd = (rng.standard_normal((f, h)) / np.sqrt(f)).astype(np.float16)
    e, fe = block.experts, block.expert_ffn
    moe = MoeWeights((rng.standard_normal((h, e)) / np.sqrt(h)).astype(np.float16),
                     (rng.standard_normal((e, h, fe)) / np.sqrt(h)).astype(np.float16),
                     (rng.standard_normal((e, h, fe)) / np.sqrt(h)).astype(np.float16),
                     (rng.standard_normal((e, fe, h)) / np.sqrt(fe)).astype(np.float16))
    tokens = [(rng.standard_normal((block.seq, h)) * 0.5).astype(np.float16) for _ in range(world)]
    return q, k, v, (wg, wu, wd), moe, tokens


def run_block(torch: RuntimeContext, placement: str, ffn_kind: str, block: Block = BLOCK) -> BlockTimes:
    """Run the block once over every SIP of ``torch``'s topology (timing as the layers report it)."""
    if placement not in PLACEMENTS or ffn_kind not in FFN_KINDS:
        raise StudyError(f"run_block: placement {placement!r} / ffn {ffn_kind!r}; use one of {PLACEMENTS} / "
                         f"{FFN_KINDS}")
    world = torch.spec.system.sips.count
    if block.hkv % world and placement == "tensor":
        raise StudyError(f"run_block: {block.hkv} KV heads do not split over {world} ranks")
    q, k, v, dense, moe_weights, tokens = _inputs(block, world)
    layer = MoeLayer(moe_weights, MoeConfig(k=block.topk, cubes=1, pes=8))
    attention: dict[int, float] = {}
    ffn: dict[int, float] = {}
    dist = torch.distributed
    grouped = placement == "tensor" or ffn_kind == "moe"

    def worker(rank: int) -> None:
        torch.ahbm.set_device(rank)
        if placement == "tensor":
            dist.init_process_group(backend="ahbm")
            per = block.hkv // world
            g = block.hq // block.hkv
            heads, qheads = slice(rank * per, (rank + 1) * per), slice(rank * per * g, (rank + 1) * per * g)
            res = gqa_prefill(torch, q[:, qheads], k[:, heads], v[:, heads], mode="short", pes=8)
            cols = block.hidden // world
            mine = torch.empty((world * block.seq, cols), "float16", DPPolicy(num_cubes=1, num_pes=1))
            gathered = torch.empty((world * world * block.seq, cols), "float16", DPPolicy(num_cubes=1, num_pes=1))
            dist.all_gather_into_tensor(gathered, mine)
            torch.free(mine)
            torch.free(gathered)
        else:
            mode = "short" if placement == "expert" else "ring"
            res = gqa_prefill(torch, q[rank:rank + 1], k[rank:rank + 1], v[rank:rank + 1], mode=mode, pes=8)
            if grouped:  # after the attention: the ring's cube links would clash with the group's
                dist.init_process_group(backend="ahbm")
        attention[rank] = res.latency_ns
        if ffn_kind == "moe":
            ffn[rank] = layer(torch, tokens[rank]).latency_ns
        elif placement == "tensor":
            x = np.concatenate(tokens)
            ffn[rank] = swiglu_ffn(torch, x, *dense, pes=8, cubes=2).latency_ns
        else:
            ffn[rank] = swiglu_ffn(torch, tokens[rank], *dense, pes=8, cubes=2).latency_ns

    torch.multiprocessing.spawn(worker, nprocs=world)
    results = torch.distributed.collective_results if grouped else {}
    handoff = collective_span_ns([r for _, r in results.get("all_gather", [])]) if placement == "tensor" else 0.0
    allreduce = (collective_span_ns([r for _, r in results.get("all_reduce", [])])
                 if placement == "tensor" and ffn_kind == "dense" else 0.0)
    return BlockTimes(max(attention.values()), handoff, max(ffn.values()) + allreduce)
