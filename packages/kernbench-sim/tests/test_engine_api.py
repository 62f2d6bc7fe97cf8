"""The engine's contract: requests and correlation ids, completion events, traces, determinism,
error reporting, the component registry and the op log."""

from __future__ import annotations

import itertools

import pytest

from kernbench.sim import (
    Component,
    ComponentError,
    ComponentRegistry,
    DeadlockError,
    GraphEngine,
    McpuDmaWriteMsg,
    MemoryReadMsg,
    MemoryWriteMsg,
    MessageError,
    OpLog,
    PeDmaReadMsg,
    PeDmaWriteMsg,
)
from kernbench.topology import KernbenchError, PhysAddr, compile_spec, spec_from_dict

SRAM0 = PhysAddr(0, 0, "sram", 0)


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-9)


def every_kind(resolver):
    """One message of each supported type (the small topology has one SIP of four cubes)."""
    return [
        MemoryWriteMsg(resolver.hbm_addr(0, 1, 2), 3000),
        MemoryReadMsg(resolver.hbm_addr(0, 3, 5, 4096), 5000),
        PeDmaWriteMsg(0, 0, 1, SRAM0, 9000),
        PeDmaReadMsg(0, 2, 6, resolver.hbm_addr(0, 1, 0), 700),
        McpuDmaWriteMsg(0, 1, resolver.hbm_addr(0, 1, 4), 64),
        PeDmaWriteMsg(0, 0, 1, PhysAddr(0, 3, "mcpu", 128), 256),
    ]


# ---------------------------------------------------------------------------------- requests


def test_correlation_ids_are_unique_and_increasing(make_engine, resolver):
    eng = make_engine()
    reqs = [eng.submit(m) for m in every_kind(resolver) * 2]
    ids = [r.corr_id for r in reqs]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids) and all(b > a for a, b in itertools.pairwise(ids))
    eng.run()
    assert [r.corr_id for r in reqs] == ids  # stamped once, never rewritten


def test_done_event_fires_at_t_end_with_the_request(make_engine, resolver):
    eng = make_engine()
    seen = {}

    def waiter(req):
        value = yield req.done
        seen[req.corr_id] = (eng.env.now, value)

    reqs = [eng.submit(m) for m in every_kind(resolver)]
    for r in reqs:
        eng.env.process(waiter(r))
    eng.run()
    for r in reqs:
        t, value = seen[r.corr_id]
        assert value is r
        assert t == r.t_end
        assert eng.now >= r.t_end


def test_latency_before_completion_is_an_error(make_engine):
    eng = make_engine()
    req = eng.submit(MemoryWriteMsg(SRAM0, 64))
    with pytest.raises(RuntimeError, match=f"request {req.corr_id} has not completed"):
        _ = req.latency_ns
    eng.run(until=1.0)  # the PCIe hop alone takes longer
    assert req.t_end is None
    eng.run()
    assert req.latency_ns > 0


def test_every_routed_request_takes_time_and_traces_its_path(make_engine, resolver):
    eng = make_engine()
    reqs = [eng.submit(m) for m in every_kind(resolver)]
    eng.run()
    for r in reqs:
        assert r.t_end is not None and r.latency_ns > 0
        assert r.t_end > r.t_submit
        legs = ("write",) if len(r.legs) == 1 else ("read_cmd", "read_data")
        for leg, path in zip(legs, r.legs, strict=True):
            entries = [(n, t_in, t_out) for k, n, t_in, t_out in r.hops if k == leg]
            assert [n for n, _, _ in entries] == list(path)
            times = [t for _, t_in, t_out in entries for t in (t_in, t_out)]
            assert all(t_out >= t_in for _, t_in, t_out in entries)
            assert times == sorted(times)  # in path order, time only moves forward
        assert {k for k, _, _, _ in r.hops} == set(legs)
        assert r.hops[-1][3] <= r.t_end


