"""Behaviour the mutation run (tests/mutation/mutate.py) found untested in kernbench-components, pinned with
values worked out by hand from the default topology's constants (1 GHz PE clock, 64 math lanes, 256 GB/s mesh
links, 512 GB/s TCM channels, 256 B flits, 4096 B packets)."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.components import default_registry
from kernbench.components.launch import KernelLaunchMsg
from kernbench.sim import GraphEngine, MemoryWriteMsg
from kernbench.sim.messages import PeDmaWriteMsg
from kernbench.tl import TensorArg
from kernbench.topology import AddressResolver, PhysAddr


def test_the_constants_these_hand_sums_use(graph):
    spec = graph.spec
    assert (spec.pe.clock_ghz, spec.pe.math_lanes) == (1.0, 64)
    assert (spec.pe.tcm.write_bw_gbs, spec.cube.noc.link_bw_gbs) == (512.0, 256.0)
    assert (spec.fabric.flit_bytes, spec.fabric.packet_bytes) == (256, 4096)


def _math_stage_ns(graph, shapes) -> list[float]:
    """Durations of the math engine's work when a kernel on sip0.cube0.pe0 takes ``exp`` of one f16 tensor of
    each of ``shapes`` in turn."""
    eng = GraphEngine(graph, default_registry(), data=False)
    res = AddressResolver(graph)
    args = []
    for i, shape in enumerate(shapes):
        addr = res.hbm_addr(0, 0, 0, i << 16)
        eng.submit(MemoryWriteMsg(addr, int(np.prod(shape)) * 2))
        args.append(TensorArg(addr, shape, "float16"))
    eng.run()

    def kernel(tl, *xs):
        for x in xs:
            tl.exp(tl.load(x))

    req = eng.submit(KernelLaunchMsg("k", kernel, (((0, 0, 0), tuple(args)),)))
    eng.run()
    assert req.error is None
    return [r.t_end - r.t_start for r in eng.oplog.records if r.component_id == "sip0.cube0.pe0.pe_math"]


def test_a_partly_filled_lane_group_costs_a_whole_cycle(graph):
    """The vector engine works ``lanes`` elements per cycle: 64 elements take one 1 ns cycle, 65 take two, one
    element takes a whole cycle too, 5 x 13 = 65 elements two."""
    assert _math_stage_ns(graph, [(1, 64), (1, 65), (1, 1), (5, 13), (2, 64)]) == \
        [pytest.approx(v) for v in (1.0, 2.0, 1.0, 2.0, 2.0)]


def _write_into_pe1_tcm(graph, nbytes: int) -> float:
    eng = GraphEngine(graph, default_registry())
    req = eng.submit(PeDmaWriteMsg(0, 0, 0, PhysAddr(0, 0, "tcm", 0, 1), nbytes))
    eng.run()
    assert req.legs[0][-1] == "sip0.cube0.pe1.pe_tcm"
    return req.latency_ns


def test_a_write_into_a_tcm_lands_with_its_last_flit_not_at_tcm_speed(graph):
    """PE 0's DMA writes into PE 1's TCM over 256 GB/s mesh links: one flit per ns reaches the TCM.

    A one-flit write is absorbed 256 / 512 = 0.5 ns after its head arrives. A 16-flit packet's last flit arrives
    15 ns after its head, later than the 4096 / 512 = 8 ns the TCM channel itself would need, so it lands
    15 ns after the head: 14.5 ns after the one-flit write. A second packet streams right behind the first and
    adds another 16 flits of 1 ns."""
    one_flit = _write_into_pe1_tcm(graph, 256)
    assert _write_into_pe1_tcm(graph, 4096) - one_flit == pytest.approx(15.0 - 0.5)
    assert _write_into_pe1_tcm(graph, 8192) - one_flit == pytest.approx(31.0 - 0.5)
