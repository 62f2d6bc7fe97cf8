"""The HBM controller's flow-fidelity service (ADR 0039) against the per-burst model it shortcuts.

* :func:`kernbench.components.memory.interleaved_write` serves the full bursts of a contiguous write per
  channel in closed form; it is compared with an independent per-burst recurrence (written here from the
  model's statement: burst ``b`` on channel ``b % channels``, arriving with the flit that holds its last byte,
  served after whatever its channel holds) to a micro-nanosecond: a 1 ns nudge fails.
* ``HbmCtrl._read`` folds each burst's finish into per-packet figures instead of per-flit ones; it must give
  the per-flit statement ``_read_per_flit`` exactly (the same ``ready`` list, channel state and op-log row, bit
  for bit).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from components_testkit import HbmEngine, read_cmd

from kernbench.components.memory import HbmCtrl, interleaved_write

FLIT, BURST, CHANNELS, NS_PER_BYTE = 32, 256, 8, 1.0 / 16.0
TOL_NS = 1e-6  # the closed form differs from the loop by float rounding only


def per_burst_write(free, addr, nbytes, nflits, a0, delta, t_last, flit, burst, ns_per_byte):
    """The model, one burst at a time: ``(done, free)`` for a contiguous write (``free`` is not modified)."""
    free = list(free)
    done = a0
    end = addr + nbytes
    b = addr // burst
    while b * burst < end:
        lo, hi = max(addr, b * burst), min(end, (b + 1) * burst)
        f = (hi - 1 - addr) // flit  # the flit that carries the burst's last byte
        arrive = t_last if f >= nflits - 1 else a0 + f * delta
        ch = b % len(free)
        free[ch] = max(free[ch], arrive) + (hi - lo) * ns_per_byte
        done = max(done, free[ch])
        b += 1
    return done, free


def _close(x: float, y: float) -> bool:
    return abs(x - y) <= TOL_NS


def _write_case(rng: random.Random, burst: int = BURST, flit: int = FLIT):
    addr = rng.choice([0, burst * rng.randrange(64), rng.randrange(1 << 20)])
    nbytes = rng.choice([1, flit, burst - 3, burst * CHANNELS * 2 + 7, 4096, 65536, rng.randrange(1, 200_000)])
    nflits = -(-nbytes // flit)
    a0 = rng.uniform(0.0, 5000.0)
    # flits arrive slower or faster than a channel drains them; the last flit at the end of the train
    delta = rng.choice([0.0, 0.5, 1.0, 2.0, 4.0, rng.uniform(0.0, 6.0)])
    t_last = a0 + (nflits - 1) * delta + rng.choice([0.0, 1e-9, 3.0])
    free = [rng.choice([0.0, rng.uniform(0.0, 9000.0)]) for _ in range(CHANNELS)]
    return free, addr, nbytes, nflits, a0, delta, t_last, flit, burst, NS_PER_BYTE


@pytest.mark.parametrize("seed", range(200))
def test_interleaved_write_is_the_per_burst_recurrence(seed):
    free, *args = _write_case(random.Random(seed))
    want_done, want_free = per_burst_write(free, *args)
    got_free = list(free)
    got_done = interleaved_write(got_free, *args)
    assert _close(got_done, want_done), (got_done, want_done)
    assert all(_close(g, w) for g, w in zip(got_free, want_free, strict=True)), (got_free, want_free)
    # a nudge of 1 ns anywhere would fail this comparison
    assert not _close(got_done + 1.0, want_done)


@pytest.mark.parametrize("burst,flit", [(256, 48), (96, 32), (64, 64)])
def test_interleaved_write_serves_any_burst_and_flit_size(burst, flit):
    """A burst that is not a whole number of flits is served burst by burst; the result is the same model."""
    rng = random.Random(burst * 1000 + flit)
    for _ in range(50):
        free, *args = _write_case(rng, burst, flit)
        want_done, want_free = per_burst_write(free, *args)
        got_free = list(free)
        assert _close(interleaved_write(got_free, *args), want_done)
        assert all(_close(g, w) for g, w in zip(got_free, want_free, strict=True))


def test_interleaved_write_of_channel_bound_bursts_by_hand():
    """64 KiB, flits every 0.25 ns from t = 100 (128 GB/s offered) into 8 channels of 16 GB/s (128 GB/s in all).

    Burst ``b`` arrives with flit ``8b + 7``; channel ``c`` serves bursts ``c + 8j`` (j = 0..31), which arrive
    16 ns apart and take 16 ns each, so every channel keeps up exactly. Channel 7's last burst (255) carries the
    last flit, at 100 + 2047 * 0.25 = 611.75, and ends at 627.75 ns.
    """
    free = [0.0] * CHANNELS
    done = interleaved_write(free, 0, 65536, 2048, 100.0, 0.25, 100.0 + 2047 * 0.25, FLIT, BURST, NS_PER_BYTE)
    assert done == pytest.approx(627.75, abs=TOL_NS)
    # channel 0's bursts: its first arrives at 100 + 7 * 0.25 = 101.75, so it is busy 32 x 16 = 512 ns from then
    assert free[0] == pytest.approx(101.75 + 512.0, abs=TOL_NS)


def test_a_busy_channel_queues_its_bursts():
    """Channel 3 is busy until 10,000 ns: its 4 bursts of a 8 KiB write (bursts 3, 11, 19, 27) end 4 x 16 ns
    later, while the other channels finish with the data."""
    free = [0.0] * CHANNELS
    free[3] = 10_000.0
    done = interleaved_write(free, 0, 8192, 256, 0.0, 0.25, 255 * 0.25, FLIT, BURST, NS_PER_BYTE)
    assert free[3] == pytest.approx(10_064.0, abs=TOL_NS) and done == free[3]
    assert free[0] == pytest.approx((8 * 24 + 7) * 0.25 + 16.0, abs=TOL_NS)  # burst 24 arrives with flit 199


def test_an_empty_write_changes_nothing():
    free = [5.0] * CHANNELS
    assert interleaved_write(free, 100, 0, 1, 7.0, 1.0, 7.0, FLIT, BURST, NS_PER_BYTE) == 7.0
    assert free == [5.0] * CHANNELS


def _hbm(fidelity: str, free: list[float]) -> HbmCtrl:
    node = SimpleNamespace(id="hbm", type="hbm_ctrl", overhead_ns=7.5,
                           attrs={"channels": CHANNELS, "burst_bytes": BURST, "channel_bw_gbs": 16.0})
    ctrl = HbmCtrl(HbmEngine(fidelity, FLIT, 4096), node)
    ctrl.free = list(free)
    return ctrl


@pytest.mark.parametrize("seed", range(200))
def test_the_flow_read_gives_the_packet_read_bit_for_bit(seed):
    rng = random.Random(seed)
    free = [rng.choice([0.0, rng.uniform(0.0, 3000.0)]) for _ in range(CHANNELS)]
    nbytes = rng.choice([1, 31, 32, 33, 4096, 4097, 10_000, 65536, rng.randrange(1, 150_000)])
    addr = rng.choice([0, 13, BURST * rng.randrange(100), rng.randrange(1 << 20)])
    row_bytes = pitch = 0
    if rng.random() < 0.4:  # a 2-D block: rows of row_bytes, pitch apart
        row_bytes = rng.choice([32, 64, 100, 128, 256, 1000])
        pitch = row_bytes * rng.choice([1, 2, 8, 64]) + rng.choice([0, 64])
    t_head = rng.uniform(0.0, 2000.0)
    packet, flow = _hbm("packet", free), _hbm("flow", free)
    assert flow.flow and not packet.flow
    packet._read_per_flit(read_cmd(addr, nbytes, row_bytes, pitch), t_head)
    flow._read(read_cmd(addr, nbytes, row_bytes, pitch), t_head)
    assert flow.engine.replies == packet.engine.replies  # exact floats, every packet
    assert flow.free == packet.free
    assert flow.engine.rows == packet.engine.rows