def test_read_data_returns_along_the_reversed_command_path(make_engine, resolver):
    eng = make_engine()
    req = eng.submit(PeDmaReadMsg(0, 0, 3, resolver.hbm_addr(0, 3, 1), 4096))
    eng.run()
    cmd = [n for k, n, _, _ in req.hops if k == "read_cmd"]
    data = [n for k, n, _, _ in req.hops if k == "read_data"]
    assert cmd[0] == "sip0.cube0.pe3.pe_dma" and cmd[-1] == "sip0.cube3.hbm_ctrl.pe1"
    assert data == cmd[::-1]
    last_cmd = max(t for k, _, _, t in req.hops if k == "read_cmd")
    first_data = min(t for k, _, t, _ in req.hops if k == "read_data")
    assert first_data >= last_cmd


def test_trace_can_be_switched_off_without_changing_timing(make_engine, resolver):
    on, off = make_engine(), make_engine(record_hops=False)
    a = [on.submit(m) for m in every_kind(resolver)]
    b = [off.submit(m) for m in every_kind(resolver)]
    on.run()
    off.run()
    assert all(r.hops for r in a)
    assert all(r.hops == [] for r in b)
    assert [r.t_end for r in a] == [r.t_end for r in b]


def test_a_request_submitted_later_takes_the_same_time(make_engine):
    """Latency does not depend on the submit time of an otherwise idle fabric."""
    msg = PeDmaWriteMsg(0, 0, 0, SRAM0, 10_000)
    first = make_engine()
    r0 = first.submit(msg)
    first.run()

    eng = make_engine()
    box = {}

    def later():
        yield eng.env.timeout(100.0)
        box["req"] = eng.submit(msg)

    eng.env.process(later())
    eng.run()
    r1 = box["req"]
    assert r1.t_submit == 100.0
    assert r1.latency_ns == approx(r0.latency_ns)
    assert r1.t_end == approx(100.0 + r0.latency_ns)


def _snapshot(eng, reqs):
    return (
        [r.corr_id for r in reqs],
        [r.hops for r in reqs],
        [r.latency_ns for r in reqs],
        [(o.t_start, o.t_end, o.component_id, o.op_name) for o in eng.oplog.records],
        eng.link_stats(),
        eng.events,
    )


def test_two_fresh_engines_are_bit_identical(make_engine, resolver):
    msgs = every_kind(resolver) * 3 + [PeDmaWriteMsg(0, 0, 0, SRAM0, 20_000), MemoryReadMsg(SRAM0, 20_000)]
    snaps = []
    for _ in range(2):
        eng = make_engine()
        reqs = [eng.submit(m) for m in msgs]
        eng.run()
        snaps.append(_snapshot(eng, reqs))
    assert snaps[0] == snaps[1]
    assert len(snaps[0][3]) == len(msgs)
    assert any(s.max_wait_ns > 0 for s in snaps[0][4])  # the run did contend somewhere


# ---------------------------------------------------------------------------------- bad messages


@pytest.mark.parametrize("obj", [object(), "write 64 bytes", (SRAM0, 64), None])
def test_unsupported_object_is_a_message_error(make_engine, obj):
    eng = make_engine()
    with pytest.raises(MessageError, match="cannot submit") as info:
        eng.submit(obj)
    for name in ("MemoryWriteMsg", "MemoryReadMsg", "PeDmaWriteMsg", "PeDmaReadMsg", "McpuDmaWriteMsg"):
        assert name in str(info.value)


@pytest.mark.parametrize("nbytes", [0, -1, -4096, True, 1.5, 64.0, "64"])
def test_non_positive_or_non_integer_size_is_a_message_error(make_engine, nbytes):
    eng = make_engine()
    with pytest.raises(MessageError, match="nbytes must be a positive integer"):
        eng.submit(MemoryWriteMsg(SRAM0, nbytes))
    eng.run()  # nothing was scheduled, nothing is pending


def test_address_that_is_not_a_physaddr_is_a_message_error(make_engine):
    eng = make_engine()
    with pytest.raises(MessageError, match="expected a PhysAddr"):
        eng.submit(MemoryWriteMsg(SRAM0.encode(), 64))


