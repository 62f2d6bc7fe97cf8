"""The α–β model of the hierarchical all-reduce (``lrab_hierarchical_allreduce``), from constants and step counts.

The latency of one all-reduce of ``N`` bytes per PE is the sum of the steps
on its critical path, each a fixed part plus a per-byte part (ns, bytes,
GB/s = bytes per ns; ``c`` is one command's dispatch on the PE_CPU,
``fixed_cycles / clock + cpu_overhead``; ``μ(N) = ⌈N/2 / lanes⌉ / clock`` is
one math pass over ``N`` bytes of f16):

* **message** ``m(N) = c + o + N/B_tcm + α_w + N/B_in + α_r + N/B_out``: the
  send's dispatch and the scheduler and IPCQ overheads ``o``, the staging
  copy at TCM bandwidth, the DMA write into the peer's ring (route ``α_w``,
  narrowest of the route and the ring memory ``B_in``), then the receiver's
  copy out of the ring (``α_r``, ``B_out``: TCM read bandwidth for TCM rings,
  the SRAM link for SRAM, the PE's pseudo-channels for HBM);
* **accumulate** ``a(N) = 2c + 3N/B_r + 2N/B_w + 2μ(N)``: ``acc + buf``
  (fetch both, add, store) and the copy back into ``acc``;
* **prologue** at every cube ``p(N) = 2c + max(load(N), μ(N) + N/B_w)``: the
  shard's DMA read from HBM overlaps zeroing the receive buffer;
* **epilogue** ``e(N) = c + α_hbm + N/B_hbm``: the store back to HBM.

Step counts follow the algorithm on a ``w × h`` cube mesh rooted at
``((w−1)//2, (h−1)//2)`` and the SIP grid: the row and column reductions
each put ``k = max(r, len−1−r)`` messages and accumulates in series; the
broadcast repeats the messages without accumulates; before the inter-SIP
exchange the root zeroes three more buffers and copies its sum once per
exchange phase. An exchange phase over ``n`` ranks with wrap-around runs
``⌊n/2⌋`` steps eastwards and ``⌊(n−1)/2⌋`` westwards; without wrap-around
``n − 1`` each way, a rank forwarding only what still has a rank to reach.
Step ``s`` costs one (inter-SIP) message plus as many accumulates as the
busiest rank receives in that step (its two messages land while it works).
A row phase then a column phase of the SIP grid, each wrapping around as the
SIP topology strategy says (``ring_1d`` is one row, so its column phase is
empty; ``torus_2d`` wraps both, ``mesh_2d_no_wrap`` neither).

Left out, so the measurement may differ: contention between concurrent
messages on shared links and on the sender's single comm write channel
(two sends in one exchange step serialise), the descriptor-size part of the
dispatch cost, and the look-ahead of lazy loads.

The study's schedule ablation runs a one-way exchange instead
(:mod:`kernbench.studies.allreduce_oneway`); :func:`predict` takes its step
counts from :func:`one_way_steps` when asked for ``schedule="one_way"``.

:func:`fit_alpha_beta` is the other way round: a least-squares line
``T(N) = α + βN`` through measured points, with its residuals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kernbench.ccl.neighbours import sip_grid, sip_strategy
from kernbench.studies.routes import read_route, write_route
from kernbench.topology import PathRouter, TopologyGraph
from kernbench.topology import naming as nm

ITEMSIZE = 2  # f16


@dataclass(frozen=True)
class AllReduceModel:
    """The model's prediction for one payload ``N``: ``total_ns``, its latency part ``alpha_ns = T(0)`` and
    per-byte part ``beta_ns_per_byte = (T(N) − T(0)) / N``, the step counts on the critical path, and the time
    its messages and its accumulates take (ns). ``exchange_messages`` and ``exchange_accumulates`` are the part
    of ``messages`` and ``accumulates`` spent in the exchange between SIPs (its serial steps are its messages)."""

    total_ns: float
    alpha_ns: float
    beta_ns_per_byte: float
    messages: int
    accumulates: int
    message_ns: float
    accumulate_ns: float
    exchange_messages: int = 0
    exchange_accumulates: int = 0


def exchange_steps(n: int, wrap: bool) -> list[int]:
    """Accumulates of the busiest rank in each step of one exchange phase over ``n`` ranks (one message each)."""
    if n == 1:
        return []
    steps_e, steps_w = (n // 2, (n - 1) // 2) if wrap else (n - 1, n - 1)
    out = []
    for s in range(1, max(steps_e, steps_w) + 1):
        busiest = 0
        for pos in range(n):
            recv_w = s <= steps_e and (wrap or pos - s >= 0)
            recv_e = s <= steps_w and (wrap or pos + s <= n - 1)
            busiest = max(busiest, int(recv_w) + int(recv_e))
        if busiest:
            out.append(busiest)
    return out


def one_way_steps(n: int, wrap: bool) -> list[int]:
    """Accumulates of the busiest rank in each step of the one-way exchange over ``n`` ranks: around a ring
    ``n − 1`` steps of one message and one accumulate each; along a line without wrap-around ``n − 1`` steps
    reducing towards its east end, then ``n − 1`` message-only steps broadcasting back."""
    if n == 1:
        return []
    return [1] * (n - 1) if wrap else [1] * (n - 1) + [0] * (n - 1)


#: The exchange schedules :func:`predict` knows: the shipped algorithm's, and the study's one-way ablation.
SCHEDULES = {"lrab": exchange_steps, "one_way": one_way_steps}


def _slot_node(kind: str, sip: int, cube: int, pe: int) -> str:
    if kind == "tcm":
        return nm.pe_block(sip, cube, pe, "pe_tcm")
    if kind == "sram":
        return nm.sram(sip, cube)
    return nm.hbm_ctrl(sip, cube, pe)


class _Terms:
    """The step costs as (fixed ns, ns per byte) pairs, plus the math passes (which round up to whole cycles)."""

    def __init__(self, graph: TopologyGraph, kind: str) -> None:
        spec = graph.spec
        router = PathRouter.shared(graph)  # the routes the simulated points of this topology searched already
        self.spec = spec
        pe = spec.pe
        self.c = pe.cost_model.fixed_cycles / pe.clock_ghz + pe.cpu_overhead_ns
        self.o = pe.scheduler_overhead_ns + pe.ipcq.overhead_ns
        self.b_r, self.b_w = pe.tcm.read_bw_gbs, pe.tcm.write_bw_gbs
        self.b_hbm = spec.channels_per_pe * spec.cube.hbm.bw_gbs / spec.cube.hbm.pseudo_channels
        flit, ctrl = spec.fabric.flit_bytes, spec.fabric.control_bytes
        w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
        self.w, self.h = w, h
        root = ((h - 1) // 2) * w + (w - 1) // 2
        neighbour = root + 1 if w > 1 else root + w
        slot_bw = {"tcm": self.b_w, "sram": math.inf, "hbm": self.b_hbm}[kind]  # SRAM: its link is on the route
        out_bw = {"tcm": self.b_r, "sram": math.inf, "hbm": self.b_hbm}[kind]

        def message(src: tuple[int, int], dst: tuple[int, int]) -> tuple[float, float]:
            dma = nm.pe_block(src[0], src[1], 0, "pe_dma")
            tcm = nm.pe_block(src[0], src[1], 0, "pe_tcm")
            slot = _slot_node(kind, dst[0], dst[1], 0)
            wr = write_route(graph, (tcm, *router.pe_dma_path(dma, slot)), flit)
            rdma = nm.pe_block(dst[0], dst[1], 0, "pe_dma")
            rtcm = nm.pe_block(dst[0], dst[1], 0, "pe_tcm")
            rd = read_route(graph, router.pe_dma_path(rdma, slot), rtcm, ctrl, flit)
            fixed = self.c + self.o + wr.alpha_ns + rd.alpha_ns
            per_byte = 1 / min(self.b_r, self.b_w) + 1 / min(wr.link_gbs, slot_bw) + 1 / min(rd.link_gbs, out_bw)
            return fixed, per_byte

        self.m_intra = message((0, neighbour), (0, root)) if w * h > 1 else (0.0, 0.0)  # one cube: no intra message
        self.m_inter = message((1, root), (0, root)) if spec.system.sips.count > 1 else (0.0, 0.0)
        dma, tcm, hbm = (nm.pe_block(0, root, 0, "pe_dma"), nm.pe_block(0, root, 0, "pe_tcm"),
                         nm.hbm_ctrl(0, root, 0))
        self.load = read_route(graph, router.pe_dma_path(dma, hbm), tcm, ctrl, flit)
        self.store = write_route(graph, (tcm, *router.pe_dma_path(dma, hbm)), flit)

    def mu(self, nbytes: int) -> float:
        """One math pass over ``nbytes`` of f16, ns."""
        return math.ceil(nbytes / ITEMSIZE / self.spec.pe.math_lanes) / self.spec.pe.clock_ghz


def predict(graph: TopologyGraph, nbytes: int, kind: str, schedule: str = "lrab") -> AllReduceModel:
    """The model's all-reduce latency for ``nbytes`` per PE with receive rings of ``kind`` on ``graph``, the
    SIPs exchanging by ``schedule`` (a key of :data:`SCHEDULES`)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown exchange schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")
    t = _Terms(graph, kind)
    spec = graph.spec
    world = spec.system.sips.count
    topo = sip_strategy(spec.system.sips.topology)
    k_row = max((t.w - 1) // 2, t.w - 1 - (t.w - 1) // 2)
    k_col = max((t.h - 1) // 2, t.h - 1 - (t.h - 1) // 2)
    phases: list[list[int]] = []
    copies = 0
    if world > 1:
        rows, cols = sip_grid(spec, world, topo)
        lines = topo.exchange_lines(rows, cols)
        phases = [SCHEDULES[schedule](n, wrap) for n, wrap in lines]
        # the root copies its sum once per exchange phase (lrab), or once per phase around a ring (one-way)
        copies = sum(1 for p, (_, wrap) in zip(phases, lines, strict=True)
                     if p and (schedule == "lrab" or wrap))
    inter_msgs = sum(len(p) for p in phases)
    inter_accs = sum(sum(p) for p in phases)
    intra_msgs = 2 * (k_row + k_col)   # reduction and broadcast
    accs = k_row + k_col + inter_accs
    zero_bufs = 3 if world > 1 else 0

    def parts(n: int) -> tuple[float, float, float]:
        """(total, messages, accumulates) at ``n`` bytes."""
        mu = t.mu(n)
        prologue = 2 * t.c + max(t.load.alpha_ns + n / min(t.load.link_gbs, t.b_hbm), mu + n / t.b_w)
        epilogue = t.c + t.store.alpha_ns + n / min(t.store.link_gbs, t.b_hbm)
        messages = intra_msgs * (t.m_intra[0] + n * t.m_intra[1]) + inter_msgs * (t.m_inter[0] + n * t.m_inter[1])
        accumulates = accs * (2 * t.c + 3 * n / t.b_r + 2 * n / t.b_w + 2 * mu)
        root = zero_bufs * (t.c + mu + n / t.b_w) + copies * (t.c + n / t.b_r + mu + n / t.b_w)
        return prologue + messages + accumulates + root + epilogue, messages, accumulates

    alpha = parts(0)[0]
    value, messages, accumulates = parts(nbytes)
    return AllReduceModel(value, alpha, (value - alpha) / nbytes, intra_msgs + inter_msgs, accs, messages,
                          accumulates, inter_msgs, inter_accs)


@dataclass(frozen=True)
class LineFit:
    """A least-squares line ``T(N) = alpha_ns + beta_ns_per_byte · N`` through measured points, and how far
    each point lies from it: ``residuals`` are relative, ``(fit − measured) / measured``, in the points' order;
    ``max_rel`` is the largest of their magnitudes and ``rms_rel`` their root mean square."""

    alpha_ns: float
    beta_ns_per_byte: float
    residuals: tuple[float, ...]
    max_rel: float
    rms_rel: float


def fit_alpha_beta(nbytes: Sequence[float], measured_ns: Sequence[float]) -> LineFit:
    """Fit ``T(N) = α + βN`` to ``measured_ns`` at payloads ``nbytes`` by ordinary least squares
    (``numpy.linalg.lstsq`` on the absolute latencies); at least two distinct payloads, positive latencies."""
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(measured_ns, dtype=float)
    if n.shape != t.shape or n.ndim != 1 or len(np.unique(n)) < 2:
        raise ValueError("fit_alpha_beta: need one latency per payload and at least two distinct payloads")
    if not (np.all(np.isfinite(t)) and np.all(t > 0)):
        raise ValueError("fit_alpha_beta: latencies must be positive and finite")
    design = np.column_stack([np.ones_like(n), n])
    (alpha, beta), *_ = np.linalg.lstsq(design, t, rcond=None)
    rel = (design @ np.array([alpha, beta]) - t) / t
    return LineFit(float(alpha), float(beta), tuple(float(r) for r in rel), float(np.max(np.abs(rel))),
                   float(np.sqrt(np.mean(rel ** 2))))
