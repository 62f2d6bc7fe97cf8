"""``gqa_prefill``: many query rows per user (causal by default), in ``short`` or ``ring`` mode."""

from __future__ import annotations

import numpy as np

from kernbench.layers.attention.decode import run_tree
from kernbench.layers.attention.errors import AttentionConfigError
from kernbench.layers.attention.geometry import group_sizes
from kernbench.layers.attention.host import deployed, install_links, kv_layout, row_positions, run_launches, transposed
from kernbench.layers.attention.problem import DEFAULT_TILE, Problem, check_pes, check_problem
from kernbench.layers.attention.result import AttentionResult
from kernbench.layers.attention.ring_kernel import ring_kernel
from kernbench.layers.attention.ring_plan import RingPlan, plan_ring
from kernbench.layers.attention.tree_plan import default_cubes, plan_tree

#: The prefill modes.
MODES = ("short", "ring")


def gqa_prefill(torch, q: np.ndarray, k: np.ndarray, v: np.ndarray, *, mode: str, pes: int = 1,
                cubes: int | None = None, causal: bool = True) -> AttentionResult:
    """Prefill attention ``softmax(Q Kᵀ / √d + mask) V`` of ``C`` users on the device of ``torch``.

    ``q`` is ``(C, Hq, Tq, d)`` with ``Tq <= S``, ``k`` and ``v`` ``(C, Hkv,
    S, d)``, numpy float16. With ``causal`` (the default) query row ``i`` is
    at position ``S - Tq + i`` and sees keys up to that position (bottom-right
    alignment, as with a KV cache and in FlashAttention >= 2.1; ``Tq == S`` is
    the usual triangle). User ``u`` runs on its own group of ``cubes`` cubes.

    - ``mode="short"``: every cube holds whole KV heads (``Hkv`` must split over ``cubes``), split over its
      ``pes`` PEs by sequence; the PEs holding a head reduce their partial states along a chain.
    - ``mode="ring"``: the query heads are split over the cubes and their rows over the ``pes`` PEs of a
      cube; the key blocks of the cubes rotate round a ring of the group's cubes (one ring per PE index), a
      tile at a time, and every PE merges each tile into its rows' states.

    ``cubes`` defaults to :func:`~kernbench.layers.attention.tree_plan.default_cubes` for ``short`` and to the
    largest group (at most 8 cubes) the users leave room for in ``ring``.
    """
    what = f"gqa_prefill(mode={mode!r})"
    if mode not in MODES:
        raise AttentionConfigError(f"gqa_prefill: unknown mode {mode!r}; use one of {', '.join(MODES)}")
    problem = check_problem(q, k, v, what=what, decode=False)
    check_pes(torch.spec, pes, what=what)
    if mode == "short":
        if cubes is None:
            cubes = default_cubes(torch.spec, "short", problem)
        plan = plan_tree(torch.spec, "short", problem, pes=pes, cubes=cubes, tile=DEFAULT_TILE, variant="opt2",
                         causal=causal, what=what, sip=torch.device)
        return run_tree(torch, plan, q, k, v, name="gqa_prefill_short", causal=causal)
    if cubes is None:
        cubes = _ring_cubes(torch.spec, problem)
    plan = plan_ring(torch.spec, problem, pes=pes, cubes=cubes, tile=DEFAULT_TILE, causal=causal, what=what,
                     sip=torch.device)
    return run_ring(torch, plan, q, k, v)


def _ring_cubes(spec, problem: Problem) -> int:
    room = max(1, spec.cubes_per_sip // problem.users)
    return max(n for n in group_sizes(spec) if n <= min(8, room, problem.s))


def run_ring(torch, plan: RingPlan, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> AttentionResult:
    """Deploy, install, launch and collect ring prefill."""
    p = plan.problem
    rows = p.hq * p.tq
    with deployed(torch) as owned:
        args, outs, kv = [], [], []
        for u, up in enumerate(plan.users):
            qt = torch.from_numpy(np.ascontiguousarray(q[u].reshape(rows, p.d)), up.q_policy)
            owned.append(qt)
            kt = torch.from_numpy(np.ascontiguousarray(kv_layout(k[u], "token").T), transposed(up.kv_policy))
            owned.append(kt)
            vt = torch.from_numpy(kv_layout(v[u], "token"), up.kv_policy)
            owned.append(vt)
            rp = torch.from_numpy(row_positions(p.hq, p.tq, p.s), up.q_policy)
            owned.append(rp)
            out = torch.empty((rows, p.d), "float32", up.q_policy)
            owned.append(out)
            kv += [kt, vt]
            outs.append(out)
            args.append((qt, kt, vt, out, rp, plan.config, up.pes))
        install_links(torch, plan.table, owned)

        def read() -> np.ndarray:
            return np.stack([torch.peek(o) for o in outs]).reshape(p.users, p.hq, p.tq, p.d)

        active = sum(1 for up in plan.users for pe in up.pes.values() if any(any(ps) for ps in pe.passes))
        return run_launches(torch, "gqa_prefill_ring", ring_kernel, args, read=read, kv_tensors=kv,
                            pes_active=active)
