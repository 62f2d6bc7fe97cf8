"""Causal pacing of an HBM read's reply: no flit leaves the controller before its data is ready.

``HbmCtrl`` serves a read burst by burst on interleaved channels; flit ``f`` of the payload is in the controller
when the last burst holding one of its bytes has been read (``flit_ready[f]``). Each reply packet is described to
``engine.read_reply`` as ``(r0, delta)``: its flit ``j`` leaves at ``r0 + j * delta``. Linear pacing from the
packet's first flit to its latest one sends a flit that channel queueing made late before its data exists; the
controller keeps that pacing only where it is causal. Otherwise it keeps the tail at the latest ready time with
the largest spacing that has every flit leave after its data, or, when that spacing is below the reply link's
flit time ``phi``, spaces the flits ``phi`` apart from the earliest start that is causal: the packet then ends as
early as any causal schedule the link allows, ``max_j(ready[j] + (n - 1 - j) phi)``.

The ready times are recomputed here from the model's statement (burst ``b`` of the address space on channel
``b % channels``, served after whatever the channel holds, at ``1 / channel_bw_gbs`` ns per byte; a 2-D read's
row ``r`` at ``addr + r * pitch``), independently of ``kernbench.components.memory``.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from components_testkit import HBM_GEOMETRIES, LINK_GBS, HbmEngine, read_cmd

from kernbench.components.memory import LATE_NS, HbmCtrl

GEOMETRIES = HBM_GEOMETRIES
TOL_NS = 2 * LATE_NS  # the controller keeps linear pacing that is early by float rounding only (< LATE_NS)


def _hbm(fidelity: str, geometry, free: list[float], overhead_ns: float) -> HbmCtrl:
    flit, burst, channels, packet, bw = geometry
    node = SimpleNamespace(id="hbm", type="hbm_ctrl", overhead_ns=overhead_ns,
                           attrs={"channels": channels, "burst_bytes": burst, "channel_bw_gbs": bw})
    ctrl = HbmCtrl(HbmEngine(fidelity, flit, packet), node)
    assert ctrl.flow == (fidelity == "flow")
    ctrl.free = list(free)
    return ctrl


def model_flit_ready(geometry, free, a0, addr, nbytes, row_bytes=0, pitch=0):
    """``(flit_ready, free)`` of a read served from ``a0`` (``free`` is not modified): the model, written out."""
    flit, burst, _, _, bw = geometry
    free = list(free)
    ready = [a0] * -(-nbytes // flit)
    row_bytes = row_bytes or nbytes
    for r, off in enumerate(range(0, nbytes, row_bytes)):  # payload bytes [off, off + n) at address x
        x = addr + r * (pitch if pitch else row_bytes)
        n = min(row_bytes, nbytes - off)
        lo = x
        while lo < x + n:
            hi = min(x + n, (lo // burst + 1) * burst)
            ch = (lo // burst) % len(free)
            free[ch] = max(free[ch], a0) + (hi - lo) / bw
            for f in range((off + lo - x) // flit, (off + hi - 1 - x) // flit + 1):
                ready[f] = max(ready[f], free[ch])
            lo = hi
    return ready, free


def linear_pacing(flit_ready, per_packet):
    """The pacing before the fix: from each packet's first flit, evenly, to the latest of its flits."""
    out = []
    for p0 in range(0, len(flit_ready), per_packet):
        fr = flit_ready[p0:p0 + per_packet]
        r0, r1, n1 = fr[0], max(fr), len(fr) - 1
        out.append((r0, (r1 - r0) / n1 if n1 else 0.0))
    return out


