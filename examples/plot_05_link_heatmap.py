"""
A link heatmap
==============

Which links of a SIP does a sharded workload load? This script places an f16
activation row-wise over the 16 cubes of SIP 0 (PE 0 of each) and a weight on
every one of those PEs, runs a GEMM kernel on all of them, and colours every
directed link of the SIP by its busy time as a share of the run window
(:func:`kernbench.topology.heatmap.render_heatmap`, the drawing behind
``kernbench links --heatmap`` and the study heatmaps). The host writes every
shard through the IO chiplet and the cube it attaches to; the five busiest
links of the run are printed below the figure.
"""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from kernbench.runtime import DPPolicy, session
from kernbench.topology.heatmap import render_heatmap


def project(tl, x, w, y):
    tl.store(y, tl.dot(tl.load(x), tl.load(w)))


rng = np.random.default_rng(0)
rows = DPPolicy(cube="row_wise", num_pes=1)  # each cube's PE 0 holds its own rows
everywhere = DPPolicy(num_pes=1)  # replicated on PE 0 of every cube
with session() as torch:
    cubes = torch.graph.spec.cubes_per_sip
    x = torch.from_numpy(rng.standard_normal((64 * cubes, 128)).astype(np.float16), rows)
    w = torch.from_numpy(rng.standard_normal((128, 64)).astype(np.float16), everywhere)
    y = torch.empty((64 * cubes, 64), "float32", rows)
    torch.wait(torch.launch("project", project, x, w, y))
    window_ns = torch.now_ns
    links = torch.link_stats()  # every directed link that carried bytes
    graph = torch.graph

values = {(r.src, r.dst): r.utilisation for r in links}
for r in sorted(links, key=lambda r: -r.utilisation)[:5]:
    print(f"{r.src} -> {r.dst}: {100 * r.utilisation:.1f} % of {window_ns:.1f} ns, {r.bytes:,} bytes")

# %%
# ``render_heatmap`` draws with matplotlib's object API (no pyplot), so the figure is shown here as an image.

heatmap, info = render_heatmap(graph, values, title="deploy + GEMM on 16 cubes, SIP 0", scope="sip", sip=0)
buffer = io.BytesIO()
heatmap.savefig(buffer, format="png", dpi=110)
buffer.seek(0)
image = plt.imread(buffer)
fig, ax = plt.subplots(figsize=(image.shape[1] / 110, image.shape[0] / 110), layout="constrained")
ax.imshow(image)
ax.set_axis_off()
plt.show()
print(f"{info.traffic} links carried bytes, {info.traffic_drawn} of them drawn in SIP 0")