@pytest.mark.parametrize("msg", [
    MemoryWriteMsg(PhysAddr(3, 0, "hbm", 0), 64),                     # no SIP 3
    MemoryWriteMsg(PhysAddr(0, 9, "sram", 0), 64),                    # no cube 9
    PeDmaWriteMsg(0, 0, 8, SRAM0, 64),                                # no PE 8
    MemoryWriteMsg(PhysAddr(0, 0, "hbm", 6 * 2**30 - 10), 64),        # crosses the end of PE 0's slice
])
def test_unroutable_messages_fail_at_submit_and_leave_the_engine_clean(make_engine, msg):
    eng = make_engine()
    with pytest.raises(KernbenchError):
        eng.submit(msg)
    ok = eng.submit(MemoryWriteMsg(SRAM0, 64))
    eng.run()
    assert ok.latency_ns > 0


# ---------------------------------------------------------------------------------- components on a route


class BlackHole(Component):
    """A terminal that swallows packets and never reports them landed."""

    __slots__ = ()

    def on_packet(self, pkt, t_head):
        pass


class SlowRelay(Component):
    """A forwarding node 10 ns slower than its topology says."""

    __slots__ = ()

    def __init__(self, engine, node):
        super().__init__(engine, node)
        self.overhead_ns = node.overhead_ns + 10.0


class Relay(Component):
    __slots__ = ()


def test_a_terminal_that_never_lands_is_a_deadlock_naming_the_request(make_engine, registry, resolver):
    eng = make_engine(reg=registry.replace("hbm_ctrl", BlackHole))
    ok = eng.submit(MemoryWriteMsg(SRAM0, 64))
    lost = eng.submit(PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 64))
    with pytest.raises(DeadlockError) as info:
        eng.run()
    msg = str(info.value)
    assert f"corr {lost.corr_id} PeDmaWriteMsg from sip0.cube0.pe0.pe_dma" in msg
    assert "1 request(s)" in msg
    assert f"corr {ok.corr_id} " not in msg
    assert ok.latency_ns > 0 and lost.t_end is None


def test_bounded_run_does_not_report_deadlock(make_engine, registry, resolver):
    eng = make_engine(reg=registry.replace("hbm_ctrl", BlackHole))
    req = eng.submit(PeDmaWriteMsg(0, 0, 0, resolver.hbm_addr(0, 0, 0), 64))
    eng.run(until=1e6)
    assert req.t_end is None


def test_a_route_through_an_unbound_node_type_names_node_and_type(make_engine, ipcq_unbound_graph):
    """With pe_ipcq left out of the components: section, no route may pass through it."""
    eng = make_engine(ipcq_unbound_graph)
    with pytest.raises(ComponentError) as info:
        eng.route(("sip0.cube0.pe0.pe_scheduler", "sip0.cube0.pe0.pe_ipcq"))
    msg = str(info.value)
    assert "sip0.cube0.pe0.pe_ipcq" in msg and "(type pe_ipcq)" in msg and "'pe_ipcq'" in msg
    eng.run()  # nothing was submitted


def test_a_write_ending_at_a_non_terminal_is_a_component_error(make_engine, registry):
    eng = make_engine(reg=registry.replace("sram", Relay))
    eng.submit(MemoryWriteMsg(SRAM0, 64))
    with pytest.raises(ComponentError, match=r"sip0\.cube0\.sram \(Relay\) is not a terminal: a write transfer"):
        eng.run()