def packets(reply, flit_ready, per_packet):
    """Per packet: (its flits' ready times, the times the reply sends them)."""
    assert len(reply) == -(-len(flit_ready) // per_packet)
    for p, (r0, d) in enumerate(reply):
        fr = flit_ready[p * per_packet:(p + 1) * per_packet]
        yield fr, [r0 + j * d for j in range(len(fr))]


def _random_read(rng: random.Random, geometry, contended: bool):
    flit, burst, channels, packet, _ = geometry
    nbytes = rng.choice([1, flit - 1, flit, burst, burst + 1, packet, packet + 1, 3 * packet + flit + 5,
                         rng.randrange(1, 40 * packet)])
    addr = rng.choice([0, 13, burst * rng.randrange(1, 200), flit * rng.randrange(1, 500), rng.randrange(1 << 20)])
    row_bytes = pitch = 0
    if rng.random() < 0.4:  # a 2-D block: rows of row_bytes, pitch apart
        row_bytes = rng.choice([1, 32, 64, 100, burst, burst + 1, 1000])
        pitch = row_bytes * rng.choice([1, 2, 8, 64]) + rng.choice([0, 64, 7])
    t_head = rng.uniform(0.0, 2000.0)
    if contended:  # channels busy until some time around the read's arrival
        free = [rng.choice([0.0, rng.uniform(0.0, 2000.0 + 40.0 * channels)]) for _ in range(channels)]
    else:
        free = [rng.choice([0.0, rng.uniform(0.0, t_head)]) for _ in range(channels)]
    return free, addr, nbytes, row_bytes, pitch, t_head


# ------------------------------------------------------------------------------------------- by hand


def test_a_late_middle_burst_delays_its_packets_head_by_hand():
    """32 B flits = bursts, 2 channels at 4 GB/s (8 ns a burst), 4-flit packets; channel 1 busy until 12 ns.

    Picked up at a0 = 2: channel 0 reads bursts 0, 2, 4, 6 back to back (done 10, 18, 26, 34); channel 1
    starts at 12 with bursts 1, 3, 5, 7 (done 20, 28, 36, 44). Packet 0's flits are ready at 10, 20, 18, 28:
    paced from 10 to 28, flit 1 would leave at 16, before its data (20). The fix keeps the tail at 28 and takes
    delta = min(18/3, 8/2, 10/1) = 4 (flit 1 binds), so r0 = 28 - 3 * 4 = 16: the flits leave at 16, 20, 24,
    28. Packet 1 (ready 26, 36, 34, 44) is the same 16 ns later.
    """
    geometry = (32, 32, 2, 128, 4.0)
    free = [0.0, 12.0]
    flit_ready, _ = model_flit_ready(geometry, free, 2.0, 0, 256)
    assert flit_ready == [10.0, 20.0, 18.0, 28.0, 26.0, 36.0, 34.0, 44.0]
    assert linear_pacing(flit_ready, 4) == [(10.0, 6.0), (26.0, 6.0)]  # before the fix: flit 1 leaves at 16 < 20
    for fidelity in ("packet", "flow"):
        ctrl = _hbm(fidelity, geometry, free, overhead_ns=2.0)
        ctrl._read(read_cmd(0, 256), 0.0)
        (reply,) = ctrl.engine.replies
        assert reply == [(16.0, 4.0), (32.0, 4.0)], fidelity
        for fr, leave in packets(reply, flit_ready, 4):
            assert all(t >= r for t, r in zip(leave, fr, strict=True))  # exact: every figure is a dyadic
            assert leave[-1] == max(fr)
        assert ctrl.free == [34.0, 44.0]
        assert ctrl.engine.rows[0][1] == 44.0  # the op-log row ends when the last flit is ready


def test_an_uncontended_two_round_packet_leaves_when_its_last_round_is_ready():
    """The default slice: 256 B flits = bursts, 8 channels of 16 GB/s (16 ns a burst), 16-flit packets.

    A 4 KiB read picked up at a0 = 10 has flits 0..7 ready at 26 and flits 8..15 (the channels' second round)
    at 42. Linear pacing from 26 (16/15 ns apart) would send flit 8 at 26 + 8 * 16/15 ~ 34.5, 7.5 ns before
    its data; flits 8..14 are ready with the last one, so no spacing keeps the tail at 42. The reply link takes
    256 B / 256 GB/s = 1 ns a flit, so the flits leave 1 ns apart from 42 - 8 = 34 (flit 8 binds): 34, .., 49,
    the earliest end of any causal schedule on that link (flit by flit it would be the same).
    """
    geometry = GEOMETRIES[0]
    flit_ready, _ = model_flit_ready(geometry, [0.0] * 8, 10.0, 0, 4096)
    assert flit_ready == [26.0] * 8 + [42.0] * 8
    r0, d = linear_pacing(flit_ready, 16)[0]
    assert r0 + 8 * d < 42.0  # what the fix removes
    for fidelity in ("packet", "flow"):
        ctrl = _hbm(fidelity, geometry, [0.0] * 8, overhead_ns=10.0)
        ctrl._read(read_cmd(0, 4096), 0.0)
        assert ctrl.engine.replies == [[(34.0, 1.0)]], fidelity
    assert max(r + (15 - j) * 1.0 for j, r in enumerate(flit_ready)) == 34.0 + 15 * 1.0


def test_a_read_within_one_channel_round_is_unchanged():
    """Up to 2 KiB on the default slice: every burst on its own channel, all flits ready together."""
    geometry = GEOMETRIES[0]
    for nbytes in (1, 256, 2048):
        ctrl = _hbm("packet", geometry, [0.0] * 8, overhead_ns=10.0)
        ctrl._read(read_cmd(4096, nbytes), 0.0)
        assert ctrl.engine.replies == [[(10.0 + min(nbytes, 256) / 16.0, 0.0)]]  # a burst in 1/16 ns a byte


# ------------------------------------------------------------------------------------------- randomised


@pytest.mark.parametrize("seed", range(150))
def test_no_flit_leaves_before_its_data_under_channel_queueing(seed):
    """Random reads on busy channels: every flit leaves at or after its ready time, and a re-paced packet ends
    as early as any causal schedule on its reply link can."""
    rng = random.Random(seed)
    geometry = GEOMETRIES[seed % len(GEOMETRIES)]
    free, addr, nbytes, row_bytes, pitch, t_head = _random_read(rng, geometry, contended=True)
    ctrl = _hbm("packet", geometry, free, overhead_ns=7.5)
    ctrl._read(read_cmd(addr, nbytes, row_bytes, pitch), t_head)
    flit_ready, want_free = model_flit_ready(geometry, free, t_head + 7.5, addr, nbytes, row_bytes, pitch)
    assert ctrl.free == pytest.approx(want_free, abs=1e-9)
    (reply,) = ctrl.engine.replies
    phi = geometry[0] / LINK_GBS
    per_packet = geometry[3] // geometry[0]
    old = linear_pacing(flit_ready, per_packet)
    for p, (fr, leave) in enumerate(packets(reply, flit_ready, per_packet)):
        assert all(t >= r - TOL_NS for t, r in zip(leave, fr, strict=True)), (fr, leave)
        if reply[p] != old[p]:  # re-paced: on the link (flits at least phi apart) it ends at the causal optimum
            n1 = len(fr) - 1
            on_link = reply[p][0] + n1 * max(reply[p][1], phi)
            best = max(max(fr), *(r + (n1 - j) * phi for j, r in enumerate(fr)))
            assert on_link == pytest.approx(best, abs=1e-9), (fr, reply[p])


def test_queueing_makes_linear_pacing_non_causal_and_the_reply_re_paces_it():
    """The randomised reads above do exercise the blind spot: many packets' linear pacing sends a flit early."""
    early = repaced = 0
    for seed in range(150):
        rng = random.Random(seed)
        geometry = GEOMETRIES[seed % len(GEOMETRIES)]
        free, addr, nbytes, row_bytes, pitch, t_head = _random_read(rng, geometry, contended=True)
        per_packet = geometry[3] // geometry[0]
        flit_ready, _ = model_flit_ready(geometry, free, t_head + 7.5, addr, nbytes, row_bytes, pitch)
        old = linear_pacing(flit_ready, per_packet)
        ctrl = _hbm("packet", geometry, free, overhead_ns=7.5)
        ctrl._read(read_cmd(addr, nbytes, row_bytes, pitch), t_head)
        for p, (fr, leave) in enumerate(packets(old, flit_ready, per_packet)):
            if any(t < r - TOL_NS for t, r in zip(leave, fr, strict=True)):
                early += 1
                repaced += ctrl.engine.replies[0][p] != old[p]
    assert early > 50 and repaced == early


@pytest.mark.parametrize("geometry", [
    (64, 32, 2, 512, 3.0),  # a flit holds one burst of each channel: ready times one burst time apart
    (64, 32, 2, 1024, 16.0 / 3.0),
    (256, 256, 8, 2048, 16.0),  # a packet's bursts all on different channels: ready together
    (256, 256, 16, 4096, 7.0),
])
def test_uncontended_linear_reads_keep_the_linear_pacing_bit_for_bit(geometry):
    """Where the channels add no queueing and the ready times are linear, the reply is the old one, exactly."""
    flit, _, channels, packet, _ = geometry
    rng = random.Random(repr(geometry))
    for _ in range(300):
        t_head = rng.uniform(0.0, 1e6)
        overhead = rng.uniform(0.0, 20.0)
        addr = flit * channels * rng.randrange(1000)
        nbytes = flit * rng.randrange(1, 6 * packet // flit)
        free = [rng.choice([0.0, rng.uniform(0.0, t_head)]) for _ in range(channels)]
        flit_ready, _ = model_flit_ready(geometry, free, t_head + overhead, addr, nbytes)
        want = linear_pacing(flit_ready, packet // flit)
        for fidelity in ("packet", "flow"):
            ctrl = _hbm(fidelity, geometry, free, overhead)
            ctrl._read(read_cmd(addr, nbytes), t_head)
            assert ctrl.engine.replies == [want]


@pytest.mark.parametrize("seed", range(400))
def test_the_flow_read_re_paces_exactly_as_the_packet_read(seed):
    """``_read`` works per burst, ``_read_per_flit`` per flit: the same ``ready`` list, channel state and op-log row,
    bit for bit, on idle and busy channels, for 1 byte, a burst, a burst + 1, unaligned and 2-D reads."""
    rng = random.Random(seed)
    geometry = GEOMETRIES[seed % len(GEOMETRIES)]
    free, addr, nbytes, row_bytes, pitch, t_head = _random_read(rng, geometry, contended=seed % 3 != 0)
    packet, flow = _hbm("packet", geometry, free, 7.5), _hbm("flow", geometry, free, 7.5)
    packet._read_per_flit(read_cmd(addr, nbytes, row_bytes, pitch), t_head)
    flow._read(read_cmd(addr, nbytes, row_bytes, pitch), t_head)
    assert flow.engine.replies == packet.engine.replies  # exact floats, every packet
    assert flow.free == packet.free
    assert flow.engine.rows == packet.engine.rows
