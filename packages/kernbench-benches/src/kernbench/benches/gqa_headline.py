"""The four headline panels of the fused-GQA study, each with its latency, op mix and engine occupancy.

All panels use G = 8 query heads on one KV head, d = 64, seeded random float16 inputs:

- ``prefill_c1``: prefill, one user, Tq = 4, S = 16, ``short`` on one PE;
- ``prefill_c4_ring``: prefill, four users, Tq = 4, S = 16, ``ring`` over 4 cubes per user;
- ``decode_c1_p8``: decode, one user, S = 64, ``short`` over the 8 PEs of one cube (a chain reduce);
- ``decode_c4_p8``: decode, four users, S = 128, ``cube_sp_pe_sp`` over 2 cubes x 8 PEs per user (the
  two-level reduce inside each user's group).

Parameters: ``PANELS`` (``-p PANELS=...`` or ``GQA_PANELS``; comma-separated panel names,
default all four). Metrics, per panel
``<panel>.``: ``latency_ns`` (first PE start to last PE end of the panel's launches),
``pes_active``, ``ipcq_intra_cube``, ``ipcq_inter_cube``, ``kv_bytes``, ``op.*`` (gemm, math,
dma_read, dma_write, ipcq_copy) and ``occupancy_ns.*`` (pe_dma, pe_fetch_store, pe_gemm,
pe_math, pe_cpu). With ``--data`` every panel is checked against numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.layers.attention import AttentionResult, gqa_decode, gqa_prefill
from kernbench.layers.attention.benchkit import check, inputs, report
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param


@dataclass(frozen=True)
class Panel:
    """One headline panel: the call (``decode`` or ``prefill``), users, query rows, keys and placement."""

    name: str
    kind: str
    users: int
    tq: int
    s: int
    placement: str
    pes: int
    cubes: int


PANELS = (
    Panel("prefill_c1", "prefill", 1, 4, 16, "short", 1, 1),
    Panel("prefill_c4_ring", "prefill", 4, 4, 16, "ring", 1, 4),
    Panel("decode_c1_p8", "decode", 1, 1, 64, "short", 8, 1),
    Panel("decode_c4_p8", "decode", 4, 1, 128, "cube_sp_pe_sp", 8, 2),
)


def run_panel(torch, panel: Panel) -> AttentionResult:
    """Run one panel on ``torch`` (G = 8, one KV head, d = 64); checks the numbers in data mode."""
    q, k, v = inputs(panel.users, 8, 1, panel.tq, panel.s, 64)
    if panel.kind == "prefill":
        result = gqa_prefill(torch, q, k, v, mode=panel.placement, pes=panel.pes, cubes=panel.cubes)
    else:
        result = gqa_decode(torch, q, k, v, partition=panel.placement, pes=panel.pes, cubes=panel.cubes)
    if torch.data:
        check(result, q, k, v, causal=panel.kind == "prefill", what=f"gqa-headline {panel.name}")
    return result


PARAMS = (Param("PANELS", str, ",".join(p.name for p in PANELS), "comma-separated panel names to run",
                env="GQA_PANELS"),)


#: What ``kernbench run`` prints under the panel table (the header's latency spans every panel and the deployment).
METRICS = {"latency_ns": "each panel's own window: first PE start to last PE end of the panel's launches"}


@bench(name="gqa-headline", description="the fused-GQA study's four headline panels", params=PARAMS,
       metrics=METRICS, metric_rows="panel")
def run(torch, p):
    """Run the selected panels one after another on the same device and report each one's metrics."""
    known = {panel.name: panel for panel in PANELS}
    names = [n for n in p.PANELS.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise BenchError(f"PANELS={p.PANELS!r}: unknown panel(s) {', '.join(unknown)}; "
                         f"use a comma-separated subset of {', '.join(known)}")
    for name in names:
        report(torch, run_panel(torch, known[name]), prefix=f"{name}.")