def test_replacing_forwarding_adds_its_delay_once_per_forwarding_node(make_engine, small_graph, registry,
                                                                      resolver):
    msg = MemoryWriteMsg(resolver.hbm_addr(0, 3, 6), 5000)
    base = make_engine(reg=registry)
    r0 = base.submit(msg)
    base.run()
    slow = make_engine(reg=registry.replace("forwarding", SlowRelay))
    r1 = slow.submit(msg)
    slow.run()
    bindings = small_graph.spec.component_bindings
    n_fwd = sum(1 for n in r0.legs[0] if bindings.get(small_graph.nodes[n].type) == "forwarding")
    # host -> switch -> pcie_ep -> io_noc -> io_ucie -> ucie_phy -> routers ... -> hbm_ctrl
    assert n_fwd >= 6
    assert r1.legs == r0.legs
    assert r1.latency_ns - r0.latency_ns == approx(10.0 * n_fwd)


def test_replace_returns_a_copy_and_leaves_the_original_alone(registry, test_impls):
    original = dict(test_impls)
    swapped = registry.replace("forwarding", SlowRelay)
    added = registry.replace("brand_new", SlowRelay)
    assert registry.get("forwarding") is original["forwarding"]
    assert swapped.get("forwarding") is SlowRelay
    assert "brand_new" in added.names and "brand_new" not in registry.names
    assert registry.names == sorted(original)


def test_binding_a_node_type_to_another_name_in_the_spec(registry):
    """components: {router: slow_router} swaps every router without touching the test logic."""
    graph = compile_spec(spec_from_dict({"system": {"sips": {"count": 1, "grid": [1, 1]}},
                                         "sip": {"cube_mesh": {"w": 1, "h": 1}},
                                         "components": {"router": "slow_router"}}))
    registry.register("slow_router", SlowRelay)
    plain = ComponentRegistry((n, registry.get(n)) for n in registry.names if n != "slow_router")
    plain.register("slow_router", registry.get("forwarding"))
    msg = PeDmaWriteMsg(0, 0, 0, SRAM0, 256)
    reqs = []
    for reg in (plain, registry):
        eng = GraphEngine(graph, reg)
        reqs.append(eng.submit(msg))
        eng.run()
    n_routers = sum(1 for n in reqs[0].legs[0] if graph.nodes[n].type == "router")
    assert n_routers >= 1
    assert reqs[1].latency_ns - reqs[0].latency_ns == approx(10.0 * n_routers)


def test_unknown_implementation_name_lists_the_known_ones(registry):
    graph = compile_spec(spec_from_dict({"system": {"sips": {"count": 1, "grid": [1, 1]}},
                                         "sip": {"cube_mesh": {"w": 1, "h": 1}},
                                         "components": {"sram": "magic_sram"}}, source="t.yaml"))
    with pytest.raises(ComponentError) as info:
        GraphEngine(graph, registry)
    msg = str(info.value)
    assert "t.yaml" in msg and "components.sram" in msg and "'magic_sram'" in msg
    assert "known: " + ", ".join(sorted(registry.names)) in msg


def test_registry_rejects_duplicates_and_unknown_lookups(registry):
    with pytest.raises(ComponentError, match="'sram' is already registered"):
        registry.register("sram", Relay)
    with pytest.raises(ComponentError, match="already registered"):
        ComponentRegistry([("a", Relay), ("a", SlowRelay)])
    with pytest.raises(ComponentError) as info:
        registry.get("nope")
    assert "'nope'" in str(info.value) and ", ".join(registry.names) in str(info.value)
    assert registry.get("sram") is not Relay  # the failed register changed nothing


def test_a_missing_binding_name_fails_at_construction(small_graph, test_impls):
    reg = ComponentRegistry(p for p in test_impls if p[0] != "m_cpu")
    with pytest.raises(ComponentError, match=r"components\.m_cpu = 'm_cpu' is an unknown"):
        GraphEngine(small_graph, reg)


def test_only_bound_node_types_get_components(make_engine, ipcq_unbound_graph):
    graph = ipcq_unbound_graph
    eng = make_engine(graph)
    bound = set(graph.spec.component_bindings)
    assert set(eng.components) == {n.id for n in graph.nodes.values() if n.type in bound}
    assert "sip0.cube0.pe0.pe_ipcq" not in eng.components
    for cid, comp in eng.components.items():
        assert comp.id == cid and comp.overhead_ns == graph.nodes[cid].overhead_ns


