"""The built-in components on the default topology: HBM pseudo-channels, link-bound memories,
requesters, the intent-aware paths they are reached by, and what they write to the op log.

Hand numbers come from the default spec (``spec_from_dict({})``):

* PE DMA overhead 2 ns, router 2 ns, HBM controller 10 ns, SRAM 5 ns;
* NoC links 256 GB/s, router -> SRAM 128 GB/s; flit 256 B, packet 4 KiB, control message 64 B;
* HBM: 1024 GB/s over 64 pseudo-channels -> 16 GB/s each, 8 channels per PE slice, 256 B bursts
  -> one burst drains in 256 / 16 = 16 ns, and a slice drains at 8 x 16 = 128 GB/s;
* PE 0 of cube 0 sits on router r0c0, which also feeds PE 0's HBM controller, so a local
  PE -> HBM path is pe_dma -> r0c0 -> hbm_ctrl.pe0 (two wires whose propagation, L, is taken
  from the graph because it depends on the die layout).
"""

from __future__ import annotations

import itertools

import pytest

from kernbench.components import (
    BUILTIN,
    Forwarding,
    HbmCtrl,
    HostCpu,
    MCpu,
    PcieEndpoint,
    PeDma,
    Sram,
    default_registry,
)
from kernbench.sim import (
    McpuDmaWriteMsg,
    MemoryReadMsg,
    MemoryWriteMsg,
    PeDmaReadMsg,
    PeDmaWriteMsg,
)
from kernbench.topology import PhysAddr

DMA0 = "sip0.cube0.pe0.pe_dma"
R00 = "sip0.cube0.noc.r0c0"
HBM0 = "sip0.cube0.hbm_ctrl.pe0"
SRAM0 = PhysAddr(0, 0, "sram", 0)
KIB = 1024


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-9)


def run(engine, *msgs):
    reqs = [engine.submit(m) for m in msgs]
    engine.run()
    return reqs


@pytest.fixture(scope="module")
def local_prop(graph):
    """Propagation of pe_dma -> r0c0 -> hbm_ctrl.pe0, and back."""
    fwd = graph.edge(DMA0, R00).latency_ns + graph.edge(R00, HBM0).latency_ns
    back = graph.edge(HBM0, R00).latency_ns + graph.edge(R00, DMA0).latency_ns
    return fwd, back


def test_the_spec_numbers_the_hand_sums_rely_on(graph):
    spec = graph.spec
    assert spec.hbm_channel_bw_gbs == 1024 / 64 == 16.0
    assert spec.channels_per_pe == 8 and spec.cube.hbm.burst_bytes == 256
    assert (spec.fabric.flit_bytes, spec.fabric.packet_bytes, spec.fabric.control_bytes) == (256, 4096, 64)
    attrs = graph.nodes[HBM0].attrs
    assert (attrs["channels"], attrs["channel_bw_gbs"], attrs["burst_bytes"], attrs["overhead_ns"]) == (8, 16.0,
                                                                                                        256, 10.0)
    assert graph.edge(DMA0, R00).bw_gbs == graph.edge(R00, HBM0).bw_gbs == 256.0
    assert graph.nodes[DMA0].overhead_ns == 2.0 and graph.nodes[R00].overhead_ns == 2.0


def test_default_registry_binds_every_default_component_name(graph):
    reg = default_registry()
    assert reg.names == sorted(name for name, _ in BUILTIN)
    assert set(graph.spec.component_bindings.values()) <= set(reg.names)
    expected = {"forwarding": Forwarding, "pcie_ep": PcieEndpoint, "host": HostCpu, "hbm_ctrl": HbmCtrl,
                "sram": Sram, "m_cpu": MCpu}
    assert {n: reg.get(n) for n in expected} == expected
    assert issubclass(reg.get("pe_dma"), PeDma)  # the kernel DMA extends the data-path DMA
    assert {"io_cpu", "pe_cpu", "pe_scheduler", "pe_tcm", "pe_fetch_store", "pe_gemm", "pe_math",
            "pe_mmu"} <= set(reg.names)
    reg.register("extra", Forwarding)
    assert "extra" not in default_registry().names  # a fresh registry each call


