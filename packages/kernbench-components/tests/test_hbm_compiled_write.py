"""The HBM controller's per-burst write loop in C (kernbench-accel's ``serve_write``, ADR 0046) is the Python loop.

``HbmCtrl._write`` hands each address-contiguous piece of a written packet to ``serve_write`` when the engine runs
on the compiled calendar. Here it is compared, bit for bit (``==`` on floats, and the channel list element by
element), with the loop written out in Python from the model: burst by burst, a burst arrives with the flit that
holds its last byte (``a0 + f * delta``, the packet's last flit at ``t_last``), waits for its channel (burst index
modulo the channels) and takes ``bytes * ns_per_byte`` there. Pieces start mid-burst, at an offset into the
packet (a 2-D transfer's rows), end on and past a burst boundary, and are one byte long. Skipped without
kernbench-accel, unless ``KERNBENCH_REQUIRE_ACCEL`` is set (CI).
"""

from __future__ import annotations

import os
import random

import pytest

try:
    from kernbench.accel._calendar import serve_write
except ImportError:
    if os.environ.get("KERNBENCH_REQUIRE_ACCEL"):
        raise
    pytest.skip("kernbench-accel is not installed", allow_module_level=True)


def python_write(free, addr, off, n, pkt_offset, burst, npb, a0, delta, t_last, flit, last_flit, done):
    x, end = addr, addr + n
    while x < end:
        y = min((x // burst + 1) * burst, end)
        f = (off + (y - 1 - addr) - pkt_offset) // flit
        arrive = t_last if f >= last_flit else a0 + f * delta
        ch = (x // burst) % len(free)
        start = free[ch] if free[ch] > arrive else arrive
        free[ch] = finish = start + (y - x) * npb
        if finish > done:
            done = finish
        x = y
    return done


def _case(rng: random.Random):
    burst = rng.choice([32, 64, 256, 96])
    flit = rng.choice([32, 256, 48])
    channels = rng.choice([1, 3, 8, 64])
    pkt_offset = rng.choice([0, 4096, 4096 * rng.randrange(1, 40)])
    nbytes = rng.choice([1, flit, 4096, rng.randrange(1, 4097)])
    nflits = -(-nbytes // flit)
    off = pkt_offset + rng.randrange(0, nbytes)  # a piece of the packet (a 2-D row starts inside it)
    n = rng.randrange(1, pkt_offset + nbytes - off + 1)
    addr = rng.choice([0, burst * rng.randrange(1000), rng.randrange(1 << 30), burst * 7 - 1])
    a0 = rng.choice([0, 3, rng.uniform(0, 5000)])
    delta = rng.choice([0.0, 1.0, rng.uniform(0, 4)])
    t_last = a0 + (nflits - 1) * delta + rng.choice([0.0, 1e-9, 2.5])
    free = [rng.choice([0.0, rng.uniform(0, 9000)]) for _ in range(channels)]
    npb = rng.choice([1.0 / 16.0, 1.0 / 12.8, 0.1])
    return free, (addr, off, n, pkt_offset, burst, npb, a0, delta, t_last, flit, nflits - 1, a0)


@pytest.mark.parametrize("seed", range(300))
def test_serve_write_is_the_python_loop_bit_for_bit(seed):
    free, args = _case(random.Random(seed))
    want_free, got_free = list(free), list(free)
    want = python_write(want_free, *args)
    got = serve_write(got_free, *args)
    assert got == want and type(got) is type(want)
    assert got_free == want_free


def test_the_done_time_comes_back_unchanged_when_no_burst_ends_later():
    free = [0.0, 0.0]
    assert serve_write(free, 0, 0, 64, 0, 64, 0.0, 7, 0.0, 7, 32, 1, 100) == 100
    assert free == [7.0, 0.0]


def test_a_negative_address_is_refused_for_the_python_loop_to_serve():
    with pytest.raises(OverflowError):
        serve_write([0.0], -1, 0, 1, 0, 64, 0.1, 0.0, 0.0, 0.0, 32, 0, 0.0)