def test_mcpu_dma_into_its_own_memory_is_rejected_at_submit(make_engine):
    """Source == destination gives a one-node path with no wire; it must be refused up front
    (it used to crash the run with an IndexError in _hop)."""
    eng = make_engine()
    with pytest.raises(MessageError, match=r"sip0\.cube1\.m_cpu"):
        eng.submit(McpuDmaWriteMsg(0, 1, PhysAddr(0, 1, "mcpu", 0), 64))
    other = eng.submit(McpuDmaWriteMsg(0, 1, PhysAddr(0, 2, "mcpu", 0), 64))
    eng.run()
    assert other.latency_ns > 0


# ---------------------------------------------------------------------------------- op log


def test_oplog_is_sorted_by_start_and_stable_for_equal_starts():
    log = OpLog()
    for i, t in enumerate([5.0, 1.0, 5.0, 3.0, 1.0, 5.0]):
        log.record(t, t + 1, f"c{i}", "memory", "op", {"i": i})
    assert [r.t_start for r in log.records] == [1.0, 1.0, 3.0, 5.0, 5.0, 5.0]
    assert [r.params["i"] for r in log.records] == [1, 4, 3, 0, 2, 5]
    log.record(2.0, 2.5, "late", "memory", "op", {"i": 6})
    log.record(9.0, 9.5, "last", "memory", "op", {"i": 7})
    assert [r.params["i"] for r in log.records] == [1, 4, 6, 3, 0, 2, 5, 7]
    assert len(log) == 8


def test_request_level_op_records(make_engine, resolver):
    eng = make_engine()
    msgs = every_kind(resolver)
    reqs = [eng.submit(m) for m in msgs]
    eng.run()
    recs = eng.oplog.records
    assert len(recs) == len(msgs)  # the test components log nothing themselves
    by_corr = {r.params["corr_id"]: r for r in recs}
    expected = {MemoryWriteMsg: ("h2d_write", "tray.host_cpu"), MemoryReadMsg: ("d2h_read", "tray.host_cpu"),
                PeDmaWriteMsg: ("dma_write", None), PeDmaReadMsg: ("dma_read", None),
                McpuDmaWriteMsg: ("mcpu_dma_write", None)}
    for req in reqs:
        rec = by_corr[req.corr_id]
        op, src = expected[type(req.msg)]
        assert rec.op_name == op
        assert rec.component_id == (src or req.legs[0][0])
        assert (rec.t_start, rec.t_end) == (req.t_submit, req.t_end)
        assert rec.params["nbytes"] == req.msg.nbytes
    assert by_corr[reqs[4].corr_id].component_id == "sip0.cube1.m_cpu"
    assert by_corr[reqs[2].corr_id].component_id == "sip0.cube0.pe1.pe_dma"


def test_link_stats_can_cover_every_directed_edge(make_engine, small_graph):
    from kernbench.sim import MemoryWriteMsg
    from kernbench.topology import AddressResolver

    eng = make_engine()
    eng.submit(MemoryWriteMsg(AddressResolver(small_graph).hbm_addr(0, 0, 0), 4096))
    eng.run()
    every = eng.link_stats(include_idle=True)
    assert [(s.src, s.dst) for s in every] == [(e.src, e.dst) for e in small_graph.edges]
    used = eng.link_stats()
    assert [s for s in every if s.packets] == used
    assert sum(s.bytes for s in every) == 4096 * len(used)


def test_engines_on_one_graph_share_its_router(small_graph, registry):
    """Routes are a function of the graph only: every engine on a graph uses the router PathRouter.shared gives
    (one route search per route across engines), unless one is passed."""
    from kernbench.topology import PathRouter

    a, b = GraphEngine(small_graph, registry), GraphEngine(small_graph, registry)
    assert a.router is b.router is PathRouter.shared(small_graph)
    mine = PathRouter(small_graph)
    assert GraphEngine(small_graph, registry, router=mine).router is mine
