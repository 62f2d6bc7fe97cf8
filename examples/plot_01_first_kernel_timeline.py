"""
A first kernel's timeline
=========================

The blocking ``mm`` kernel of :doc:`/kernels` (load two f16 matrices into the
PE's TCM, multiply them on the GEMM engine, store the result), launched on one
PE, and then the same product as one composite command. Every operation the
simulator timed lands in the op log; this script draws the operations of the
PE's engines on a time axis, one row per engine.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from kernbench.runtime import DPPolicy, session


def mm(tl, a, b, c):
    tl.store(c, tl.dot(tl.load(a), tl.load(b)))


def mm_composite(tl, a, b, c):
    tl.wait(tl.composite(a, b, c))


rng = np.random.default_rng(0)
one_pe = DPPolicy(num_cubes=1, num_pes=1)  # cube 0, PE 0 of SIP 0
with session(data=True) as torch:
    a = torch.from_numpy(rng.standard_normal((128, 64)).astype(np.float16), one_pe)
    b = torch.from_numpy(rng.standard_normal((64, 96)).astype(np.float16), one_pe)
    c = torch.empty((128, 96), "float32", one_pe)
    windows = {}
    for name, kernel in (("mm", mm), ("mm_composite", mm_composite)):
        start = torch.now_ns
        result = torch.wait(torch.launch(name, kernel, a, b, c))
        windows[name] = (start, torch.now_ns, result.pe_exec_ns["sip0.cube0.pe0"])
    records = [r for r in torch.oplog.records if r.component_id.startswith("sip0.cube0.pe0.")]

# %%
# Each bar is one op-log record of PE 0's blocks; the shaded spans are the two launches.

engines = sorted({r.component_id.rsplit(".", 1)[1] for r in records})
ops = sorted({r.op_name for r in records})
colours = dict(zip(ops, plt.get_cmap("tab10").colors, strict=False))
fig, ax = plt.subplots(figsize=(9, 0.45 * len(engines) + 1.6), layout="constrained")
for (name, (t0, t1, _)), shade in zip(windows.items(), ("0.95", "0.87"), strict=True):
    ax.axvspan(t0, t1, color=shade, zorder=0)
    ax.text((t0 + t1) / 2, len(engines) - 0.4, name, ha="center", va="bottom", fontsize=9)
for r in records:
    row = engines.index(r.component_id.rsplit(".", 1)[1])
    ax.barh(row, max(r.t_end - r.t_start, 0.5), left=r.t_start, height=0.6, color=colours[r.op_name])
ax.set_yticks(range(len(engines)), engines)
ax.set_ylim(-0.6, len(engines) + 0.3)
ax.set_xlabel("simulated time (ns)")
ax.legend([plt.Rectangle((0, 0), 1, 1, color=colours[o]) for o in ops], ops, fontsize=8, ncols=min(len(ops), 6),
          loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
ax.set_title("sip0.cube0.pe0: op log of two launches")
plt.show()

for name, (t0, t1, body) in windows.items():
    print(f"{name}: launched at {t0:.1f} ns, done at {t1:.1f} ns, kernel body {body:.1f} ns")
