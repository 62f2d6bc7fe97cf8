"""All-to-all (``all_to_all_single``) across every SIP of the topology with the ``ahbm`` backend (rank = SIP).

Parameters (``-p NAME=VALUE`` or the environment variable):

- ``BYTES`` (``CCL_BYTES``): bytes of f16 values in each rank's input,
  rows of 64 values, so a multiple of 128; default 8192 (64 rows).
- ``SPLITS`` (``CCL_SPLITS``): how each rank divides its rows among the
  ranks (:func:`split_table`): ``even`` (equal shares), ``skewed`` (rank
  ``i`` gives rank ``j`` a share growing with ``(i + j) mod world``, from 1 to
  ``world``) or ``sparse`` (skewed, with some blocks empty: zero-size
  splits). Default ``skewed``.
- ``ALGORITHM`` (``CCL_A2A_ALGORITHM``): the ``all_to_all`` algorithm entry
  of ``ccl.yaml`` (``grid_all_to_all_pairwise`` or
  ``grid_all_to_all_hierarchical`` in the shipped files); empty (the
  default): the one ``ccl.yaml`` chooses.
- ``CUBES`` (``CCL_CUBES``): ``all`` (default) splits each rank's input and
  output row-wise over PE 0 of every cube of its SIP; ``one`` keeps them on
  PE 0 of cube 0.
- ``BUFFER`` (``CCL_BUFFER``): where the IPCQ receive rings live, ``tcm``,
  ``sram`` or ``hbm``; default ``tcm``.

Each rank calls ``all_to_all_single`` once with its split sizes. Reported
metric: ``alltoall_ns``, from the earliest PE start to the latest PE end over
all ranks (:func:`kernbench.ccl.collective_span_ns`). With ``--data`` every
rank's output must equal, bit for bit, the rows every rank sent it in rank
order.
"""

from __future__ import annotations

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param

COLS = 64
PLACEMENTS = {"one": DPPolicy(num_cubes=1, num_pes=1), "all": DPPolicy(cube="row_wise", num_pes=1)}
PATTERNS = ("even", "skewed", "sparse")
PARAMS = (
    Param("BYTES", int, 8192, "bytes of f16 values in each rank's input (a multiple of 128)", lo=128, hi=8 << 20,
          env="CCL_BYTES", unit="B"),
    Param("SPLITS", str, "skewed", "how each rank divides its rows among the ranks", choices=PATTERNS,
          env="CCL_SPLITS"),
    Param("ALGORITHM", str, "", "an all_to_all algorithm entry of ccl.yaml (empty: the one it chooses)",
          env="CCL_A2A_ALGORITHM"),
    Param("CUBES", str, "all", "the cubes each rank's tensors are split over", choices=tuple(PLACEMENTS),
          env="CCL_CUBES"),
    Param("BUFFER", str, "tcm", "memory the IPCQ receive rings live in", choices=("tcm", "sram", "hbm"),
          env="CCL_BUFFER"),
)


