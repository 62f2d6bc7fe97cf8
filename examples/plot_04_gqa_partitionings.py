"""
GQA decode partitionings
========================

One user's grouped-query attention decode step (8 query heads sharing one KV
head, 64-wide heads) spread over 4 cubes × 4 PEs of the default topology in
four ways: the keys split over cubes or replicated on every cube, and over a
cube's PEs split (sequence parallel) or replicated (tensor parallel, one PE
attends). Small sequence lengths keep the script quick; the long-context
sweep over 8 cubes × 8 PEs is in the :doc:`GQA study </studies/gqa>`.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from kernbench.layers.attention import gqa_decode
from kernbench.layers.attention.benchkit import inputs
from kernbench.runtime import session

PARTITIONS = ("cube_sp_pe_tp", "cube_repl_pe_tp", "cube_repl_pe_sp", "cube_sp_pe_sp")
KEYS = (1024, 4096)
CUBES, PES, HQ, D = 4, 4, 8, 64

latency = {}
for s in KEYS:
    q, k, v = inputs(1, HQ, 1, 1, s, D)  # one user, 8 query heads, 1 KV head, one new token, S keys
    for part in PARTITIONS:
        with session() as torch:  # timing mode
            r = gqa_decode(torch, q, k, v, partition=part, pes=PES, cubes=CUBES, tile=64)
        latency[part, s] = r.latency_ns
        print(f"S={s:5d} {part:16s} {r.latency_ns:9.1f} ns on {r.pes_active} PEs, "
              f"{r.ipcq_messages['intra_cube']} intra-cube and {r.ipcq_messages['inter_cube']} inter-cube messages")

# %%
# Each bar is one simulated decode step; its label is the measured latency.

x = np.arange(len(PARTITIONS))
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
for i, s in enumerate(KEYS):
    bars = ax.bar(x + (i - 0.5) * 0.38, [latency[p, s] / 1000 for p in PARTITIONS], 0.38, label=f"S = {s}")
    ax.bar_label(bars, fmt="%.1f", fontsize=8)
ax.set_xticks(x, PARTITIONS)
ax.set_ylabel("decode latency (µs)")
ax.set_title(f"GQA decode, one user on {CUBES} cubes × {PES} PEs")
ax.legend(title="keys")
plt.show()