def test_engine_instantiates_the_right_class_per_node(make_engine):
    eng = make_engine()
    kinds = {"tray.host_cpu": HostCpu, "fabric.switch0": Forwarding, "sip1.io0.pcie_ep": PcieEndpoint,
             DMA0: PeDma, R00: Forwarding, HBM0: HbmCtrl, "sip0.cube0.sram": Sram, "sip1.cube15.m_cpu": MCpu}
    for node, cls in kinds.items():
        assert isinstance(eng.components[node], cls)
    from kernbench.components.pe.ipcq import PeIpcq

    assert isinstance(eng.components["sip0.cube0.pe0.pe_ipcq"], PeIpcq)


# ---------------------------------------------------------------------------------- HBM pseudo-channels


def test_hbm_write_of_8_bursts_stripes_over_the_8_channels(make_engine, resolver, local_prop):
    """2048 B = 8 flits = 8 bursts. Head at the controller after 2 + 1 + 2 + 1 ns + L; flits 1 ns
    apart; +10 ns pickup; burst f goes to channel f, so the last one starts at +7 and drains in 16 ns."""
    (req,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 2048))
    assert req.legs[0] == (DMA0, R00, HBM0)
    assert req.latency_ns == approx(6 + 10 + 7 + 16 + local_prop[0])


def test_hbm_write_of_16_bursts_reuses_each_channel_once(make_engine, resolver, local_prop):
    """4096 B: bursts 8..15 queue behind 0..7 on the same channels; burst 15 arrives at +15 but its
    channel is busy until +7 + 16, so it finishes at +23 + 16 = +39."""
    (req,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 4096))
    assert req.latency_ns == approx(6 + 10 + 39 + local_prop[0])


@pytest.mark.parametrize(("second_offset", "same_channel"), [(256, False), (8 * 256, True)])
def test_a_hot_channel_queues_while_its_neighbours_idle(make_engine, resolver, local_prop, second_offset,
                                                        same_channel):
    """Two 256 B writes at t = 0. The second waits 1 ns behind the first at the PE, reaches the
    controller at 7 ns + L and starts its burst at 17 + L — unless its channel (burst index mod 8)
    is the first write's, busy until 16 + L + 16 = 32 + L."""
    a, b = run(make_engine(), PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 256),
               PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0, second_offset), 256))
    lat = local_prop[0]
    assert a.latency_ns == approx(6 + 10 + 16 + lat)
    assert b.latency_ns == approx((32 + 16 if same_channel else 17 + 16) + lat)


def test_hot_channel_is_slower_than_spread_channels(make_engine, resolver):
    def last_end(offsets):
        reqs = run(make_engine(), *[PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0, o), 256) for o in offsets])
        return max(r.t_end for r in reqs)

    spread = last_end([i * 256 for i in range(8)])
    hot = last_end([i * 8 * 256 for i in range(8)])
    # write i reaches the controller i ns after the first (each queues 1 ns more at the PE).
    # spread: burst i starts on channel i at +i and the last ends at +7 + 16;
    # hot: all on channel 0, back to back, the last ends at +8 x 16
    assert hot - spread == approx(8 * 16 - (7 + 16))


def test_hbm_slice_is_bandwidth_bound_at_8_channels(make_engine, resolver):
    """Large writes into one slice drain at 8 x 16 GB/s = 128 GB/s, below the 256 GB/s link."""
    (small,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 256 * KIB))
    (big,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 512 * KIB))
    assert big.latency_ns - small.latency_ns == pytest.approx(256 * KIB / 128, rel=0.005)


def test_hbm_read_of_8_bursts(make_engine, resolver, local_prop):
    """Command: 2 + 64/256 + 2 + 64/256 ns + L -> controller, +10 pickup; all 8 bursts drain in
    parallel in 16 ns; the 2048 B reply (1 ns flits) needs 1 + 2 + 1 ns + L' for its head and
    7 ns more for its tail."""
    (req,) = run(make_engine(), PeDmaReadMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 2048))
    fwd, back = local_prop
    t_cmd = 2 + 0.25 + 2 + 0.25 + fwd
    assert req.latency_ns == approx(t_cmd + 10 + 16 + 4 + 7 + back)


