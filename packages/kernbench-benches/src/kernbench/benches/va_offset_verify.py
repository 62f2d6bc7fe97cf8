"""Virtual addressing across shards: every PE reads its neighbour's shard through its MMU.

A row-wise sharded tensor X lives on ``VA_CUBES`` cubes x ``VA_PES`` PEs (defaults 2 x 4),
``VA_ROWS`` rows of ``VA_COLS`` f16 values per PE (defaults 64 x 128). PE ``i`` reads shard
``i+1`` (wrapping) with ``tl.global_ref`` block addressing and writes it to its own shard of Y.
With ``--data`` the bench checks Y == roll(X) and fails if any element differs.
"""

from __future__ import annotations

import numpy as np

from kernbench.benches._params import env_int
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, bench


def neighbour_copy(tl, x, y):
    """Copy the next program's rows of the global tensor X into this PE's shard of Y."""
    pe, cube = tl.program_id(0), tl.program_id(1)
    n_pe, n_cube = tl.num_programs(0), tl.num_programs(1)
    me = cube * n_pe + pe
    rows = y.shape[0]
    src = (me + 1) % (n_pe * n_cube)
    whole = tl.global_ref(x)
    tl.store(y, tl.load(whole[src * rows:(src + 1) * rows, :]))


@bench(name="va-offset-verify", description="each PE reads its neighbour's shard by virtual address")
def run(torch):
    """Deploy X and Y row-wise, run the neighbour copy, verify in data mode."""
    cubes, pes = env_int("VA_CUBES", 2), env_int("VA_PES", 4)
    rows, cols = env_int("VA_ROWS", 64), env_int("VA_COLS", 128)
    n = cubes * pes
    policy = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=cubes, num_pes=pes)
    r, c = np.indices((n * rows, cols))
    x_np = ((r * 131 + c) % 2003).astype(np.float16)  # exact in f16; rows differ for up to 2003 rows
    x = torch.from_numpy(x_np, policy)
    y = torch.empty((n * rows, cols), "float16", policy)
    torch.wait(torch.launch("neighbour-copy", neighbour_copy, x, y))
    if torch.data:
        got = torch.to_numpy(y)
        want = np.roll(x_np, -rows, axis=0)
        if not np.array_equal(got, want):
            bad = int(np.argwhere(got != want)[0][0])
            raise BenchError(f"va-offset-verify: row {bad} of Y differs from X row {(bad + rows) % (n * rows)}")
