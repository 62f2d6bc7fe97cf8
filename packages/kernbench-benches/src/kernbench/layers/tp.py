"""Megatron-style tensor parallelism over ranks (one SIP each): column- and row-parallel linear layers.

A two-layer MLP ``Z = act(X W1) W2`` splits across ``n`` ranks without
communication inside: the column-parallel layer holds ``W1[:, cols of the
rank]`` and produces the rank's slice of the hidden activations; the
row-parallel layer holds the matching ``W2[rows of the rank, :]``, so each
rank's product is a partial ``Z`` and one all-reduce sums them. Inside a
rank the layer runs on PE 0 of the SIP's first cube (``TP_POLICY``) as one
composite GEMM. (The all-reduce sums every cube shard of a tensor as a
partial result, so a partial ``Z`` split by rows over several cubes would
be summed across its own rows; keeping it on one cube makes the reduction
run across ranks only.)
"""

from __future__ import annotations

import numpy as np

from kernbench.runtime import DPPolicy, RuntimeContext, Tensor
from kernbench.topology.errors import KernbenchError

#: Where a rank keeps the layer's tokens, weight shard and outputs: PE 0 of its first cube.
TP_POLICY = DPPolicy(num_cubes=1, num_pes=1)
ACTIVATIONS = ("relu", "sigmoid", None)


class TensorParallelError(KernbenchError):
    """A tensor-parallel layer was built with a shape that does not split over the ranks."""


def _linear_kernel(activation: str | None):
    epilogue = [{"op": activation}] if activation else []

    def kernel(tl, x, w, y) -> None:
        tl.wait(tl.composite(x, w, y, epilogue=epilogue))

    return kernel


def _rank_and_world(torch: RuntimeContext) -> tuple[int, int]:
    dist = torch.distributed
    return dist.get_rank(), dist.get_world_size()


def _split(n: int, world: int, what: str) -> int:
    if n % world:
        raise TensorParallelError(f"{what} = {n} does not split over {world} ranks; use a multiple of {world}")
    return n // world


class ColumnParallelLinear:
    """``Y_r = act(X W[:, block r])``: this rank's column block of a ``[K, N]`` weight; no communication."""

    def __init__(self, torch: RuntimeContext, weight: np.ndarray, activation: str | None = None) -> None:
        if activation not in ACTIVATIONS:
            raise TensorParallelError(f"activation {activation!r} is not one of {ACTIVATIONS}")
        rank, world = _rank_and_world(torch)
        cols = _split(weight.shape[1], world, "the column-parallel output features")
        self.torch = torch
        self.activation = activation
        self.out_features = cols
        self.weight = torch.from_numpy(np.ascontiguousarray(weight[:, rank * cols:(rank + 1) * cols]), TP_POLICY)

    def __call__(self, x: Tensor) -> Tensor:
        """This rank's hidden slice ``[M, N / world]`` for tokens ``x`` (``[M, K]``, placed with ``TP_POLICY``)."""
        torch = self.torch
        y = torch.empty((x.shape[0], self.out_features), x.dtype, TP_POLICY)
        torch.wait(torch.launch("column_parallel_linear", _linear_kernel(self.activation), x, self.weight, y))
        return y


class RowParallelLinear:
    """``Z = sum_r Y_r W[block r, :]``: this rank's row block of a ``[N, K2]`` weight, then an all-reduce."""

    def __init__(self, torch: RuntimeContext, weight: np.ndarray) -> None:
        rank, world = _rank_and_world(torch)
        n, k2 = weight.shape
        rows = _split(n, world, "the row-parallel input features")
        self.torch = torch
        self.out_features = k2
        self.weight = torch.from_numpy(np.ascontiguousarray(weight[rank * rows:(rank + 1) * rows, :]), TP_POLICY)

    def __call__(self, y: Tensor) -> Tensor:
        """The full output ``[M, K2]`` (on every rank) from this rank's hidden slice ``y``."""
        torch = self.torch
        z = torch.empty((y.shape[0], self.out_features), y.dtype, TP_POLICY)
        torch.wait(torch.launch("row_parallel_linear", _linear_kernel(None), y, self.weight, z))
        torch.distributed.all_reduce(z)
        return z


class ParallelMLP:
    """``Z = act(X W1) W2`` as a column-parallel then a row-parallel layer (one all-reduce)."""

    def __init__(self, torch: RuntimeContext, w1: np.ndarray, w2: np.ndarray, activation: str | None = "relu") -> None:
        self.fc1 = ColumnParallelLinear(torch, w1, activation)
        self.fc2 = RowParallelLinear(torch, w2)

    def __call__(self, x: Tensor) -> Tensor:
        """The MLP output for tokens ``x`` (``[M, K]``, placed with ``TP_POLICY``), identical on every rank."""
        return self.fc2(self.fc1(x))