def test_hbm_read_reply_is_paced_by_the_channels(make_engine, resolver, local_prop):
    """4096 B: bursts 0..7 are ready at +16 and 8..15 only at +32. Paced evenly from +16 to +32, flit 8
    would leave before its data; the reply link takes 1 ns a flit, so the flits leave 1 ns apart from
    32 - 8 = +24 and the last at +39, 7 ns after it was read, then reaches the PE 1 + 2 + 1 ns + L' later."""
    (req,) = run(make_engine(), PeDmaReadMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 4096))
    fwd, back = local_prop
    t_cmd = 2 + 0.25 + 2 + 0.25 + fwd
    assert req.latency_ns == approx(t_cmd + 10 + 32 + 7 + 4 + back)


def test_pe_dma_read_is_slower_than_the_write_and_returns_on_the_reverse_path(make_engine, resolver,
                                                                              local_prop):
    w, r = (run(make_engine(), m)[0] for m in (PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 256),
                                               PeDmaReadMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 256)))
    fwd, back = local_prop
    assert w.latency_ns == approx(2 + 1 + 2 + 1 + 10 + 16 + fwd)
    assert r.latency_ns == approx(2 + 0.25 + 2 + 0.25 + 10 + 16 + 1 + 2 + 1 + fwd + back)
    assert r.latency_ns > w.latency_ns
    legs = {k for k, _, _, _ in r.hops}
    assert legs == {"read_cmd", "read_data"}
    cmd = [n for k, n, _, _ in r.hops if k == "read_cmd"]
    data = [n for k, n, _, _ in r.hops if k == "read_data"]
    assert cmd == [DMA0, R00, HBM0]
    assert data == cmd[::-1]


# ---------------------------------------------------------------------------------- paths by intent


def _types(graph, path):
    return [graph.nodes[n].type for n in path]


@pytest.mark.parametrize(("cube", "pe"), [(0, 3), (5, 3), (15, 7)])
def test_mcpu_dma_never_enters_a_pe_pipeline(make_engine, graph, resolver, cube, pe):
    (req,) = run(make_engine(), McpuDmaWriteMsg(0, 0, resolver.hbm_addr(0, cube, pe), 4096))
    path = req.legs[0]
    assert path[0] == "sip0.cube0.m_cpu" and path[-1] == f"sip0.cube{cube}.hbm_ctrl.pe{pe}"
    assert not [t for t in _types(graph, path) if t.startswith("pe_")]
    assert req.latency_ns > 0


@pytest.mark.parametrize("msg_type", [MemoryWriteMsg, MemoryReadMsg])
def test_host_memory_traffic_bypasses_the_io_cpu(make_engine, graph, resolver, msg_type):
    (req,) = run(make_engine(), msg_type(resolver.hbm_addr(1, 6, 2), 8192))
    for path in req.legs:
        types = _types(graph, path)
        assert "io_cpu" not in types
        assert not [t for t in types if t.startswith("pe_")]
    path = req.legs[0]
    assert path[:3] == ("tray.host_cpu", "fabric.switch0", "sip1.io0.pcie_ep")
    assert path[-1] == "sip1.cube6.hbm_ctrl.pe2"


def test_cross_sip_pe_dma_goes_through_both_endpoints_and_the_switch(make_engine, resolver):
    (req,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(1, 0, 0), 4096))
    path = req.legs[0]
    i0, isw, i1 = (path.index(n) for n in ("sip0.io0.pcie_ep", "fabric.switch0", "sip1.io0.pcie_ep"))
    assert i0 < isw < i1
    assert "tray.host_cpu" not in path
    assert path[0] == DMA0 and path[-1] == "sip1.cube0.hbm_ctrl.pe0"


def test_same_cube_pe_dma_stays_on_the_mesh(make_engine, graph, resolver):
    (req,) = run(make_engine(), PeDmaWriteMsg(0, 5, 1, resolver.hbm_addr(0, 5, 6), 4096))
    assert all(n.startswith("sip0.cube5.") for n in req.legs[0])
    assert set(_types(graph, req.legs[0][1:-1])) == {"router"}


# ---------------------------------------------------------------------------------- op log


