"""All-reduce across every SIP of the topology with the ``ahbm`` backend (rank = SIP).

Parameters (``-p NAME=VALUE`` or the environment variable): ``BYTES`` (``CCL_BYTES``, bytes per
PE, default 65536; f16 values, so a multiple of 2), ``BUFFER`` (``CCL_BUFFER``, where IPCQ receive
rings live: ``tcm``, ``sram`` or ``hbm``; default ``tcm``), ``ALGORITHM`` (``CCL_ALGORITHM``, an
algorithm entry of ``ccl.yaml``; default: its ``defaults.algorithm``).
Each rank holds a ``[cubes, n]`` f16 tensor split row-wise over its SIP's cubes (PE 0 of
each); after the all-reduce every shard holds the sum over all shards of all ranks. With
``--data`` the bench checks that sum exactly (small integers). Reported metric:
``allreduce_ns``, from the earliest PE start to the latest PE end over all ranks.
"""

from __future__ import annotations

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param

SHARDS = DPPolicy(cube="row_wise", num_pes=1)


def rank_values(rank: int, cubes: int, n: int) -> np.ndarray:
    """Rank ``rank``'s input: small integers, so f16 sums are exact."""
    return ((np.arange(cubes * n).reshape(cubes, n) + 3 * rank) % 5).astype(np.float16)


PARAMS = (
    Param("BYTES", int, 65536, "bytes of f16 values per PE (even)", lo=2, hi=4 << 20, env="CCL_BYTES", unit="B"),
    Param("BUFFER", str, "tcm", "memory the IPCQ receive rings live in", choices=("tcm", "sram", "hbm"),
          env="CCL_BUFFER"),
    Param("ALGORITHM", str, "", "an algorithm entry of ccl.yaml (empty: its defaults.algorithm)",
          env="CCL_ALGORITHM"),
)


def all_reduce_sips(torch, nbytes: int, kind: str, algorithm: str | None = None, *,
                    values: bool = True) -> tuple[float, dict[int, np.ndarray]]:
    """Spawn one rank per SIP; each all-reduces a ``[cubes, nbytes / 2]`` f16 tensor split row-wise over its
    SIP's cubes (PE 0 of each), its IPCQ receive rings in ``kind`` memory. ``values`` True fills the inputs with
    :func:`rank_values` (and, in data mode, returns what every rank holds afterwards); False leaves them
    uninitialised (timing only, nothing copied in). Returns ``(allreduce_ns, outputs)``: the earliest PE start
    to the latest PE end over all ranks, and ``rank -> result`` (empty unless ``values`` and data mode). The
    bench and the all-reduce study both measure through this function."""
    spec = torch.spec
    world, cubes, n = spec.system.sips.count, spec.cubes_per_sip, nbytes // 2
    outputs: dict[int, np.ndarray] = {}

    def worker(rank: int) -> None:
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group(backend="ahbm", buffer_kind=kind, algorithm=algorithm)
        if values:
            t = torch.from_numpy(rank_values(rank, cubes, n), SHARDS)
        else:
            t = torch.empty((cubes, n), "float16", SHARDS)
        torch.distributed.all_reduce(t)
        if values and torch.data:
            outputs[rank] = torch.peek(t)

    torch.multiprocessing.spawn(worker, nprocs=world)
    return collective_span_ns([res for _, res in torch.distributed.results]), outputs


@bench(name="ccl-allreduce", description="all-reduce over every SIP with the ahbm backend", params=PARAMS)
def run(torch, p):
    """Spawn one rank per SIP, all-reduce a tensor of BYTES per PE, verify in data mode."""
    nbytes = p.BYTES
    if nbytes % 2:
        raise BenchError(f"BYTES={nbytes} must be even (f16 values)")
    spec = torch.spec
    world, cubes, n = spec.system.sips.count, spec.cubes_per_sip, nbytes // 2
    measured, outputs = all_reduce_sips(torch, nbytes, p.BUFFER, p.ALGORITHM or None)
    torch.report_metric("allreduce_ns", measured)
    if torch.data:
        total = sum(rank_values(r, cubes, n).astype(np.float64).sum(axis=0) for r in range(world))
        for rank, got in outputs.items():
            if not (got.astype(np.float64) == total).all():
                raise BenchError(f"ccl-allreduce: rank {rank} does not hold the exact sum")
