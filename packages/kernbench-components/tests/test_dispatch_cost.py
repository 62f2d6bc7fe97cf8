"""The dispatch cost model: PE_CPU pays FIXED + logical_bytes x R cycles per command (ADR 0013)."""

from __future__ import annotations

import pytest

from kernbench.components import KernelError, default_registry
from kernbench.components.launch import KernelLaunchMsg
from kernbench.sim import GraphEngine
from kernbench.tl import DescriptorTooLarge, TensorArg
from kernbench.topology import AddressResolver, compile_spec, spec_from_dict


def _run(graph, fn, args=()):
    eng = GraphEngine(graph, default_registry())
    req = eng.submit(KernelLaunchMsg("k", fn, (((0, 0, 0), tuple(args)),)))
    eng.run()
    return eng, req


def _dispatches(eng):
    return [r for r in eng.oplog.records if r.op_name == "dispatch"]


def _kernel(tl, a):
    x = tl.load(a)  # DmaReadCmd
    y = tl.exp(x)  # ComputeCmd, one operand
    z = x + y  # ComputeCmd, two operands
    tl.wait(tl.composite(z, tl.trans(z)))  # a 1-op GEMM composite
    tl.wait(tl.composite(z, tl.trans(z), epilogue=[{"op": "scale", "value": 0.5}, {"op": "relu"}]))


@pytest.mark.parametrize(("fixed", "r"), [(40.0, 0.0625), (10.0, 0.5), (0.0, 1.0)])
def test_every_dispatch_follows_the_formula(fixed, r):
    graph = compile_spec(spec_from_dict({"pe": {"cost_model": {"fixed_cycles": fixed, "r_cycles_per_byte": r}}}))
    arg = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (32, 32), "float16")
    eng, req = _run(graph, _kernel, (arg,))
    assert req.error is None
    ds = _dispatches(eng)
    assert [d.params["cmd"] for d in ds] == ["DmaReadCmd", "ComputeCmd", "ComputeCmd", "ComputeCmd",
                                             "CompositeCmd", "ComputeCmd", "CompositeCmd"]
    for d in ds:
        assert d.params["cycles"] == pytest.approx(fixed + d.params["logical_bytes"] * r)
        assert d.t_end - d.t_start == pytest.approx(d.params["cycles"])  # 1 GHz: one cycle per ns


def test_descriptor_sizes_follow_the_counting_rule():
    graph = compile_spec(spec_from_dict({}))
    arg = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (32, 32), "float16")
    eng, _ = _run(graph, _kernel, (arg,))
    sizes = [d.params["logical_bytes"] for d in _dispatches(eng)]
    # DMA: framing 4 + opcode 1 + two addresses 16 + size 4
    assert sizes[0] == 25
    # exp: framing 4 + opcode 1 + list 1 + one operand 8 + out 8 + extras list 1
    assert sizes[1] == 23
    # add: two operands
    assert sizes[2] == 31
    # 1-op GEMM composite: framing 4 + ops list 1 + head (opcode 1 + scope 1 + list 1 + a, b 16 + out 8
    # + list 1 + m, n, k 12) + rw list 1 + output 8 = 54 bytes: 40 + 54 * 0.0625 = 43.4 cycles
    assert sizes[4] == 54
    # + scale (1 + 1 + 1 + out 8 + 1 + value 4 = 16) + relu (12)
    assert sizes[6] == 54 + 16 + 12


def test_cycles_cost_exactly_what_they_ask():
    graph = compile_spec(spec_from_dict({}))
    eng, _ = _run(graph, lambda tl: tl.cycles(7))
    (d,) = _dispatches(eng)
    assert d.params["cycles"] == 7 and d.t_end - d.t_start == pytest.approx(7.0)


def test_a_composite_over_the_descriptor_cap_is_rejected_at_emit():
    graph = compile_spec(spec_from_dict({}))
    assert issubclass(DescriptorTooLarge, ValueError)

    def kernel(tl):
        a = tl.zeros((32, 32), "float16")
        tl.composite(a, a, epilogue=[{"op": "scale", "value": 1.0}] * 70)  # 54 + 70 * 16 > 1024

    eng, req = _run(graph, kernel)
    assert isinstance(req.error, KernelError) and "DescriptorTooLarge" in str(req.error)
    assert "over the 1024-byte cap" in str(req.error)
    assert not [d for d in _dispatches(eng) if d.params["cmd"] == "CompositeCmd"]  # nothing was issued


def test_a_composite_within_the_cap_runs():
    graph = compile_spec(spec_from_dict({}))

    def kernel(tl):
        a = tl.zeros((32, 32), "float16")
        tl.wait(tl.composite(a, a, epilogue=[{"op": "scale", "value": 1.0}] * 60))  # 54 + 960 = 1014

    _, req = _run(graph, kernel)
    assert req.error is None


# The PE clock converts dispatch cycles to time: ns = cycles / clock_ghz. Every shipped topology runs at 1 GHz,
# where cycles and ns coincide, so these tests use other clocks.
@pytest.mark.parametrize("clock_ghz", [2.0, 0.5, 1.25])
def test_dispatch_time_is_cycles_divided_by_the_clock(clock_ghz):
    fixed, r = 40.0, 0.0625
    graph = compile_spec(spec_from_dict({"pe": {"clock_ghz": clock_ghz,
                                                "cost_model": {"fixed_cycles": fixed, "r_cycles_per_byte": r}}}))
    arg = TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (32, 32), "float16")
    eng, req = _run(graph, _kernel, (arg,))
    assert req.error is None
    ds = _dispatches(eng)
    assert len(ds) == 7
    # Descriptor sizes from the counting rule (test_descriptor_sizes_follow_the_counting_rule): DMA 25 bytes,
    # exp 23, add 31, composite 54; the clock changes the time a dispatch takes, never its cycles.
    cycles = [fixed + n * r for n in (25, 23, 31)]
    assert [d.params["cycles"] for d in ds[:3]] == pytest.approx(cycles)
    for d in ds:
        want_ns = (fixed + d.params["logical_bytes"] * r) / clock_ghz
        assert d.t_end - d.t_start == pytest.approx(want_ns, rel=1e-12)
    cpu = eng.components.get("sip0.cube0.pe0.pe_cpu")
    total_cycles = sum(fixed + d.params["logical_bytes"] * r for d in ds)
    assert cpu.count == 7 and cpu.busy_ns == pytest.approx(total_cycles / clock_ghz, rel=1e-12)


@pytest.mark.parametrize(("clock_ghz", "first_ns", "second_ns"), [(2.0, 3.5, 2.5), (0.5, 14.0, 10.0),
                                                                  (4.0, 1.75, 1.25)])
def test_cycles_take_n_over_the_clock_back_to_back(clock_ghz, first_ns, second_ns):
    graph = compile_spec(spec_from_dict({"pe": {"clock_ghz": clock_ghz}}))

    def kernel(tl):
        tl.cycles(7)
        tl.cycles(5)

    eng, req = _run(graph, kernel)
    assert req.error is None
    a, b = _dispatches(eng)
    assert (a.params["cycles"], b.params["cycles"]) == (7, 5)  # cycles do not depend on the clock
    assert a.t_end - a.t_start == pytest.approx(first_ns, rel=1e-12)
    assert b.t_end - b.t_start == pytest.approx(second_ns, rel=1e-12)
    assert b.t_start == a.t_end  # the second dispatch waits for the CPU to be free
