"""Virtual addressing across shards: every PE reads its neighbour's shard through its MMU.

A row-wise sharded tensor X lives on ``CUBES`` cubes x ``PES`` PEs (``VA_CUBES``, ``VA_PES``;
defaults 2 x 4), ``ROWS`` rows of ``COLS`` f16 values per PE (``VA_ROWS``, ``VA_COLS``; defaults
64 x 128). PE ``i`` reads shard
``i+1`` (wrapping) with ``tl.global_ref`` block addressing and writes it to its own shard of Y.
With ``--data`` the bench checks Y == roll(X) and fails if any element differs.
"""

from __future__ import annotations

import numpy as np

from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param


def neighbour_copy(tl, x, y):
    """Copy the next program's rows of the global tensor X into this PE's shard of Y."""
    pe, cube = tl.program_id(0), tl.program_id(1)
    n_pe, n_cube = tl.num_programs(0), tl.num_programs(1)
    me = cube * n_pe + pe
    rows = y.shape[0]
    src = (me + 1) % (n_pe * n_cube)
    whole = tl.global_ref(x)
    tl.store(y, tl.load(whole[src * rows:(src + 1) * rows, :]))


PARAMS = (
    Param("CUBES", int, 2, "cubes holding X", lo=1, hi=32, env="VA_CUBES"),
    Param("PES", int, 4, "PEs per cube holding X", lo=1, hi=32, env="VA_PES"),
    Param("ROWS", int, 64, "rows of X per PE", lo=1, hi=4096, env="VA_ROWS"),
    Param("COLS", int, 128, "columns of X (f16)", lo=1, hi=4096, env="VA_COLS"),
)


@bench(name="va-offset-verify", description="each PE reads its neighbour's shard by virtual address", params=PARAMS)
def run(torch, p):
    """Deploy X and Y row-wise, run the neighbour copy, verify in data mode."""
    cubes, pes = p.CUBES, p.PES
    rows, cols = p.ROWS, p.COLS
    n = cubes * pes
    policy = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=cubes, num_pes=pes)
    r, c = np.indices((n * rows, cols))
    x_np = ((r * 131 + c) % 2003).astype(np.float16)  # exact in f16; rows differ for up to 2003 rows
    x = torch.from_numpy(x_np, policy)
    y = torch.empty((n * rows, cols), "float16", policy)
    torch.wait(torch.launch("neighbour-copy", neighbour_copy, x, y))
    if torch.data:
        got = torch.peek(y)
        want = np.roll(x_np, -rows, axis=0)
        if not np.array_equal(got, want):
            bad = int(np.argwhere(got != want)[0][0])
            raise BenchError(f"va-offset-verify: row {bad} of Y differs from X row {(bad + rows) % (n * rows)}")
