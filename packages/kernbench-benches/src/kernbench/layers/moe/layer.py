"""A mixture-of-experts layer (SwiGLU experts, top-k routing) with expert parallelism over SIPs and experts laid
over the PEs of each SIP.

One call per rank (``torch.distributed`` rank = SIP; outside a process group, one rank). On each rank:

1. **router**: ``logits = X Wr`` on PE 0 of cube 0 (a composite GEMM);
2. **routing, on the host**: the top-k experts per token and their softmax weights, or a synthetic
   distribution (:func:`~kernbench.layers.moe.routing.assign`; its seed is ``seed + rank``), then the capacity
   limit; kernels never branch on the result, they receive runs of rows;
3. **permute** (several ranks): the kept (token, slot) pairs copied to a send buffer ordered by destination rank,
   expert, token (:func:`~kernbench.layers.moe.routing.plan_dispatch`);
4. **counts and dispatch**: an ``all_to_all_single`` of the per-expert row counts (``int32``), then one of the
   tokens with those uneven splits;
5. **experts**: every PE holding experts (:mod:`~kernbench.layers.moe.placement`) gathers its rows
   (``tl.load_rows``, one DMA per run), runs gate/up/down as composite GEMMs with SiLU on the math engine, sums a
   tensor-parallel group's partials over the PE_IPCQ and scatters the rows back (``tl.store_rows``); the shared
   expert, if any, runs on the rank's own tokens;
6. **combine**: an ``all_to_all_single`` returning every output row to its token's rank (several ranks), then
   ``Z[t] = sum_j w[t, j] Y[t, j]`` (+ the shared expert's row) on PE 0 of cube 0, in float32.

Dropped assignments (over capacity) add nothing and the weights are not renormalised. The host learns the
routing at no simulated cost: a real system reads the counts back before the permutation (a device-to-host copy
of ``E`` integers), which this layer does not model. The counts ``all_to_all`` is simulated for its time; each
rank's receive sizes, which the host would read from it, are taken from the other ranks' plans (in data mode
the exchanged counts are checked against them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kernbench.ccl import install
from kernbench.ccl.neighbours import intra_cube, merge
from kernbench.components.launch import LaunchResult
from kernbench.layers.moe.kernels import (
    ExpertChunk,
    ExpertJob,
    Runs,
    combine_kernel,
    expert_kernel,
    permute_kernel,
    router_kernel,
    split_runs,
)
from kernbench.layers.moe.placement import ExpertPlacement, MoePlacementError, place_experts
from kernbench.layers.moe.routing import DispatchPlan, MoeRoutingError, Routing, plan_dispatch, route
from kernbench.runtime import DPPolicy, RuntimeContext, by_address
from kernbench.tl.rows import row_runs

ONE_PE = DPPolicy(num_cubes=1, num_pes=1)


@dataclass(frozen=True)
class MoeWeights:
    """A layer's weights (numpy float16): ``router`` ``[H, E]``; ``gate`` and ``up`` ``[E, H, F]``; ``down``
    ``[E, F, H]``; the shared expert's ``shared_gate``, ``shared_up`` ``[H, F]`` and ``shared_down`` ``[F, H]``
    (all None without one; it has the routed experts' width)."""

    router: np.ndarray
    gate: np.ndarray
    up: np.ndarray
    down: np.ndarray
    shared_gate: np.ndarray | None = None
    shared_up: np.ndarray | None = None
    shared_down: np.ndarray | None = None

    @property
    def experts(self) -> int:
        """Routed experts ``E``."""
        return self.gate.shape[0]

    @property
    def shared(self) -> bool:
        """Whether the layer has a shared expert."""
        return self.shared_gate is not None

    def expert(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gate, up and down of routed expert ``index`` (``index == E``: the shared expert)."""
        if index == self.experts:
            return self.shared_gate, self.shared_up, self.shared_down
        return self.gate[index], self.up[index], self.down[index]


@dataclass(frozen=True)
class MoeConfig:
    """How a layer routes and where its experts live: top-``k``; ``distribution`` (``router``, ``balanced``,
    ``uniform``, ``zipf`` with ``skew``, ``file`` with ``path``) and its ``seed``; ``capacity_factor`` (None: no
    limit); the ``cubes`` and ``pes`` of each SIP holding experts."""

    k: int = 2
    distribution: str = "router"
    capacity_factor: float | None = None
    seed: int = 0
    skew: float = 1.2
    path: str | None = None
    cubes: int = 1
    pes: int = 8


@dataclass(frozen=True)
class MoeResult:
    """One rank's outcome: ``out`` (``[M, H]`` float32 in data mode, else None), its ``routing`` and ``plan``,
    ``phases`` (ns per step, each from its first PE start to its last PE end: router, permute, counts, dispatch,
    experts, combine_exchange, combine; the steps a single rank skips are 0) and ``latency_ns``, their sum (the
    host's work between steps, such as writing the routing plan's weights, is not counted)."""

    out: np.ndarray | None
    routing: Routing
    plan: DispatchPlan
    latency_ns: float
    phases: dict[str, float]


def _window(launch: LaunchResult) -> tuple[float, float]:
    """First PE start and last PE end of a launch, ns."""
    reports = list(launch.reports.values())
    return min(r.exec_start_ns for r in reports), max(r.exec_start_ns + r.exec_ns for r in reports)


@dataclass
class MoeLayer:
    """A MoE layer over fixed weights; call it once per rank with that rank's tokens (``layer(torch, x)``).

    ``on_step(step, edge)``, when given, is called on the host as each step starts (``edge`` ``"start"``) and
    after it returns (``"end"``), with ``step`` a key of :attr:`MoeResult.phases`: a hook for reading counters
    around one step (the MoE study reads the link counters around the dispatch). The layer keeps, per call, the
    per-expert row counts every rank publishes before the counts exchange (the host side of that exchange, see
    the module)."""

    weights: MoeWeights
    config: MoeConfig = MoeConfig()
    on_step: Callable[[str, str], None] | None = None
    _counts: dict[int, dict[int, np.ndarray]] = field(default_factory=dict, repr=False)
    _calls: dict[int, int] = field(default_factory=dict, repr=False)
    _reads: dict[int, int] = field(default_factory=dict, repr=False)

    def __call__(self, torch: RuntimeContext, x: np.ndarray) -> MoeResult:
        """Run the layer on this rank's ``[M, H]`` float16 tokens ``x``."""
        dist = getattr(torch, "distributed", None)
        grouped = dist is not None and dist.is_initialized()
        rank, world = (dist.get_rank(), dist.get_world_size()) if grouped else (0, 1)
        w, cfg = self.weights, self.config
        self._check(x)
        placement = place_experts(torch.spec, w.experts, world, shared=w.shared, cubes=cfg.cubes, pes=cfg.pes)
        call = self._calls.get(rank, 0)
        self._calls[rank] = call + 1
        owned: list = []
        ring = None
        phases = dict.fromkeys(("router", "permute", "counts", "dispatch", "experts", "combine_exchange",
                                "combine"), 0.0)
        try:
            xt = torch.from_numpy(x, ONE_PE)
            owned.append(xt)
            wr = torch.from_numpy(w.router, ONE_PE)
            logits = torch.empty((x.shape[0], w.experts), "float32", ONE_PE)
            owned += [wr, logits]
            self._step(phases, "router", lambda: torch.wait(torch.launch("moe_router", router_kernel, xt, wr,
                                                                                  logits)))
            host_logits = x.astype(np.float32) @ w.router.astype(np.float32)
            routing = route(host_logits, cfg.k, distribution=cfg.distribution, capacity_factor=cfg.capacity_factor,
                            seed=cfg.seed + rank, skew=cfg.skew, path=cfg.path)
            plan = plan_dispatch(routing, [placement.owner(e) for e in range(w.experts)], world)
            weights = self._stack(torch, placement, rank)
            owned += weights
            if placement.tp > 1:
                table = merge(*(intra_cube(torch.spec, torch.device, c) for c in range(cfg.cubes)))
                ring = install(torch, table, "tcm", extend=grouped)
            if world == 1:
                z = self._single(torch, xt, weights, placement, routing, plan, owned, phases)
            else:
                z = self._exchange(torch, dist, rank, world, call, xt, weights, placement, routing, plan,
                                        owned, phases)
            out = torch.peek(z).astype(np.float32) if torch.data else None
        finally:
            for t in owned:
                torch.free(t)
            if ring is not None:
                ring.remove()
        return MoeResult(out, routing, plan, sum(phases.values()), phases)

    def _step(self, phases: dict[str, float], name: str, run: Callable[[], LaunchResult]) -> LaunchResult:
        """Run one step, timing it into ``phases[name]`` and telling :attr:`on_step` around it."""
        if self.on_step is not None:
            self.on_step(name, "start")
        result = run()
        a, b = _window(result)
        phases[name] = b - a
        if self.on_step is not None:
            self.on_step(name, "end")
        return result

    # ------------------------------------------------------------------ checks and weights
    def _check(self, x: np.ndarray) -> None:
        w = self.weights
        if x.ndim != 2 or x.shape[1] != w.router.shape[0]:
            raise MoeRoutingError(f"moe: x has shape {x.shape}; pass [tokens, H] with H = {w.router.shape[0]}, the "
                                  f"router's rows")
        e, h, f = w.gate.shape
        if w.router.shape != (h, e) or w.up.shape != (e, h, f) or w.down.shape != (e, f, h):
            raise MoeRoutingError(f"moe: weight shapes do not chain: router {w.router.shape}, gate {w.gate.shape}, "
                                  f"up {w.up.shape}, down {w.down.shape}; need [H, E], [E, H, F], [E, H, F], "
                                  f"[E, F, H]")
        shared = (w.shared_gate, w.shared_up, w.shared_down)
        if any(s is not None for s in shared) and [None if s is None else s.shape for s in shared] != [
                (h, f), (h, f), (f, h)]:
            raise MoeRoutingError(f"moe: a shared expert needs gate and up [{h}, {f}] and down [{f}, {h}] (the "
                                  f"routed experts' shapes), all three")

    def _stack(self, torch: RuntimeContext, p: ExpertPlacement, rank: int) -> list:
        """The gate, up and down weights of this rank's experts stacked slot by slot, each slot's shard holding
        its jobs' blocks in order, placed row-wise over the expert PEs."""
        w = self.weights
        f = w.gate.shape[2] // p.tp
        h = w.gate.shape[1]
        blocks = ([], [], [])
        for slot in range(p.slots):
            jobs = p.jobs_of(slot)
            for local, part in jobs:
                index = rank * p.routed_per_rank + local if local < p.routed_per_rank else w.experts
                g, u, d = w.expert(index)
                cols = slice(part * f, (part + 1) * f)
                blocks[0].append(g[:, cols])
                blocks[1].append(u[:, cols])
                blocks[2].append(d[cols, :])
            for _ in range(p.per_slot - len(jobs)):  # room a fuller PE uses
                blocks[0].append(np.zeros((h, f), np.float16))
                blocks[1].append(np.zeros((h, f), np.float16))
                blocks[2].append(np.zeros((f, h), np.float16))
        policy = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=p.cubes, num_pes=p.pes)
        return [torch.from_numpy(np.ascontiguousarray(np.concatenate(b)), policy) for b in blocks]

    # ------------------------------------------------------------------ plans
    def _chunk_rows(self, torch: RuntimeContext, p: ExpertPlacement) -> int:
        """Rows an expert job computes per pass: half the kernel scratch over a row's temporaries, and for a
        tensor-parallel expert no more than one PE_IPCQ slot of float32 partial rows."""
        spec = torch.spec
        h, f = self.weights.gate.shape[1], self.weights.gate.shape[2] // p.tp
        per_row = 2 * h + 4 * 4 * f + 2 * 4 * h
        rows = int(spec.pe.tcm.scratch_mib * (1 << 20)) // (2 * per_row)
        if p.tp > 1:
            rows = min(rows, spec.pe.ipcq.slot_bytes // (4 * h))
        if rows < 1:
            raise MoePlacementError(f"moe: one token's expert temporaries ({per_row} B) do not fit the kernel "
                                    f"scratch; use a narrower layer or raise pe.tcm.scratch_mib")
        return rows

    def _jobs(self, torch: RuntimeContext, p: ExpertPlacement, segments: dict[int, tuple[Runs, Runs]],
              tokens: int) -> dict:
        """``(cube, pe) -> jobs`` from each local expert's (source runs, output runs); the shared expert reads
        all ``tokens`` rows of the rank's own tokens."""
        limit = self._chunk_rows(torch, p)
        plan: dict = {}
        for slot in range(p.slots):
            jobs = []
            for block, (local, part) in enumerate(p.jobs_of(slot)):
                if local == p.routed_per_rank:  # the shared expert
                    src, out, source, output = ((0, tokens),), ((0, tokens),), 0, 1
                elif local in segments:
                    (src, out), source, output = segments[local], 1, 0
                else:
                    continue
                chunks = tuple(ExpertChunk(sum(c for _, c in a), a, b)
                               for a, b in zip(split_runs(src, limit), split_runs(out, limit), strict=True))
                jobs.append(ExpertJob(block, part, p.tp, source, output, chunks))
            if jobs:
                plan[(slot // p.pes, slot % p.pes)] = tuple(jobs)
        return plan

    def _combine_blocks(self, torch: RuntimeContext, routing: Routing, plan: DispatchPlan,
                        back_rows: np.ndarray | None) -> list:
        """Token blocks of the combine and, per block and slot, the runs of gathered rows: slot-major (row
        ``j M + t``, one run per slot) when ``back_rows`` is None, else row ``back_rows[i]`` for the ``i``-th row
        of ``plan``'s dispatch order (a dropped slot then reads row 0 with weight 0); None for every slot when
        nothing was kept."""
        m, k, h = routing.tokens, routing.k, self.weights.gate.shape[1]
        rows = max(1, int(torch.spec.pe.tcm.scratch_mib * (1 << 20)) // (2 * 4 * 4 * h))
        pos = np.zeros(m * k, dtype=np.int64)
        if back_rows is not None:
            pos[plan.order] = back_rows
        blocks = []
        for t0 in range(0, m, rows):
            t1 = min(m, t0 + rows)
            if plan.rows == 0:
                slots = (None,) * k
            elif back_rows is None:
                slots = tuple(((j * m + t0, t1 - t0),) for j in range(k))
            else:
                slots = tuple(tuple(row_runs(pos[np.arange(t0, t1) * k + j])) for j in range(k))
            blocks.append((t0, t1 - t0, slots))
        return blocks

    def _weights_column(self, torch: RuntimeContext, routing: Routing):
        """``[k * M, 1]`` float32, slot-major: each kept slot's weight, 0 for a dropped one."""
        col = np.where(routing.keep, routing.weights, np.float32(0)).astype(np.float32).T.reshape(-1, 1)
        return torch.from_numpy(np.ascontiguousarray(col), ONE_PE)

    # ------------------------------------------------------------------ one rank, several ranks
    def _experts_and_combine(self, torch, xt, source, routed_out, weights, placement, routing, plan, segments,
                             gathered, owned, phases, exchange=None, back_rows=None):
        m, h = xt.shape
        shared_out = None
        if placement.shared:
            shared_out = torch.empty((m, h), "float32", ONE_PE)
            owned.append(shared_out)
        jobs = self._jobs(torch, placement, segments, m)
        if jobs:
            out_arg = routed_out if routed_out is not None else shared_out
            args = (*weights, by_address(xt), by_address(source), by_address(out_arg),
                    by_address(shared_out if shared_out is not None else out_arg), jobs, h,
                    self.weights.gate.shape[2] // placement.tp)
            self._step(phases, "experts", lambda: torch.wait(torch.launch("moe_experts", expert_kernel, *args)))
        if exchange is not None:
            gathered = exchange()
        wcol = self._weights_column(torch, routing)
        z = torch.empty((m, h), "float32", ONE_PE)
        owned += [wcol, z]
        blocks = self._combine_blocks(torch, routing, plan, back_rows)
        args = (z, gathered if gathered is not None else z, wcol, shared_out if shared_out is not None else z,
                blocks, m, placement.shared)
        self._step(phases, "combine", lambda: torch.wait(torch.launch("moe_combine", combine_kernel, *args)))
        return z

    def _single(self, torch, xt, weights, placement, routing, plan, owned, phases):
        """One rank: experts read the tokens in place and write each row where the combine wants it, slot-major
        (row ``j M + t`` for token ``t``'s slot ``j``; zeros where a slot was dropped)."""
        m = routing.tokens
        segments = {}
        starts = np.concatenate([[0], np.cumsum(plan.rows_per_expert)])
        for e in np.flatnonzero(plan.rows_per_expert):
            a, b = int(starts[e]), int(starts[e + 1])
            dest = plan.slot_of_row[a:b] * m + plan.token_of_row[a:b]
            segments[int(e)] = (tuple(row_runs(plan.token_of_row[a:b])), tuple(row_runs(dest)))
        routed = None
        if plan.rows:
            routed = torch.zeros((routing.k * m, xt.shape[1]), "float32", ONE_PE)
            owned.append(routed)
        return self._experts_and_combine(torch, xt, xt, routed, weights, placement, routing, plan, segments, routed,
                                         owned, phases)

    def _exchange(self, torch, dist, rank, world, call, xt, weights, placement, routing, plan, owned,
                  phases):
        """Several ranks: counts, permute and dispatch, experts on the received rows, combine exchange."""
        per_rank = placement.routed_per_rank
        mine = plan.rows_per_expert.astype(np.int64)
        self._counts.setdefault(call, {})[rank] = mine
        counts_in = torch.from_numpy(mine.reshape(world, per_rank).astype(np.int32), ONE_PE)
        counts_out = torch.empty((world, per_rank), "int32", ONE_PE)
        owned += [counts_in, counts_out]
        self._step(phases, "counts", lambda: dist.all_to_all_single(counts_out, counts_in))
        table = self._counts[call]  # complete: the exchange has returned, so every rank has published
        received = np.stack([table[s][rank * per_rank:(rank + 1) * per_rank] for s in range(world)])
        self._reads[call] = self._reads.get(call, 0) + 1
        if self._reads[call] == world:
            del self._counts[call], self._reads[call]
        if torch.data and not np.array_equal(torch.peek(counts_out), received):
            raise MoeRoutingError(f"moe: rank {rank} received counts {torch.peek(counts_out).tolist()} but the ranks' "
                                  f"plans give {received.tolist()}")
        sends, receives = plan.send_counts.astype(np.int64), received.sum(axis=1)
        # a tensor has at least one row: a rank with nothing to send or receive sends itself one unused row
        pad = int(not plan.rows or not receives.sum())
        cut = int(sends[:rank + 1].sum())  # the pad row follows the rows this rank sends itself
        sends[rank] += pad
        receives[rank] += pad
        back_rows = np.arange(plan.rows) + pad * (np.arange(plan.rows) >= cut)
        h = xt.shape[1]
        send = torch.empty((int(sends.sum()), h), "float16", ONE_PE)
        recv = torch.empty((int(receives.sum()), h), "float16", ONE_PE)
        owned += [send, recv]
        starts = np.concatenate([[0], np.cumsum(sends)])
        pieces = []
        limit = max(1, int(torch.spec.pe.tcm.scratch_mib * (1 << 20)) // (4 * h))
        real_starts = np.concatenate([[0], np.cumsum(plan.send_counts)])
        for d in range(world):
            a0, b0 = int(real_starts[d]), int(real_starts[d + 1])
            at = int(starts[d])
            for runs in split_runs(tuple(row_runs(plan.token_of_row[a0:b0])), limit):
                n = sum(c for _, c in runs)
                pieces.append((runs, at, n))
                at += n
        self._step(phases, "permute", lambda: torch.wait(torch.launch("moe_permute", permute_kernel, send, xt,
                                                                       pieces)))
        self._step(phases, "dispatch", lambda: dist.all_to_all_single(recv, send, receives.tolist(),
                                                                      sends.tolist()))
        src_starts = np.concatenate([[0], np.cumsum(receives)])
        segments = {}
        for e in range(per_rank):
            runs = []
            for s in range(world):
                before = int(received[s, :e].sum())
                if received[s, e]:
                    runs.append((int(src_starts[s]) + before, int(received[s, e])))
            if runs:
                segments[e] = (tuple(runs), tuple(runs))
        routed = torch.empty((int(receives.sum()), h), "float32", ONE_PE)
        back = torch.empty((int(sends.sum()), h), "float32", ONE_PE)
        owned += [routed, back]

        def exchange():
            self._step(phases, "combine_exchange", lambda: dist.all_to_all_single(back, routed, sends.tolist(),
                                                                                  receives.tolist()))
            return back

        return self._experts_and_combine(torch, xt, recv, routed, weights, placement, routing, plan, segments, None,
                                         owned, phases, exchange, back_rows)
