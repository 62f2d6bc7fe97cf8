"""All-gather and reduce-scatter across every SIP of the topology with the ``ahbm`` backend (rank = SIP).

Two benches share the parameters (``-p NAME=VALUE`` or the environment
variable): ``BYTES`` (``CCL_BYTES``, bytes of f16 values in each rank's
block, default 4096, a multiple of 128) and ``BUFFER`` (``CCL_BUFFER``,
where the IPCQ receive rings live: ``tcm``, ``sram`` or ``hbm``; default
``tcm``). A block is ``[BYTES / 128, 64]`` f16 on PE 0 of cube 0 of each rank.

- ``all-gather``: ``all_gather_into_tensor`` of every rank's block into a
  ``world_size``-block output; metric ``allgather_ns``. With ``--data`` every
  rank's output must equal the blocks in rank order, bit for bit.
- ``reduce-scatter``: ``reduce_scatter_tensor`` of a ``world_size``-block
  input per rank; metric ``reducescatter_ns``. With ``--data`` (small
  integers, so any add order is exact) rank ``r`` must hold the sum of
  block ``r`` over all ranks.

Both metrics run from the earliest PE start to the latest PE end over all
ranks (:func:`kernbench.ccl.collective_span_ns`). The algorithms are the
ones ``ccl.yaml`` names under ``collectives.all_gather`` and
``collectives.reduce_scatter``.
"""

from __future__ import annotations

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param

ONE = DPPolicy(num_cubes=1, num_pes=1)  # one 2-D shard on PE 0 of cube 0
COLS = 64
PARAMS = (
    Param("BYTES", int, 4096, "bytes of f16 values in each rank's block (a multiple of 128)", lo=128,
          hi=128 << 10, env="CCL_BYTES", unit="B"),
    Param("BUFFER", str, "tcm", "memory the IPCQ receive rings live in", choices=("tcm", "sram", "hbm"),
          env="CCL_BUFFER"),
)


def block(rank: int, rows: int, world: int = 1) -> np.ndarray:
    """Rank ``rank``'s ``world`` blocks of ``rows x 64`` small integers (f16 sums of them are exact)."""
    return ((np.arange(world * rows * COLS).reshape(world * rows, COLS) * 3 + 7 * rank) % 11).astype(np.float16)


def _rows(nbytes: int) -> int:
    if nbytes % (2 * COLS):
        raise BenchError(f"BYTES={nbytes} must be a multiple of {2 * COLS} (rows of {COLS} f16 values)")
    return nbytes // (2 * COLS)


def gather_or_scatter(torch, collective: str, nbytes: int, kind: str) -> tuple[float, dict[int, np.ndarray]]:
    """Spawn one rank per SIP and run ``collective`` (``all_gather`` or ``reduce_scatter``) once on blocks of
    ``nbytes``; returns ``(span_ns, rank -> output)`` (outputs only in data mode)."""
    world, rows = torch.spec.system.sips.count, _rows(nbytes)
    outputs: dict[int, np.ndarray] = {}

    def worker(rank: int) -> None:
        d = torch.distributed
        d.init_process_group(backend="ahbm", buffer_kind=kind)
        if collective == "all_gather":
            out = torch.empty((world * rows, COLS), "float16", ONE)
            d.all_gather_into_tensor(out, torch.from_numpy(block(rank, rows), ONE))
        else:
            out = torch.empty((rows, COLS), "float16", ONE)
            d.reduce_scatter_tensor(out, torch.from_numpy(block(rank, rows, world), ONE))
        if torch.data:
            outputs[rank] = torch.peek(out)

    torch.multiprocessing.spawn(worker, nprocs=world)
    span = collective_span_ns([res for _, res in torch.distributed.collective_results[collective]])
    return span, outputs


@bench(name="all-gather", description="all_gather_into_tensor over every SIP with the ahbm backend", params=PARAMS)
def all_gather(torch, p):
    """Gather a block of BYTES from every rank on every rank; verify bit for bit in data mode."""
    world, rows = torch.spec.system.sips.count, _rows(p.BYTES)
    span, outputs = gather_or_scatter(torch, "all_gather", p.BYTES, p.BUFFER)
    torch.report_metric("allgather_ns", span)
    want = np.concatenate([block(r, rows) for r in range(world)])
    for rank, got in outputs.items():
        if got.tobytes() != want.tobytes():
            raise BenchError(f"all-gather: rank {rank} does not hold every rank's block in rank order")


@bench(name="reduce-scatter", description="reduce_scatter_tensor over every SIP with the ahbm backend",
       params=PARAMS)
def reduce_scatter(torch, p):
    """Sum world blocks of BYTES over the ranks, block r to rank r; verify the exact sums in data mode."""
    world, rows = torch.spec.system.sips.count, _rows(p.BYTES)
    span, outputs = gather_or_scatter(torch, "reduce_scatter", p.BYTES, p.BUFFER)
    torch.report_metric("reducescatter_ns", span)
    total = sum(block(r, rows, world).astype(np.float64) for r in range(world))
    for rank, got in outputs.items():
        if not (got.astype(np.float64) == total[rank * rows:(rank + 1) * rows]).all():
            raise BenchError(f"reduce-scatter: rank {rank} does not hold the exact sum of block {rank}")
