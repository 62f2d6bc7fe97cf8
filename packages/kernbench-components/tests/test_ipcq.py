"""PE_IPCQ: PE-to-PE messages by direction, per buffer kind; credits; never faster than raw DMA; deadlocks."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components import default_registry
from kernbench.components.launch import KernelLaunchMsg
from kernbench.components.pe.ipcq import IpcqLink
from kernbench.sim import GraphEngine
from kernbench.sim.errors import DeadlockError
from kernbench.sim.messages import PeDmaWriteMsg
from kernbench.topology import compile_spec, spec_from_dict
from kernbench.topology.address import PhysAddr, decode

A, B = (0, 0, 0), (0, 5, 0)  # PE 0 of cube 0 and of cube 5 (one hop east and one south away: two cubes)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({"pe": {"ipcq": {"depth": 2, "slot_kib": 128}}}))


def ring_base(pe: tuple[int, int, int], kind: str) -> int:
    """A receive ring's base in each memory, clear of the kernel scratch (top 1 MiB of the TCM)."""
    sip, cube, p = pe
    if kind == "tcm":
        return PhysAddr(sip, cube, "tcm", 8 << 20, p).encode()
    if kind == "sram":
        return PhysAddr(sip, cube, "sram", p * (1 << 20), 0).encode()
    return PhysAddr(sip, cube, "hbm", 1 << 30, p).encode()


def engine(graph, kind="tcm", links=(("E", A, B),), data=True):
    """An engine with the given directed links installed (and their reverse links)."""
    eng = GraphEngine(graph, default_registry(), data=data)
    table: dict = {}
    for d, src, dst in links:
        back = {"E": "W", "W": "E", "N": "S", "S": "N"}[d[-1]]
        table.setdefault(src, {})[d] = IpcqLink(dst, ring_base(src, kind))
        table.setdefault(dst, {})[d[:-1] + back] = IpcqLink(src, ring_base(dst, kind) + (4 << 20 if kind != "sram"
                                                                                         else 1 << 19))
    for pe, dirs in table.items():
        eng.components[f"sip{pe[0]}.cube{pe[1]}.pe{pe[2]}.pe_ipcq"].install(dirs, kind)
    return eng


def run(eng, *kernels):
    reqs = [eng.submit(KernelLaunchMsg(f"k{i}", fn, ((pe, ()),))) for i, (pe, fn) in enumerate(kernels)]
    eng.run()
    return reqs


def _records(eng, name):
    return [r for r in eng.oplog.records if r.op_name == name]


@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
def test_a_message_arrives_intact_for_every_buffer_kind(graph, kind):
    eng = engine(graph, kind)
    got = {}

    def sender(tl):
        tl.send("E", tl.arange(0, 4096, "float32") * 3.0)

    def receiver(tl):
        got["x"] = tl.recv("W", (4096,), "float32") + 1.0
        tl.wait()
        got["addr"] = got["x"].addr

    reqs = run(eng, (A, sender), (B, receiver))
    assert [r.error for r in reqs] == [None, None]
    np.testing.assert_array_equal(eng.memory.read_array(got["addr"], (4096,), "float32"),
                                  np.arange(4096, dtype=np.float32) * 3.0 + 1.0)
    (send,) = _records(eng, "ipcq_send")
    (copy,) = _records(eng, "ipcq_copy")
    assert send.params["buffer"] == copy.params["buffer"] == kind
    assert copy.t_start >= send.t_end  # consumed only after it landed
    comm = [r for r in eng.oplog.records if r.op_name in ("dma_write", "dma_read") and r.params["vc"] == "comm"]
    assert len(comm) == 2  # the write into the slot and the copy out, both on the comm virtual channel


def test_the_send_snapshots_its_source(graph):
    eng = engine(graph)
    got = {}

    def sender(tl):
        x = tl.full((256,), 7.0)
        tl.send("E", x)
        tl.copy_to(x, tl.zeros((256,)))  # overwriting the source after the send does not change the message

    def receiver(tl):
        got["x"] = tl.recv("W", (256,), "float32")

    run(eng, (A, sender), (B, receiver))
    assert (eng.memory.read_array(got["x"].addr, (256,), "float32") == 7.0).all()


