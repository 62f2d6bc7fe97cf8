"""The host side of a Mixture-of-Experts layer's routing: which tokens go to which expert, pure numpy.

Kernels never branch on tensor values, so the host decides the routing and the device then runs fixed-shape
kernels. The units throughout are tokens (``M``, the rows of the layer's input), experts (``E``), assignments
(one ``(token, slot)`` pair: each token is sent to ``k`` distinct experts, its ``k`` slots) and rows (one
assignment's token row, as sent to an expert's rank).

- :func:`router_topk` — the router's choice: the ``k`` largest logits of each token and the softmax over them.
- :func:`assign` — the experts of every token from a distribution (:data:`DISTRIBUTIONS`): the router's top-k, a
  balanced round robin, seeded uniform or Zipf draws, or a user file; :func:`weights_for` gives the combine
  weights at any choice of experts (the softmax of the logits at the chosen experts).
- :func:`capacity` and :func:`apply_capacity` — at most ``capacity`` tokens per expert, kept in token order.
- :func:`route` — all of the above as one :class:`Routing`.
- :func:`plan_dispatch` — the send order and row counts for expert parallelism (a :class:`DispatchPlan`).
- :func:`reference_moe` — the numpy reference output the device layer is checked against.

Dropped assignments keep their weights in :attr:`Routing.weights` but contribute nothing: the combine sums only
the kept slots and the weights are not renormalised after drops, as in Switch Transformer and GShard, where a
dropped token passes through the layer's residual connection unchanged.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from kernbench.topology.errors import KernbenchError

#: The token-to-expert distributions :func:`assign` knows.
DISTRIBUTIONS = ("router", "balanced", "uniform", "zipf", "file")


class MoeRoutingError(KernbenchError, ValueError):
    """A Mixture-of-Experts routing cannot be built as asked (bad shapes, sizes, distribution or capacity)."""


class RoutingFileError(MoeRoutingError):
    """A user routing file (distribution ``file``) is missing, unreadable or holds invalid expert ids."""


# --- validation -------------------------------------------------------------------------------------------------


def _check_sizes(where: str, tokens: int, experts: int, k: int) -> None:
    """Raise unless ``tokens >= 1``, ``experts >= 1`` and ``1 <= k <= experts`` (all plain integers)."""
    for name, value in (("tokens", tokens), ("experts", experts), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise MoeRoutingError(f"{where}: {name} = {value!r}; use an integer >= 1")
    if k > experts:
        raise MoeRoutingError(f"{where}: k = {k} is more than the {experts} expert(s); each token needs k distinct "
                              f"experts, so use k <= {experts}")


def _as_logits(where: str, logits: np.ndarray) -> np.ndarray:
    """The router logits as a finite ``[M, E]`` float32 array (raise otherwise)."""
    arr = np.asarray(logits)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise MoeRoutingError(f"{where}: logits have shape {arr.shape}; pass a [tokens, experts] array with at "
                              f"least one token and one expert")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise MoeRoutingError(f"{where}: logits have dtype {arr.dtype}; pass real numbers (float32)")
    arr = arr.astype(np.float32)
    if not np.isfinite(arr).all():
        raise MoeRoutingError(f"{where}: logits hold NaN or infinite values; pass finite logits")
    return arr


def _as_experts(where: str, experts: np.ndarray, num_experts: int) -> np.ndarray:
    """A ``[M, k]`` int64 copy of expert ids, checked to lie in ``[0, num_experts)``."""
    arr = np.asarray(experts)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1 or not np.issubdtype(arr.dtype, np.integer):
        raise MoeRoutingError(f"{where}: experts have shape {arr.shape} and dtype {arr.dtype}; pass a [tokens, k] "
                              f"integer array")
    if arr.min() < 0 or arr.max() >= num_experts:
        raise MoeRoutingError(f"{where}: expert ids range over [{arr.min()}, {arr.max()}]; use ids in "
                              f"[0, {num_experts})")
    return arr.astype(np.int64)


def _frozen(arr: np.ndarray, dtype: type) -> np.ndarray:
    """A read-only view of ``arr`` as ``dtype`` (the caller's array keeps its own write flag)."""
    view = np.asarray(arr, dtype=dtype).view()
    view.flags.writeable = False
    return view


# --- the router ---------------------------------------------------------------------------------------------------


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """The softmax of every row of ``x`` in float32, stable (the row maximum is subtracted first)."""
    shifted = x.astype(np.float32) - x.max(axis=1, keepdims=True).astype(np.float32)
    e = np.exp(shifted)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def router_topk(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The router's choice for ``[M, E]`` logits (taken as float32): the ``k`` experts of each token with the largest
    logits, as ``[M, k]`` int64 expert ids ordered by descending logit with ties broken toward the lower expert id,
    and their ``[M, k]`` float32 weights, the softmax over the ``k`` chosen logits (each row sums to 1)."""
    arr = _as_logits("router_topk", logits)
    _check_sizes("router_topk", arr.shape[0], arr.shape[1], k)
    experts = np.argsort(-arr, axis=1, kind="stable")[:, :k].astype(np.int64)
    return experts, _softmax_rows(np.take_along_axis(arr, experts, axis=1))


def weights_for(logits: np.ndarray, experts: np.ndarray) -> np.ndarray:
    """The ``[M, k]`` float32 combine weights of tokens sent to ``experts`` (``[M, k]`` ids): the softmax of each
    token's ``[M, E]`` logits at its ``k`` chosen experts, whatever chose them (each row sums to 1)."""
    arr = _as_logits("weights_for", logits)
    ids = _as_experts("weights_for", experts, arr.shape[1])
    if ids.shape[0] != arr.shape[0]:
        raise MoeRoutingError(f"weights_for: experts cover {ids.shape[0]} token(s) but the logits {arr.shape[0]}; "
                              f"pass one row of expert ids per row of logits")
    return _softmax_rows(np.take_along_axis(arr, ids, axis=1))


# --- token-to-expert distributions ---------------------------------------------------------------------------------


def _balanced(tokens: int, experts: int, k: int) -> np.ndarray:
    """Round robin over the assignments in token order: token ``t`` takes experts ``(t*k + j) % E`` for ``j < k``,
    ``k`` consecutive (so distinct, as ``k <= E``) ids, and every expert gets ``floor`` or ``ceil`` of ``M*k/E``."""
    return (np.arange(tokens * k, dtype=np.int64) % experts).reshape(tokens, k)


def _draw(tokens: int, experts: int, k: int, seed: int, p: np.ndarray | None) -> np.ndarray:
    """``k`` distinct experts per token, drawn without replacement from probabilities ``p`` (uniform if None) by
    ``np.random.default_rng(seed).choice``, one token after another."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(experts, k, replace=False, p=p) for _ in range(tokens)]).astype(np.int64)


def _check_skew(where: str, skew: float) -> None:
    """Raise unless the Zipf ``skew`` is a finite number >= 0."""
    if isinstance(skew, bool) or not isinstance(skew, int | float | np.number) or not math.isfinite(skew) or skew < 0:
        raise MoeRoutingError(f"{where}: skew = {skew!r}; use a finite number >= 0 (0 is uniform)")


def zipf_popularity(experts: int, skew: float) -> np.ndarray:
    """The Zipf expert popularity, ``p_e ∝ 1 / (e + 1)**skew`` over ``E`` experts (float64, sums to 1): expert 0 is
    the hottest, no permutation is applied, and ``skew = 0`` is uniform. This is also the per-token marginal of
    :func:`assign`'s ``zipf`` distribution when ``k = 1``."""
    _check_sizes("zipf_popularity", 1, experts, 1)
    _check_skew("zipf_popularity", skew)
    with np.errstate(over="ignore"):  # a huge skew overflows the far ranks' powers: their probability is 0
        p = 1.0 / np.arange(1, experts + 1, dtype=np.float64) ** float(skew)
    return p / p.sum()


def _zipf_for(experts: int, k: int, skew: float) -> np.ndarray:
    """The Zipf popularity of :func:`zipf_popularity`, checked to leave at least ``k`` experts a non-zero chance."""
    p = zipf_popularity(experts, skew)
    if np.count_nonzero(p) < k:
        raise MoeRoutingError(f"assign: with skew = {skew} only {np.count_nonzero(p)} of {experts} experts have a "
                              f"non-zero Zipf probability in float64, fewer than k = {k}; use a smaller skew")
    return p


def _bad_row(ids: Sequence[int], experts: int) -> str | None:
    """What is wrong with one token's expert ids (out of range or repeated), or None if they are valid."""
    for e in ids:
        if not 0 <= e < experts:
            return f"expert id {e} is out of range; use ids in [0, {experts})"
    if len(set(ids)) != len(ids):
        return f"expert ids {list(ids)} repeat an id; list {len(ids)} distinct experts per token"
    return None


def _parse_line(path: Path, number: int, line: str, experts: int, k: int) -> list[int]:
    """The ``k`` expert ids on line ``number`` (1-based) of a routing text file, validated."""
    fields = line.split()
    if len(fields) != k:
        raise RoutingFileError(f"routing file {path} line {number}: {len(fields)} expert id(s), need k = {k}; "
                               f"write k whitespace-separated ids on every line")
    try:
        ids = [int(f) for f in fields]
    except ValueError:
        raise RoutingFileError(f"routing file {path} line {number}: {line.strip()!r} is not {k} integer(s); write "
                               f"integer expert ids") from None
    problem = _bad_row(ids, experts)
    if problem:
        raise RoutingFileError(f"routing file {path} line {number}: {problem}")
    return ids


def _read_text(path: Path, tokens: int, experts: int, k: int) -> np.ndarray:
    """Expert ids from a text file of one line per token (trailing blank lines are ignored)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise RoutingFileError(f"routing file {path} cannot be read as text ({exc}); pass a text file of one line "
                               f"per token, or a .npy array") from None
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) != tokens:
        raise RoutingFileError(f"routing file {path} has {len(lines)} line(s) but there are {tokens} token(s); "
                               f"write exactly one line of k = {k} expert ids per token")
    rows = [_parse_line(path, n, line, experts, k) for n, line in enumerate(lines, start=1)]
    return np.asarray(rows, dtype=np.int64).reshape(tokens, k)


def _read_npy(path: Path, tokens: int, experts: int, k: int) -> np.ndarray:
    """Expert ids from a ``.npy`` integer array of shape ``[M, k]`` (row ``t`` is token ``t``)."""
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise RoutingFileError(f"routing file {path} is not a readable .npy array ({exc}); save it with "
                               f"numpy.save") from None
    if arr.shape != (tokens, k) or not np.issubdtype(arr.dtype, np.integer):
        raise RoutingFileError(f"routing file {path} holds a {arr.dtype} array of shape {arr.shape}; save an "
                               f"integer array of shape ({tokens}, {k}) (tokens x k)")
    for t, row in enumerate(arr.tolist()):
        problem = _bad_row(row, experts)
        if problem:
            raise RoutingFileError(f"routing file {path} row {t} (token {t}): {problem}")
    return arr.astype(np.int64)


def _from_file(path: str | os.PathLike[str] | None, tokens: int, experts: int, k: int) -> np.ndarray:
    """Expert ids per token from a user file: ``.npy`` by its suffix, otherwise text (see :func:`assign`)."""
    if path is None:
        raise MoeRoutingError("assign: distribution 'file' needs path=; pass a text file of one line of k expert "
                              "ids per token, or a .npy array of shape [tokens, k]")
    p = Path(path)
    if not p.is_file():
        raise RoutingFileError(f"routing file {p} does not exist; pass path= an existing text or .npy file")
    reader = _read_npy if p.suffix.lower() == ".npy" else _read_text
    return reader(p, tokens, experts, k)


def _check_seed(seed: int) -> None:
    """Raise unless ``seed`` is a non-negative integer (what ``np.random.default_rng`` takes)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise MoeRoutingError(f"assign: seed = {seed!r}; use an integer >= 0")


def assign(distribution: str, tokens: int, experts: int, k: int, *, seed: int = 0, skew: float = 1.2,
           path: str | os.PathLike[str] | None = None, logits: np.ndarray | None = None) -> np.ndarray:
    """The experts of each of ``tokens`` tokens: a ``[M, k]`` int64 array of ``k`` distinct ids in ``[0, E)`` per
    token, drawn from ``distribution`` (one of :data:`DISTRIBUTIONS`):

    - ``router`` — the router's top-k of ``logits`` (``[M, E]``, required), as :func:`router_topk`;
    - ``balanced`` — a deterministic round robin: token ``t`` takes experts ``(t*k + j) % E`` for ``j < k`` (``k``
      consecutive ids, distinct since ``k <= E``), so every expert gets ``floor`` or ``ceil`` of ``M*k/E``;
    - ``uniform`` — each token draws ``k`` distinct experts uniformly, from ``np.random.default_rng(seed)``;
    - ``zipf`` — each token draws ``k`` distinct experts without replacement with the popularity of
      :func:`zipf_popularity` (``p_e ∝ 1/(e+1)**skew``, ``skew >= 0``, 0 is uniform), seeded the same way; the
      experts are not permuted, so expert 0 is the hottest;
    - ``file`` — read from ``path``: a text file of one line per token of ``k`` whitespace-separated integer ids
      (trailing blank lines are ignored), or a ``.npy`` integer array of shape ``[M, k]``.

    ``logits`` is used by ``router`` only (if given to another distribution its shape is still checked); ``path``
    belongs to ``file`` only. The draws are reproducible: the same arguments give the same experts."""
    _check_sizes("assign", tokens, experts, k)
    if distribution not in DISTRIBUTIONS:
        raise MoeRoutingError(f"assign: unknown distribution {distribution!r}; use one of {', '.join(DISTRIBUTIONS)}")
    if path is not None and distribution != "file":
        raise MoeRoutingError(f"assign: path= is given but the distribution is {distribution!r}; pass "
                              f"distribution='file' to read it, or drop path=")
    if logits is not None and _as_logits("assign", logits).shape != (tokens, experts):
        raise MoeRoutingError(f"assign: logits have shape {np.shape(logits)} but tokens x experts is "
                              f"({tokens}, {experts}); pass logits of that shape")
    _check_seed(seed)
    _check_skew("assign", skew)
    match distribution:
        case "router":
            if logits is None:
                raise MoeRoutingError("assign: distribution 'router' needs logits=; pass the [tokens, experts] "
                                      "router logits, or use another distribution")
            return router_topk(logits, k)[0]
        case "balanced":
            return _balanced(tokens, experts, k)
        case "uniform":
            return _draw(tokens, experts, k, seed, None)
        case "zipf":
            return _draw(tokens, experts, k, seed, _zipf_for(experts, k, skew))
        case _:
            return _from_file(path, tokens, experts, k)


# --- capacity ------------------------------------------------------------------------------------------------------


def _exact(factor: float) -> Fraction:
    """``factor`` as an exact fraction of its shortest decimal form (1.1 is 11/10, not the binary double)."""
    return Fraction(int(factor)) if isinstance(factor, int | np.integer) else Fraction(str(factor))


def capacity(tokens: int, experts: int, k: int, factor: float | None) -> int | None:
    """The expert capacity in tokens: ``ceil(factor * tokens * k / experts)``, the most tokens one expert takes
    (``factor = 1`` is the balanced share). ``factor`` must be > 0; None or ``inf`` means no limit and gives None.
    The product is exact on ``factor``'s decimal form, so 1.1 x 50 tokens on 1 expert is 55, not 56."""
    _check_sizes("capacity", tokens, experts, k)
    if factor is None or (isinstance(factor, int | float | np.number) and math.isinf(factor) and factor > 0):
        return None
    if isinstance(factor, bool) or not isinstance(factor, int | float | np.number) or not factor > 0:
        raise MoeRoutingError(f"capacity: capacity factor = {factor!r}; use a number > 0, or None (or inf) for no "
                              f"limit")
    return math.ceil(_exact(factor) * tokens * k / experts)


def apply_capacity(experts: np.ndarray, capacity: int | None, *,
                   num_experts: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop assignments beyond ``capacity`` tokens per expert. The ``[M, k]`` assignments are taken in token order
    (token 0 first, then within a token by slot ``j``); each is kept until its expert holds ``capacity`` tokens and
    dropped after. Returns the ``[M, k]`` bool keep mask, the ``[num_experts]`` int64 kept tokens per expert and the
    number of dropped assignments. ``capacity`` None keeps everything."""
    if isinstance(num_experts, bool) or not isinstance(num_experts, int | np.integer) or num_experts < 1:
        raise MoeRoutingError(f"apply_capacity: num_experts = {num_experts!r}; use an integer >= 1")
    ids = _as_experts("apply_capacity", experts, num_experts)
    flat = ids.ravel()
    if capacity is None:
        keep = np.ones(flat.shape, dtype=bool)
    elif isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 0:
        raise MoeRoutingError(f"apply_capacity: capacity = {capacity!r}; use an integer >= 0, or None for no limit")
    else:
        by_expert = np.argsort(flat, kind="stable")  # token order inside each expert
        starts = np.searchsorted(flat[by_expert], flat[by_expert], side="left")
        keep = np.empty(flat.shape, dtype=bool)
        keep[by_expert] = np.arange(flat.size) - starts < capacity
    counts = np.bincount(flat[keep], minlength=num_experts).astype(np.int64)
    return keep.reshape(ids.shape), counts, int(flat.size - keep.sum())


# --- the routing ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Routing:
    """A MoE layer's routing for ``M`` tokens, ``k`` slots each, over ``E`` experts: ``experts`` (``[M, k]`` int64
    ids), ``weights`` (``[M, k]`` float32 combine weights, dropped slots included), ``keep`` (``[M, k]`` bool, False
    for assignments dropped by the capacity), ``counts`` (``[E]`` int64 kept tokens per expert), ``dropped`` (the
    number of dropped assignments) and ``capacity`` (tokens per expert, None for no limit). The arrays are stored
    as read-only views. A dropped slot contributes nothing: the combine sums the kept slots only, without
    renormalising their weights (the token passes through the residual, as in Switch/GShard)."""

    experts: np.ndarray
    weights: np.ndarray
    keep: np.ndarray
    counts: np.ndarray
    dropped: int
    capacity: int | None

    def __post_init__(self) -> None:
        shape = np.shape(self.experts)
        if len(shape) != 2 or np.shape(self.weights) != shape or np.shape(self.keep) != shape:
            raise MoeRoutingError(f"Routing: experts {shape}, weights {np.shape(self.weights)} and keep "
                                  f"{np.shape(self.keep)} must share one [tokens, k] shape")
        if np.ndim(self.counts) != 1:
            raise MoeRoutingError(f"Routing: counts have shape {np.shape(self.counts)}; pass one count per expert")
        for name, dtype in (("experts", np.int64), ("weights", np.float32), ("keep", bool), ("counts", np.int64)):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))

    @property
    def tokens(self) -> int:
        """``M``, the number of tokens routed."""
        return int(self.experts.shape[0])

    @property
    def k(self) -> int:
        """The number of experts (slots) per token."""
        return int(self.experts.shape[1])

    @property
    def num_experts(self) -> int:
        """``E``, the number of experts."""
        return int(self.counts.shape[0])

    @property
    def kept(self) -> int:
        """The number of kept assignments (rows sent to experts), ``M*k - dropped``."""
        return int(self.counts.sum())

    @property
    def max_load(self) -> int:
        """The most kept tokens on one expert."""
        return int(self.counts.max())

    @property
    def mean_load(self) -> float:
        """The mean of the kept tokens per expert, over all ``E`` experts (idle ones included)."""
        return float(self.counts.mean())

    @property
    def imbalance(self) -> float:
        """``max_load / mean_load``: 1.0 when every expert has the same load (also when none has any), ``E`` when
        one expert takes everything."""
        mean = self.mean_load
        return 1.0 if mean == 0 else self.max_load / mean

    def histogram(self) -> np.ndarray:
        """The kept tokens per expert, ``[E]`` int64 (a writable copy of :attr:`counts`)."""
        return self.counts.copy()


def route(logits: np.ndarray, k: int, *, distribution: str = "router", capacity_factor: float | None = None,
          seed: int = 0, skew: float = 1.2, path: str | os.PathLike[str] | None = None) -> Routing:
    """Route ``[M, E]`` router logits to ``k`` experts per token: the experts from ``distribution`` (see
    :func:`assign`, with its ``seed``, ``skew`` and ``path``), the weights as :func:`weights_for` (softmax of the
    logits at the chosen experts), then the capacity ``capacity(M, E, k, capacity_factor)`` (None: no limit)
    applied in token order (see :func:`apply_capacity`)."""
    arr = _as_logits("route", logits)
    tokens, experts = arr.shape
    ids = assign(distribution, tokens, experts, k, seed=seed, skew=skew, path=path, logits=arr)
    cap = capacity(tokens, experts, k, capacity_factor)
    keep, counts, dropped = apply_capacity(ids, cap, num_experts=experts)
    return Routing(ids, weights_for(arr, ids), keep, counts, dropped, cap)


# --- expert parallelism --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DispatchPlan:
    """The send side of expert parallelism: one row per kept assignment, in send order. ``order`` holds each row's
    index into the flattened ``[M*k]`` assignments (``token*k + slot``; dropped ones never appear), sorted by
    (destination rank, expert, token, slot); ``token_of_row``, ``slot_of_row`` and ``expert_of_row`` are each row's
    token, slot and expert; ``send_counts`` (``[ranks]``) counts the rows sent to each destination rank, the
    ``input_split_sizes`` of an ``all_to_all_single`` in rows; ``rows_per_expert`` (``[E]``) counts the rows each
    expert receives (the routing's kept counts). All int64, read-only."""

    order: np.ndarray
    token_of_row: np.ndarray
    slot_of_row: np.ndarray
    expert_of_row: np.ndarray
    send_counts: np.ndarray
    rows_per_expert: np.ndarray

    def __post_init__(self) -> None:
        for name in ("order", "token_of_row", "slot_of_row", "expert_of_row", "send_counts", "rows_per_expert"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.int64))

    @property
    def rows(self) -> int:
        """The number of rows sent (the kept assignments)."""
        return int(self.order.shape[0])

    def input_split_sizes(self) -> list[int]:
        """``send_counts`` as a list of ints, as ``all_to_all_single`` takes it (rows per destination rank)."""
        return [int(c) for c in self.send_counts]


def _owners(owner_of_expert: Sequence[int] | np.ndarray, experts: int, ranks: int) -> np.ndarray:
    """``owner_of_expert`` as ``[E]`` int64 ranks, checked to cover every expert with a rank in ``[0, ranks)``."""
    if isinstance(ranks, bool) or not isinstance(ranks, int | np.integer) or ranks < 1:
        raise MoeRoutingError(f"plan_dispatch: ranks = {ranks!r}; use an integer >= 1")
    owners = np.asarray(owner_of_expert)
    if owners.shape != (experts,) or not np.issubdtype(owners.dtype, np.integer):
        raise MoeRoutingError(f"plan_dispatch: owner_of_expert has shape {owners.shape} and dtype {owners.dtype}; "
                              f"pass one integer rank per expert ({experts})")
    bad = np.flatnonzero((owners < 0) | (owners >= ranks))
    if bad.size:
        raise MoeRoutingError(f"plan_dispatch: expert {bad[0]} is owned by rank {owners[bad[0]]}; use ranks in "
                              f"[0, {ranks})")
    return owners.astype(np.int64)


def plan_dispatch(routing: Routing, owner_of_expert: Sequence[int] | np.ndarray, ranks: int) -> DispatchPlan:
    """The send order and counts of ``routing``'s kept assignments when expert ``e`` lives on rank
    ``owner_of_expert[e]`` of ``ranks``: rows sorted by (destination rank, expert, token, slot), stable, with the
    rows sent to each rank and received by each expert (see :class:`DispatchPlan`)."""
    owners = _owners(owner_of_expert, routing.num_experts, ranks)
    flat = np.flatnonzero(routing.keep.ravel()).astype(np.int64)  # token order, then slot order
    expert = routing.experts.ravel()[flat]
    rank = owners[expert]
    order = flat[np.lexsort((flat, expert, rank))]
    token, slot = np.divmod(order, routing.k)
    expert_of_row = routing.experts.ravel()[order]
    return DispatchPlan(order, token, slot, expert_of_row, np.bincount(owners[expert_of_row], minlength=ranks),
                        np.bincount(expert_of_row, minlength=routing.num_experts))


def reference_moe(x: np.ndarray, routing: Routing,
                  expert_fn: Callable[[int, np.ndarray], np.ndarray]) -> np.ndarray:
    """The MoE layer's output in float32, the numpy reference for the device layer: for ``[M, H]`` tokens ``x``,
    ``out[t] = sum over kept slots j of weights[t, j] * expert_fn(experts[t, j], x[t])``. Each expert ``e`` with
    kept tokens is called once, with all of them: ``expert_fn(e, rows)`` maps ``[n, H]`` float32 rows (in token
    order) to ``[n, H]``; experts with none are not called. Slots are summed in slot order; dropped slots add 0."""
    xs = np.asarray(x)
    if xs.ndim != 2 or xs.shape[0] != routing.tokens:
        raise MoeRoutingError(f"reference_moe: x has shape {xs.shape}; pass [tokens, H] with the routing's "
                              f"{routing.tokens} token(s)")
    xs = xs.astype(np.float32)
    contrib = np.zeros((routing.tokens, routing.k, xs.shape[1]), dtype=np.float32)
    for e in np.flatnonzero(routing.counts):
        token, slot = np.nonzero((routing.experts == e) & routing.keep)
        y = np.asarray(expert_fn(int(e), xs[token]))
        if y.shape != (token.size, xs.shape[1]):
            raise MoeRoutingError(f"reference_moe: expert_fn({e}, rows) returned shape {y.shape} for rows of shape "
                                  f"{(token.size, xs.shape[1])}; return one [H] row per input row")
        contrib[token, slot] = routing.weights[token, slot, None] * y.astype(np.float32)
    out = np.zeros((routing.tokens, xs.shape[1]), dtype=np.float32)
    for j in range(routing.k):
        out += contrib[:, j]
    return out