def test_op_log_of_a_pe_dma_write_into_hbm(make_engine, resolver):
    eng = make_engine()
    addr = resolver.hbm_addr(0, 0, 0, 4096)
    (req,) = run(eng, PeDmaWriteMsg(0, 0, 0, addr, 3000))
    recs = eng.oplog.records
    hbm = [r for r in recs if r.op_name == "hbm_write"]
    dma = [r for r in recs if r.op_name == "dma_write"]
    assert len(recs) == 2 and len(hbm) == 1 and len(dma) == 1
    (h,), (d,) = hbm, dma
    assert h.component_id == HBM0 and h.op_kind == "memory"
    assert h.params == {"addr": 4096, "nbytes": 3000, "corr_id": req.corr_id}
    head_at_ctrl = [t_in for k, n, t_in, _ in req.hops if n == HBM0]
    assert h.t_start == approx(head_at_ctrl[0])
    assert h.t_end == approx(req.t_end)
    assert d.component_id == DMA0
    assert (d.t_start, d.t_end) == (req.t_submit, req.t_end)
    assert d.params["corr_id"] == req.corr_id and d.params["nbytes"] == 3000
    assert recs == sorted(recs, key=lambda r: r.t_start)


def test_op_log_of_reads_and_link_bound_memories(make_engine, resolver):
    eng = make_engine()
    reqs = run(eng, PeDmaReadMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 2048),
               MemoryWriteMsg(SRAM0, 1000),
               MemoryReadMsg(PhysAddr(0, 3, "mcpu", 64), 512))
    names = sorted((r.component_id, r.op_name) for r in eng.oplog.records)
    assert names == sorted([(HBM0, "hbm_read"), (DMA0, "dma_read"),
                            ("sip0.cube0.sram", "sram_write"), ("tray.host_cpu", "h2d_write"),
                            ("sip0.cube3.m_cpu", "m_cpu_read"), ("tray.host_cpu", "d2h_read")])
    by = {r.op_name: r for r in eng.oplog.records}
    assert by["hbm_read"].params["nbytes"] == 2048
    assert by["hbm_read"].t_end - by["hbm_read"].t_start == approx(10 + 16)
    assert by["sram_write"].params == {"addr": 0, "nbytes": 1000, "corr_id": reqs[1].corr_id}
    assert by["m_cpu_read"].params == {"addr": 64, "nbytes": 512, "corr_id": reqs[2].corr_id}
    assert by["m_cpu_read"].t_end - by["m_cpu_read"].t_start == approx(10.0)  # the M_CPU's overhead


# ---------------------------------------------------------------------------------- link-bound memories


def test_sram_write_is_bound_by_its_128_gbs_link(make_engine):
    lat = {}
    for n in (256 * KIB, 512 * KIB):
        (req,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, SRAM0, n))
        lat[n] = req.latency_ns
    assert lat[512 * KIB] - lat[256 * KIB] == pytest.approx(256 * KIB / 128, rel=0.005)


def test_small_sram_write_hand_sum(make_engine, graph):
    """64 B: 2 (DMA) + 3 x 2 (routers) + 5 (SRAM) ns, 3 x 64/256 + 64/128 ns on the wires, plus propagation."""
    (req,) = run(make_engine(), PeDmaWriteMsg(0, 0, 0, SRAM0, 64))
    path = req.legs[0]
    assert _types(graph, path) == ["pe_dma", "router", "router", "router", "sram"]
    prop = sum(graph.edge(a, b).latency_ns for a, b in itertools.pairwise(path))
    assert req.latency_ns == approx(2 + 6 + 5 + 0.75 + 0.5 + prop)


def test_sram_read_returns_at_link_speed(make_engine, graph):
    """Command out (64 B), 5 ns access, then 4096 B back with the 128 GB/s SRAM link setting the
    flit spacing (2 ns) for the rest of the way."""
    (req,) = run(make_engine(), PeDmaReadMsg(0, 0, 0, SRAM0, 4096))
    fwd, back = req.legs
    p_fwd = sum(graph.edge(a, b).latency_ns for a, b in itertools.pairwise(fwd))
    p_back = sum(graph.edge(a, b).latency_ns for a, b in itertools.pairwise(back))
    t_cmd = 2 + 6 + 3 * 64 / 256 + 64 / 128 + p_fwd
    t_back = 6 + 256 / 128 + 3 * 256 / 256 + 15 * 2 + p_back
    assert req.latency_ns == approx(t_cmd + 5 + t_back)


def test_requesters_reject_anything_but_read_data(make_engine):
    """A PE DMA engine is not a memory: ending a write there is a component error."""
    from kernbench.sim import ComponentError

    eng = make_engine()
    comp = eng.components[DMA0]

    class _Tr:
        kind = "write"

    class _Pkt:
        transfer = _Tr()

    with pytest.raises(ComponentError, match="is not a terminal"):
        comp.on_packet(_Pkt(), 0.0)
