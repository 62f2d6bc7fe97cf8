"""``gqa_decode``: one new query token per user against its KV cache, in any of the six partitionings."""

from __future__ import annotations

import numpy as np

from kernbench.layers.attention.errors import AttentionConfigError
from kernbench.layers.attention.host import deployed, install_links, kv_layout, row_positions, run_launches, transposed
from kernbench.layers.attention.problem import check_pes, check_problem, check_tile
from kernbench.layers.attention.result import AttentionResult
from kernbench.layers.attention.tree_kernel import tree_kernel
from kernbench.layers.attention.tree_plan import PARTITIONS, TreePlan, default_cubes, plan_tree


def gqa_decode(torch, q: np.ndarray, k: np.ndarray, v: np.ndarray, *, partition: str, pes: int = 8,
               cubes: int | None = None, variant: str = "opt2", tile: int | None = None) -> AttentionResult:
    """Decode attention ``softmax(Q Kᵀ / √d) V`` of ``C`` users on the device of ``torch``.

    ``q`` is ``(C, Hq, 1, d)``, ``k`` and ``v`` are ``(C, Hkv, S, d)``, numpy
    float16. User ``u`` runs on its own group of ``cubes`` cubes (cubes
    ``u*cubes ..``). ``partition`` is one of :data:`PARTITIONS`:

    - ``single_pe``: each user on PE 0 of one cube;
    - ``cube_sp_pe_tp``: the keys split over the group's cubes and replicated on the ``pes`` PEs of each; PE 0
      of each cube attends, the partial states reduce to the centre cube;
    - ``cube_repl_pe_tp``: every PE of the group holds the whole cache, one PE attends, no messages;
    - ``cube_repl_pe_sp``: every cube holds the whole cache split over its ``pes`` PEs; each cube reduces over
      its PE grid to its centre PE (cube 0's root stores);
    - ``cube_sp_pe_sp``: the keys split over cubes and PEs; each cube reduces to its centre PE, then the cubes
      to the centre cube;
    - ``short``: every cube holds whole KV heads, split over its PEs; the PEs holding a head reduce along a
      chain to the one with its first keys.

    ``variant`` picks the local loop (``opt1``, ``opt2``, ``opt3``, see
    :mod:`~kernbench.layers.attention.local`) and ``tile`` its keys per step
    (default 64). ``pes`` (1..8) is used by the partitions that spread over
    PEs; ``cubes`` defaults to :func:`~kernbench.layers.attention.tree_plan.default_cubes`.
    """
    what = f"gqa_decode(partition={partition!r})"
    if partition not in PARTITIONS:
        raise AttentionConfigError(f"gqa_decode: unknown partition {partition!r}; use one of {', '.join(PARTITIONS)}")
    problem = check_problem(q, k, v, what=what, decode=True)
    check_pes(torch.spec, pes, what=what)
    tile = check_tile(tile, what=what)
    if cubes is None:
        cubes = default_cubes(torch.spec, partition, problem)
    plan = plan_tree(torch.spec, partition, problem, pes=pes, cubes=cubes, tile=tile, variant=variant,
                     causal=False, what=what, sip=torch.device)
    return run_tree(torch, plan, q, k, v, name=f"gqa_decode_{partition}", causal=False)


def run_tree(torch, plan: TreePlan, q: np.ndarray, k: np.ndarray, v: np.ndarray, *, name: str,
             causal: bool) -> AttentionResult:
    """Deploy, install, launch and collect a reduce-partitioned call (decode, or short prefill)."""
    p = plan.problem
    rows = p.hq * p.tq
    with deployed(torch) as owned:
        args, outs, kv = [], [], []
        for u, up in enumerate(plan.users):
            kt_host = kv_layout(k[u], plan.kv_layout)
            k_policy = up.kv_policy
            if plan.config.k_transposed:
                kt_host, k_policy = np.ascontiguousarray(kt_host.T), transposed(k_policy)
            qt = torch.from_numpy(np.ascontiguousarray(q[u].reshape(rows, p.d)), up.q_policy)
            owned.append(qt)
            kt = torch.from_numpy(kt_host, k_policy)
            owned.append(kt)
            vt = torch.from_numpy(kv_layout(v[u], plan.kv_layout), up.kv_policy)
            owned.append(vt)
            rp = None
            if causal:
                rp = torch.from_numpy(row_positions(p.hq, p.tq, p.s), up.q_policy)
                owned.append(rp)
            out = torch.empty((up.launch_cubes * up.launch_pes * rows, p.d), "float32", up.out_policy)
            owned.append(out)
            kv += [kt, vt]
            outs.append(out)
            args.append((qt, kt, vt, out, rp, plan.config, up.steps))
        install_links(torch, plan.table, owned)

        def read() -> np.ndarray:
            result = np.zeros((p.users, rows, p.d), np.float32)
            for u, up in enumerate(plan.users):
                slots = torch.peek(outs[u]).reshape(up.launch_cubes * up.launch_pes, rows, p.d)
                for (q0, q1), (cube, pe) in up.stores.items():
                    result[u, q0:q1] = slots[cube * up.launch_pes + pe, q0:q1]
            return result.reshape(p.users, p.hq, p.tq, p.d)

        active = sum(1 for up in plan.users for st in up.steps.values() if any(s.seg is not None for s in st))
        return run_launches(torch, name, tree_kernel, args, read=read, kv_tensors=kv, pes_active=active)

