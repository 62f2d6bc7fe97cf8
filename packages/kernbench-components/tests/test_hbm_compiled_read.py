"""The HBM controller's read service in C (kernbench-accel's ``serve_read``, ADR 0046) is ``HbmCtrl._read``'s
Python steps.

``HbmCtrl._read`` hands a whole read command to ``serve_read`` when the engine runs on the compiled calendar.
Here two controllers serve the same reads from the same channel state, one with the compiled service and one with
it switched off, and everything they hand on is compared with ``==`` on floats: the reply's ``(r0, spacing)`` per
packet, the channel list element by element, and the op-log row (its end is the latest ready time). Reads are
1 byte, a burst, a burst + 1, unaligned, 2-D with and without gaps between rows, on idle and busy channels (busy
channels are what makes the re-pacing branches run: over these cases the Python steps hold a packet's tail with
a smaller spacing about 1,300 times and pace by the link about 4,700 times), in six geometries (flits narrower
and wider than bursts, straddling them, packets of one flit). The controller is then held to its per-flit statement by
``test_hbm_read_pacing``. Skipped without kernbench-accel, unless ``KERNBENCH_REQUIRE_ACCEL`` is set (CI).
"""

from __future__ import annotations

import os
import random
from types import SimpleNamespace

import pytest
from components_testkit import HBM_GEOMETRIES, HbmEngine, read_cmd

from kernbench.components.memory import LATE_NS, HbmCtrl

try:
    from kernbench.accel._calendar import serve_read
except ImportError:
    if os.environ.get("KERNBENCH_REQUIRE_ACCEL"):
        raise
    pytest.skip("kernbench-accel is not installed", allow_module_level=True)

#: the shared geometries, and packets of one flit
GEOMETRIES = [*HBM_GEOMETRIES, (48, 256, 4, 48, 7.0)]


def _hbm(geometry, free: list[float], compiled: bool) -> HbmCtrl:
    flit, burst, channels, packet, bw = geometry
    node = SimpleNamespace(id="hbm", type="hbm_ctrl", overhead_ns=7.5,
                           attrs={"channels": channels, "burst_bytes": burst, "channel_bw_gbs": bw})
    ctrl = HbmCtrl(HbmEngine("packet", flit, packet), node)
    ctrl.free = list(free)
    ctrl.serve_read = serve_read if compiled else None
    return ctrl


def _reads(rng: random.Random, geometry):
    """A few reads in a row on one controller (the channel state carries over), as a point's reads are."""
    flit, burst, _, packet, _ = geometry
    for _ in range(4):
        nbytes = rng.choice([1, flit, burst, burst + 1, packet, packet + 1, 3 * packet - 5, rng.randrange(1, 40_000)])
        addr = rng.choice([0, 13, burst * rng.randrange(100), rng.randrange(1 << 20), burst - 1])
        row_bytes = pitch = 0
        if rng.random() < 0.4:  # a 2-D block: rows of row_bytes, pitch apart
            row_bytes = rng.choice([32, 64, 100, 128, 256, 1000, flit + 1])
            pitch = row_bytes * rng.choice([1, 2, 8, 64]) + rng.choice([0, 64])
        yield read_cmd(addr, nbytes, row_bytes, pitch), rng.uniform(0.0, 2000.0)


@pytest.mark.parametrize("seed", range(500))
def test_serve_read_is_the_python_read_bit_for_bit(seed):
    rng = random.Random(seed)
    geometry = GEOMETRIES[seed % len(GEOMETRIES)]
    busy = seed % 3 != 0
    free = [rng.choice([0.0, rng.uniform(0.0, 3000.0)]) if busy else 0.0 for _ in range(geometry[2])]
    python, compiled = _hbm(geometry, free, False), _hbm(geometry, free, True)
    for cmd, t_head in _reads(rng, geometry):
        python._read(cmd, t_head)
        compiled._read(cmd, t_head)
    assert compiled.engine.replies == python.engine.replies  # exact floats, every packet of every read
    assert compiled.free == python.free
    assert compiled.engine.rows == python.engine.rows


def test_a_read_the_compiled_service_refuses_is_served_in_python():
    """An address past 62 bits: OverflowError before any channel changed, and the Python steps serve it."""
    geometry = GEOMETRIES[0]
    python, compiled = _hbm(geometry, [0.0] * 8, False), _hbm(geometry, [0.0] * 8, True)
    with pytest.raises(OverflowError):
        serve_read([0.0] * 8, 1 << 63, 64, 0, 0, 256, 0.0625, 0.0, 256, 16, 1.0, LATE_NS)
    cmd = read_cmd((1 << 63) + 256, 5000)
    python._read(cmd, 10.0)
    compiled._read(cmd, 10.0)
    assert compiled.engine.replies == python.engine.replies and compiled.free == python.free


def test_linear_pacing_kept_by_hand():
    """4 KiB from address 0 on 5 idle channels of 256-byte bursts at 16 GB/s, a0 = 100: burst b takes 16 ns on
    channel b % 5, so bursts 0-4 are ready at 116, 5-9 at 132, 10-14 at 148 and 15 at 164. Flit j of the one
    packet (256-byte flits) leaves at 116 + j * 48 / 15: flits 5 and 10 leave exactly when their data is ready,
    none before, so the linear pacing is kept."""
    free = [0.0] * 5
    ready, last = serve_read(free, 0, 4096, 0, 0, 256, 1 / 16.0, 100.0, 256, 16, 1.0, LATE_NS)
    assert ready == [(116.0, 48.0 / 15)] and last == 164.0
    assert free == [164.0, 148.0, 148.0, 148.0, 148.0]
    # a flit leaving exactly when its data is ready is causal even without the LATE_NS allowance
    assert serve_read([0.0] * 5, 0, 4096, 0, 0, 256, 1 / 16.0, 100.0, 256, 16, 1.0, 0.0)[0] == [(116.0, 48.0 / 15)]


def test_link_paced_reply_by_hand():
    """8 KiB on 8 idle channels, a0 = 100: channel round r ends at 116 + 16 r. Packet 0 (bursts 0-15) would leave
    flit 8 at 116 + 8 * 16 / 15 < 132, before its data; every spacing that keeps the tail at 132 is 0 (flits 9-14
    are ready at 132 too), below the link's flit time (1 ns here), so the flits leave 1 ns apart from the earliest
    causal start, max(ready[j] - j) = 132 - 8 = 124. Packet 1 likewise from 164 - 8 = 156."""
    free = [0.0] * 8
    ready, last = serve_read(free, 0, 8192, 0, 0, 256, 1 / 16.0, 100.0, 256, 16, 1.0, LATE_NS)
    assert ready == [(124.0, 1.0), (156.0, 1.0)]
    assert last == 164.0
    assert free == [164.0] * 8