def _shares(rows: int, weights: list[int]) -> list[int]:
    """``rows`` divided in proportion to ``weights`` (largest remainders round up; a zero weight gets nothing)."""
    total = sum(weights)
    shares = [rows * w // total for w in weights]
    order = sorted(range(len(weights)), key=lambda k: (-(rows * weights[k] % total), k))
    for k in order[:rows - sum(shares)]:
        shares[k] += 1
    return shares


def split_table(world: int, rows: int, pattern: str) -> np.ndarray:
    """``splits[i, j]``: the rows rank ``i`` sends rank ``j`` when each rank has ``rows`` input rows, for a
    pattern of :data:`PATTERNS`. Every row of the table adds up to ``rows``; ``sparse`` empties the blocks
    with ``(i + 2 j) mod 3 == 1`` (never a rank's own)."""
    if pattern not in PATTERNS:
        raise BenchError(f"SPLITS={pattern!r} is not one of {', '.join(PATTERNS)}")
    table = []
    for i in range(world):
        if pattern == "even":
            weights = [1] * world
        else:
            weights = [1 + (i + j) % world for j in range(world)]
            if pattern == "sparse":
                weights = [0 if j != i and (i + 2 * j) % 3 == 1 else w for j, w in enumerate(weights)]
        table.append(_shares(rows, weights))
    return np.array(table, dtype=np.int64)


def rank_input(rank: int, rows: int) -> np.ndarray:
    """Rank ``rank``'s ``rows x 64`` input: small integers that differ from rank to rank and row to row."""
    return ((np.arange(rows * COLS).reshape(rows, COLS) * 5 + 3 * rank) % 13).astype(np.float16)


def expected(splits: np.ndarray, rows: int) -> list[np.ndarray]:
    """Every rank's output: the rows each rank sent it, in rank order (PyTorch's all_to_all_single)."""
    world = len(splits)
    starts = np.concatenate([np.zeros((world, 1), np.int64), np.cumsum(splits, axis=1)], axis=1)
    return [np.concatenate([rank_input(i, rows)[starts[i, j]:starts[i, j + 1]] for i in range(world)])
            for j in range(world)]


def all_to_all_sips(torch, nbytes: int, pattern: str, kind: str = "tcm", algorithm: str = "", cubes: str = "all"
                    ) -> tuple[float, np.ndarray, dict[int, np.ndarray]]:
    """Spawn one rank per SIP and run one ``all_to_all_single`` of ``nbytes`` per rank split by ``pattern``;
    returns ``(span_ns, splits, rank -> output)`` (outputs only in data mode)."""
    if nbytes % (2 * COLS):
        raise BenchError(f"BYTES={nbytes} must be a multiple of {2 * COLS} (rows of {COLS} f16 values)")
    world, rows = torch.spec.system.sips.count, nbytes // (2 * COLS)
    splits = split_table(world, rows, pattern)
    placement = PLACEMENTS[cubes]
    least = torch.spec.cubes_per_sip if cubes == "all" else 1
    fewest = int(min(rows, splits.sum(axis=0).min()))
    if fewest < least:
        raise BenchError(f"BYTES={nbytes} with SPLITS={pattern} leaves a rank {fewest} row(s) of input or output; "
                         f"CUBES={cubes} needs at least {least} (one per cube): raise BYTES")
    outputs: dict[int, np.ndarray] = {}

    def worker(rank: int) -> None:
        d = torch.distributed
        d.init_process_group(backend="ahbm", buffer_kind=kind,
                             algorithms={"all_to_all": algorithm} if algorithm else None)
        out = torch.empty((int(splits[:, rank].sum()), COLS), "float16", placement)
        d.all_to_all_single(out, torch.from_numpy(rank_input(rank, rows), placement), splits[:, rank].tolist(),
                            splits[rank].tolist())
        if torch.data:
            outputs[rank] = torch.peek(out)

    torch.multiprocessing.spawn(worker, nprocs=world)
    span = collective_span_ns([res for _, res in torch.distributed.collective_results["all_to_all"]])
    return span, splits, outputs


@bench(name="all-to-all", description="all_to_all_single over every SIP with uneven splits (ahbm backend)",
       params=PARAMS)
def all_to_all(torch, p):
    """Exchange BYTES per rank split by SPLITS between every pair of ranks; verify bit for bit in data mode."""
    span, splits, outputs = all_to_all_sips(torch, p.BYTES, p.SPLITS, p.BUFFER, p.ALGORITHM, p.CUBES)
    torch.report_metric("alltoall_ns", span)
    want = expected(splits, p.BYTES // (2 * COLS))
    for rank, got in outputs.items():
        if got.tobytes() != want[rank].tobytes():
            raise BenchError(f"all-to-all: rank {rank} does not hold the rows every rank sent it, in rank order")
