"""
GEMM efficiency of one PE
=========================

A small sweep of the composite GEMM (``tl.composite``) on one PE of the default
topology: a few shapes, each with A and B streamed from HBM per tile
(``ref_ref``) and loaded into TCM first (``load_load``). MAC efficiency is the
real multiply-accumulates over what the GEMM engine could have done at its peak
rate during the composite's own op-log record. The full sweep, with the
analytic pipeline model beside every point, is the :doc:`GEMM study
</studies/gemm>`.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from kernbench.benches.matmul_composite import composite_kernel
from kernbench.runtime import DPPolicy, session

SHAPES = ((32, 32, 32), (32, 128, 32), (32, 128, 128), (128, 128, 128), (256, 256, 256))
VARIANTS = ("ref_ref", "load_load")
one_pe = DPPolicy(num_cubes=1, num_pes=1)

efficiency = {v: [] for v in VARIANTS}
for variant in VARIANTS:
    for m, k, n in SHAPES:
        with session() as torch:  # timing mode: no values, only time
            peak_macs_per_ns = torch.graph.spec.pe.gemm.peak_tflops * 1e3 / 2
            a, b, c = (torch.empty(s, "float16", one_pe) for s in ((m, k), (k, n), (m, n)))
            torch.wait(torch.launch("gemm", composite_kernel(variant), a, b, c))
            (comp,) = [r for r in torch.oplog.records if r.op_name == "composite"]
        t_ns = comp.t_end - comp.t_start
        efficiency[variant].append(m * k * n / (peak_macs_per_ns * t_ns))
        print(f"{variant:9s} {m:4d}x{k:4d}x{n:4d}: composite {t_ns:8.1f} ns, "
              f"MAC efficiency {100 * efficiency[variant][-1]:5.1f} %")

# %%
# One bar per simulated composite; the label is its measured efficiency in per cent.

x = np.arange(len(SHAPES))
fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
for i, variant in enumerate(VARIANTS):
    bars = ax.bar(x + (i - 0.5) * 0.38, [100 * e for e in efficiency[variant]], 0.38, label=variant)
    ax.bar_label(bars, fmt="%.0f", fontsize=8)
ax.set_xticks(x, [f"{m}×{k}×{n}" for m, k, n in SHAPES])
ax.set_xlabel("M×K×N (float16)")
ax.set_ylabel("MAC efficiency (%)")
ax.set_title("Composite GEMM on one PE")
ax.legend(title="operand staging")
plt.show()