@pytest.mark.parametrize("kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("nbytes", [256, 16384, 98304])
def test_ipcq_is_never_faster_than_a_raw_dma_over_the_same_path(graph, kind, nbytes):
    raw_eng = engine(graph, kind, data=False)
    slot = decode(ring_base(B, kind) + (4 << 20 if kind != "sram" else 1 << 19))
    req = raw_eng.submit(PeDmaWriteMsg(*A, slot, nbytes))
    raw_eng.run()
    raw = req.t_end - req.t_submit

    eng = engine(graph, kind, data=False)
    t = {}

    def sender(tl):
        x = tl.zeros((nbytes // 4,))
        t["send"] = tl.now_ns
        tl.send("E", x)

    def receiver(tl):
        tl.recv("W", (nbytes // 4,), "float32")
        t["recv"] = tl.now_ns

    run(eng, (A, sender), (B, receiver))
    assert t["recv"] - t["send"] >= raw
    (send,) = _records(eng, "ipcq_send")
    assert send.t_end - send.t_start >= raw - 20.0  # the slot write alone is that same DMA (its PE-side hops aside)


def test_buffer_kinds_differ_in_cost_for_large_messages(graph):
    times = {}
    for kind in ("tcm", "sram", "hbm"):
        eng = engine(graph, kind, data=False)
        done = {}

        def receiver(tl, done=done):
            tl.recv("W", (98304 // 4,), "float32")
            done["t"] = tl.now_ns

        run(eng, (A, lambda tl: tl.send("E", tl.zeros((98304 // 4,)))), (B, receiver))
        times[kind] = done["t"]
    assert times["tcm"] < times["sram"] and times["tcm"] < times["hbm"]


def test_credits_hold_back_a_sender_that_outruns_its_receiver(graph):
    """Depth 2: the third send waits until the receiver frees a slot."""
    eng = engine(graph)
    t = {}

    def sender(tl):
        for i in range(3):
            tl.send("E", tl.full((1024,), float(i)))
            t[i] = tl.now_ns

    def receiver(tl):
        tl.cycles(5000)
        t["first_recv"] = tl.now_ns
        got = [tl.recv("W", (1024,), "float32") for _ in range(3)]
        tl.wait()
        t["values"] = [float(eng.memory.read_array(h.addr, (1024,), "float32")[0]) for h in got]

    run(eng, (A, sender), (B, receiver))
    assert t[1] < 1000 < t["first_recv"] <= t[2]
    assert t["values"] == [0.0, 1.0, 2.0]  # in order


def test_recv_async_returns_a_future(graph):
    eng = engine(graph)
    got = {}

    def receiver(tl):
        fut = tl.recv_async("W", (512,), "float32")
        got["issued"] = tl.now_ns
        got["x"] = tl.wait(fut) * 2.0
        got["waited"] = tl.now_ns

    def sender(tl):
        tl.cycles(3000)
        tl.send("E", tl.full((512,), 4.0))

    run(eng, (A, sender), (B, receiver))
    assert got["issued"] < 3000 < got["waited"]
    assert (eng.memory.read_array(got["x"].addr, (512,), "float32") == 8.0).all()


def test_recv_no_consume_skips_only_the_copy(graph):
    ends = {}
    for mode in ("recv", "recv_no_consume"):
        eng = engine(graph)
        got = {}

        def receiver(tl, mode=mode, got=got):
            got["x"] = getattr(tl, mode)("W", (16384,), "float32")
            got["t"] = tl.now_ns

        run(eng, (A, lambda tl: tl.send("E", tl.full((16384,), 5.0))), (B, receiver))
        assert (eng.memory.read_array(got["x"].addr, (16384,), "float32") == 5.0).all()
        ends[mode] = got["t"]
    assert ends["recv_no_consume"] < ends["recv"]


def test_a_recv_nobody_answers_is_a_deadlock_naming_the_pe_direction_and_op(graph):
    eng = engine(graph)
    eng.submit(KernelLaunchMsg("lonely", lambda tl: tl.recv("W", (16,), "float32"), ((B, ()),)))
    with pytest.raises(DeadlockError) as err:
        eng.run()
    msg = str(err.value)
    assert "sip0.cube5.pe0" in msg and "'W'" in msg and "tl.recv" in msg


def test_a_send_without_a_neighbour_fails_at_once(graph):
    eng = engine(graph)
    (req,) = run(eng, (A, lambda tl: tl.send("N", tl.zeros((16,)))))
    assert req.error is not None
    assert "(0, 0, 0)" in str(req.error) and "'N'" in str(req.error) and "installed" in str(req.error)


@pytest.mark.parametrize(("kernel", "match"), [
    (lambda tl: tl.send("up", tl.zeros((4,))), "unknown direction"),
    (lambda tl: tl.send("E", tl.zeros((40000,))), "does not fit an IPCQ slot"),
    (lambda tl: tl.recv("E"), "give the message's shape"),
])
def test_bad_messages_are_rejected_with_a_clear_error(graph, kernel, match):
    eng = engine(graph)
    (req,) = run(eng, (A, kernel))
    assert req.error is not None and match in str(req.error)


def test_a_size_mismatch_fails_the_receiver(graph):
    eng = engine(graph)
    _, req = run(eng, (A, lambda tl: tl.send("E", tl.zeros((64,)))),
                 (B, lambda tl: tl.recv("W", (32,), "float32")))
    assert req.error is not None and "expected 128 bytes" in str(req.error) and "has 256" in str(req.error)


def test_a_peer_that_failed_is_named_in_the_deadlock_it_causes(graph):
    """One launch over two cubes: the sender fails before sending, so the receiver waits forever."""
    eng = engine(graph)

    def kernel(tl):
        if tl.pe == A:
            raise ValueError("boom before the send")
        tl.recv("W", (16,), "float32")

    eng.submit(KernelLaunchMsg("pair", kernel, ((A, ()), (B, ()))))
    with pytest.raises(DeadlockError) as err:
        eng.run()
    msg = str(err.value)
    assert "sip0.cube0.pe0 failed: ValueError: boom before the send" in msg
    assert "tl.recv('W')" in msg


def test_messages_are_received_in_send_order_even_when_a_later_one_lands_first():
    """Two DMA write channels: a small message overtakes a big one in flight; the receiver still gets them in
    send order, and the slot of the big one is not reused before it is read."""
    g = compile_spec(spec_from_dict({"pe": {"ipcq": {"depth": 2, "slot_kib": 128}, "dma": {"write_channels": 2}}}))
    eng = engine(g)
    got = {}

    def sender(tl):
        tl.send("E", tl.full((32768,), 1.0))
        tl.send("E", tl.full((4,), 2.0))
        tl.send("E", tl.full((4,), 3.0))

    def receiver(tl):
        hs = [tl.recv("W", (n,), "float32") for n in (32768, 4, 4)]
        tl.wait()
        got["values"] = [eng.memory.read_array(h.addr, h.shape, "float32") for h in hs]

    reqs = run(eng, (A, sender), (B, receiver))
    assert [r.error for r in reqs] == [None, None]
    big, s1, s2 = got["values"]
    assert (big == 1.0).all() and (s1 == 2.0).all() and (s2 == 3.0).all()
    sends = sorted(_records(eng, "ipcq_send"), key=lambda r: r.t_end)
    assert sends[0].params["nbytes"] == 16  # the small one did land first


def test_a_failed_receive_nobody_waited_for_fails_the_kernel_and_keeps_the_message(graph):
    eng = engine(graph)
    sender_req, receiver_req = run(eng, (A, lambda tl: tl.send("E", tl.zeros((64,)))),
                                   (B, lambda tl: tl.recv_async("W", (32,), "float32") and None))
    assert sender_req.error is None
    assert receiver_req.error is not None and "expected 128 bytes" in str(receiver_req.error)
    ipcq = eng.components["sip0.cube5.pe0.pe_ipcq"]
    assert [m.nbytes for m in ipcq.rx["W"]] == [256]  # still there for a receive of the right size


def test_send_from_an_address_outside_this_pes_tcm_is_rejected(graph):
    eng = engine(graph)
    hbm = PhysAddr(0, 5, "hbm", 0, 0).encode()
    (req,) = run(eng, (A, lambda tl: tl.send("E", src_addr=hbm, nbytes=64)))
    assert req.error is not None and "not in this PE's TCM" in str(req.error)


def test_a_send_completes_only_after_its_source_is_staged(graph):
    """The snapshot is a TCM copy: the kernel resumes after nbytes at the TCM bandwidth, not at once."""
    eng = engine(graph, data=False)
    t = {}

    def sender(tl):
        x = tl.zeros((32768,))
        t0 = tl.now_ns
        tl.send("E", x)
        t["send"] = tl.now_ns - t0

    run(eng, (A, sender), (B, lambda tl: tl.recv("W", (32768,), "float32")))
    assert t["send"] >= 131072 / graph.spec.pe.tcm.read_bw_gbs
