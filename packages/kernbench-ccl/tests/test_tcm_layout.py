"""IPCQ receive rings in the TCM and a composite's staging buffers never share bytes (the TCM layout)."""

from __future__ import annotations

import numpy as np

from kernbench.ccl import install
from kernbench.ccl.neighbours import intra_cube
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology.address import decode

# Default tile tm 32 x tn 32 x tk 64: six staging buffers (a, b, c, two each) of the largest block, 32 * 64
# elements x 4 B.
STAGING_END = 6 * 32 * 64 * 4


def _mm(tl, a, b, c):
    tl.wait(tl.composite(a, b, c))  # a and b stay in HBM: every tile is DMA-read into staging


def test_rings_and_staging_are_disjoint_and_the_composite_uses_only_staging(load_graph):
    ctx = RuntimeContext(load_graph("topology"))
    inst = install(ctx, intra_cube(ctx.spec, 0, 0), "tcm")
    rings = [(decode(addr.encode()).offset, decode(addr.encode()).offset + n)
             for _, addr, n in inst.rings if addr.pe == 0 and addr.cube == 0]
    assert rings and all(lo >= STAGING_END for lo, _ in rings)
    one = DPPolicy(num_cubes=1, num_pes=1)
    a = ctx.from_numpy(np.ones((64, 96), np.float16), one)
    b = ctx.from_numpy(np.ones((96, 128), np.float16), one)
    c = ctx.empty((64, 128), "float32", one)
    ctx.wait(ctx.launch("mm", _mm, a, b, c))
    staged = []
    for r in ctx.oplog.records:
        if r.component_id == "sip0.cube0.pe0.pe_dma" and r.op_name in ("dma_read", "dma_write"):
            side = decode(r.params["dst"] if r.op_name == "dma_read" else r.params["src"])
            if side.kind == "tcm":
                staged.append((side.offset, side.offset + r.params["nbytes"]))
    # 2 row x 4 column x 2 K blocks = 16 tiles, each reading an A and a B block; 2 x 4 output blocks written back
    assert len(staged) == 16 * 2 + 8
    assert all(lo >= 0 and hi <= STAGING_END for lo, hi in staged)
    assert not any(lo < r_hi and r_lo < hi for lo, hi in staged for r_lo, r_hi in rings)
    assert len({lo for lo, _ in staged}) == 6  # a, b and c, double-buffered
