"""Shared fixtures of the engine tests: a small topology and a registry of tiny test components.

``kernbench.sim`` sits below ``kernbench.components``, so these tests never import the real
components; they bind every implementation name the spec's default ``components:`` section
uses to one of three minimal classes defined here.
"""

from __future__ import annotations

import pytest

from kernbench.sim import Component, ComponentRegistry, GraphEngine
from kernbench.topology import AddressResolver, compile_spec, spec_from_dict

# One SIP of 2 x 2 cubes: small enough to compile in a fraction of a second.
SMALL = {"system": {"sips": {"count": 1, "grid": [1, 1]}}, "sip": {"cube_mesh": {"w": 2, "h": 2}}}


class Relay(Component):
    """A forwarding node: the engine applies its overhead; it is never a terminal."""

    __slots__ = ()


class Requester(Component):
    """A request source that also absorbs read data once the last flit is in."""

    __slots__ = ()

    def on_packet(self, pkt, t_head):
        if pkt.transfer.kind != "read_data":
            super().on_packet(pkt, t_head)
        self.engine.landed(pkt, pkt.t_tail)


class LinkBoundSink(Component):
    """A terminal as fast as its link: a write lands after its last flit plus the node overhead;
    a read command is answered after the overhead with every reply packet ready at once."""

    __slots__ = ()

    def on_packet(self, pkt, t_head):
        tr = pkt.transfer
        if tr.kind == "write":
            self.engine.landed(pkt, pkt.t_tail + self.overhead_ns)
        elif tr.kind == "read_cmd":
            n_packets = -(-tr.read_nbytes // self.engine.packet_bytes)
            self.engine.read_reply(tr, [(t_head + self.overhead_ns, 0.0)] * n_packets)
        else:
            super().on_packet(pkt, t_head)


TEST_IMPLS = (
    ("host", Requester),
    ("pe_dma", Requester),
    ("forwarding", Relay),
    ("pcie_ep", Relay),
    ("hbm_ctrl", LinkBoundSink),
    ("sram", LinkBoundSink),
    ("m_cpu", LinkBoundSink),
    # Control-plane and PE blocks the default spec binds; no route in these tests ends at them.
    *((name, Relay) for name in ("io_cpu", "pe_cpu", "pe_scheduler", "pe_tcm", "pe_fetch_store", "pe_gemm",
                                 "pe_math", "pe_mmu", "pe_ipcq")),
)


@pytest.fixture(scope="session")
def small_graph():
    return compile_spec(spec_from_dict(SMALL))


@pytest.fixture(scope="session")
def ipcq_unbound_graph():
    """The small topology with the pe_ipcq node type left without an implementation."""
    from dataclasses import replace

    spec = spec_from_dict(SMALL)
    return compile_spec(replace(spec, components=tuple(kv for kv in spec.components if kv[0] != "pe_ipcq")))


@pytest.fixture
def registry():
    """A fresh registry of the test components (fresh so tests may mutate it)."""
    return ComponentRegistry(TEST_IMPLS)


@pytest.fixture
def make_engine(small_graph):
    """Factory of fresh engines; defaults to the small graph and the test registry."""

    def make(graph=None, reg=None, *, record_hops=True):
        return GraphEngine(graph or small_graph, reg or ComponentRegistry(TEST_IMPLS), record_hops=record_hops)

    return make


@pytest.fixture
def resolver(small_graph):
    return AddressResolver(small_graph)


@pytest.fixture(scope="session")
def test_impls():
    """The (name, class) pairs of the test registry, for tests that build registries themselves."""
    return TEST_IMPLS
