"""Tests of the 51-bit physical address layout and the address resolver.

Layout (by hand from the module docstring): SIP bits 50..47, CUBE 46..42, TYPE 41..39, field 38..0;
non-HBM fields are PE(5) | offset(34).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.topology import AddressError, AddressResolver, PhysAddr, compile_spec, decode, spec_from_dict

GIB = 1 << 30
MIB = 1 << 20
SLICE = 48 * GIB // 8  # 6 GiB per PE
TCM = 16 * MIB
SRAM = 32 * MIB

sips = st.integers(0, 15)
cubes = st.integers(0, 31)
hbm_offsets = st.integers(0, (1 << 39) - 1)
unit_offsets = st.integers(0, (1 << 34) - 1)


def addresses():
    hbm = st.builds(PhysAddr, sips, cubes, st.just("hbm"), hbm_offsets)
    tcm = st.builds(PhysAddr, sips, cubes, st.just("tcm"), unit_offsets, st.integers(0, 31))
    other = st.builds(PhysAddr, sips, cubes, st.sampled_from(["sram", "mcpu"]), unit_offsets)
    return st.one_of(hbm, tcm, other)


@pytest.fixture(scope="module")
def resolver():
    # The default hardware (2 SIPs, 16 cubes, 8 PEs) without the cost of a repo file.
    return AddressResolver(compile_spec(spec_from_dict({})))


# --------------------------------------------------------------------------- encoding


def manual_encode(sip, cube, code, body):
    return sip * 2**47 + cube * 2**42 + code * 2**39 + body


def test_encode_known_values():
    assert PhysAddr(0, 0, "hbm", 0).encode() == 0
    assert PhysAddr(1, 0, "hbm", 0).encode() == 2**47
    assert PhysAddr(0, 1, "hbm", 0).encode() == 2**42
    assert PhysAddr(0, 0, "tcm", 0).encode() == 2**39
    assert PhysAddr(0, 0, "sram", 0).encode() == 2 * 2**39
    assert PhysAddr(0, 0, "mcpu", 0).encode() == 3 * 2**39
    assert PhysAddr(0, 0, "tcm", 5, pe=3).encode() == 2**39 + 3 * 2**34 + 5
    assert PhysAddr(15, 31, "hbm", 2**39 - 1).encode() == 2**51 - 1 - 7 * 2**39  # all ones except the 3 type bits
    assert PhysAddr(3, 7, "hbm", 123).encode() == manual_encode(3, 7, 0, 123)


def test_decode_known_values():
    assert decode(manual_encode(2, 5, 1, 7 * 2**34 + 99)) == PhysAddr(2, 5, "tcm", 99, pe=7)
    assert decode(manual_encode(1, 2, 0, 6 * GIB)) == PhysAddr(1, 2, "hbm", 6 * GIB)
    assert decode(manual_encode(0, 0, 2, 10)) == PhysAddr(0, 0, "sram", 10)
    assert decode(manual_encode(0, 0, 3, 10)) == PhysAddr(0, 0, "mcpu", 10)


@settings(max_examples=300, deadline=None)
@given(addresses())
def test_round_trip(addr):
    raw = addr.encode()
    assert 0 <= raw < 2**51
    assert decode(raw) == addr


@settings(max_examples=300, deadline=None)
@given(sips, cubes, st.integers(0, 3), st.integers(0, 31), unit_offsets, hbm_offsets)
def test_encode_matches_manual_layout(sip, cube, code, pe, unit_off, hbm_off):
    kind = ["hbm", "tcm", "sram", "mcpu"][code]
    if kind == "hbm":
        addr, body = PhysAddr(sip, cube, kind, hbm_off), hbm_off
    elif kind == "tcm":
        addr, body = PhysAddr(sip, cube, kind, unit_off, pe), pe * 2**34 + unit_off
    else:
        addr, body = PhysAddr(sip, cube, kind, unit_off), unit_off
    assert addr.encode() == manual_encode(sip, cube, code, body)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**51 - 1))
def test_decode_any_51_bit_value(raw):
    code = (raw >> 39) & 7
    pe_bits = (raw >> 34) & 31
    if code >= 4 or (code in (2, 3) and pe_bits):
        with pytest.raises(AddressError):
            decode(raw)
    else:
        assert decode(raw).encode() == raw


@pytest.mark.parametrize("code", [4, 5, 6, 7])
def test_reserved_type_codes(code):
    with pytest.raises(AddressError, match=f"reserved type code {code}"):
        decode(manual_encode(0, 0, code, 0))
    with pytest.raises(AddressError):
        decode(manual_encode(15, 31, code, 2**39 - 1))


@pytest.mark.parametrize("raw", [-1, 2**51, 2**60, 1.0, "0x10", None])
def test_decode_rejects_non_51_bit(raw):
    with pytest.raises(AddressError):
        decode(raw)


@pytest.mark.parametrize("kwargs", [
    dict(sip=16, cube=0, kind="hbm", offset=0),
    dict(sip=-1, cube=0, kind="hbm", offset=0),
    dict(sip=0, cube=32, kind="hbm", offset=0),
    dict(sip=0, cube=-1, kind="sram", offset=0),
    dict(sip=0, cube=0, kind="hbm", offset=2**39),
    dict(sip=0, cube=0, kind="hbm", offset=-1),
    dict(sip=0, cube=0, kind="tcm", offset=2**34),
    dict(sip=0, cube=0, kind="tcm", offset=0, pe=32),
    dict(sip=0, cube=0, kind="tcm", offset=0, pe=-1),
    dict(sip=0, cube=0, kind="hbm", offset=0, pe=1),      # HBM has no pe field
    dict(sip=0, cube=0, kind="sram", offset=0, pe=1),
    dict(sip=0, cube=0, kind="mcpu", offset=0, pe=2),
    dict(sip=0, cube=0, kind="dram", offset=0),
    dict(sip=True, cube=0, kind="hbm", offset=0),
    dict(sip=0, cube=0, kind="hbm", offset=1.0),
])
def test_out_of_range_fields(kwargs):
    with pytest.raises(AddressError):
        PhysAddr(**kwargs)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(16, 2**20), st.integers(-(2**20), -1)), cubes)
def test_out_of_range_sip_property(sip, cube):
    with pytest.raises(AddressError, match="sip"):
        PhysAddr(sip, cube, "hbm", 0)


@settings(max_examples=200, deadline=None)
@given(sips, cubes, st.integers(2**34, 2**40))
def test_out_of_range_unit_offset_property(sip, cube, offset):
    with pytest.raises(AddressError, match="offset"):
        PhysAddr(sip, cube, "sram", offset)


def test_add_moves_offset():
    a = PhysAddr(1, 2, "tcm", 100, pe=3)
    assert a + 28 == PhysAddr(1, 2, "tcm", 128, pe=3)
    with pytest.raises(AddressError):
        PhysAddr(0, 0, "hbm", 2**39 - 1) + 1


# --------------------------------------------------------------------------- resolver


def test_slice_bytes(resolver):
    assert resolver.hbm_slice_bytes == SLICE == 6442450944


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 1), st.integers(0, 15), st.integers(0, 7), st.integers(0, SLICE - 1))
def test_hbm_addr_resolves_to_owner(resolver, s, c, p, off):
    addr = resolver.hbm_addr(s, c, p, off)
    assert addr == PhysAddr(s, c, "hbm", p * SLICE + off)
    assert resolver.owner_pe(addr) == p
    assert resolver.resolve(addr) == f"sip{s}.cube{c}.hbm_ctrl.pe{p}"
    assert resolver.resolve(addr.encode()) == f"sip{s}.cube{c}.hbm_ctrl.pe{p}"
    # any range that stays inside the slice resolves to the same controller
    assert resolver.resolve(addr, SLICE - off) == f"sip{s}.cube{c}.hbm_ctrl.pe{p}"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1), st.integers(0, 15), st.integers(0, 7), st.integers(1, SLICE), st.integers(1, 4096))
def test_range_crossing_slice_end_raises(resolver, s, c, p, tail, extra):
    # start `tail` bytes before the slice end and ask for `tail + extra` bytes
    addr = resolver.hbm_addr(s, c, p, SLICE - tail)
    with pytest.raises(AddressError, match="crosses the end"):
        resolver.resolve(addr, tail + extra)


def test_range_exactly_to_slice_end(resolver):
    addr = resolver.hbm_addr(0, 0, 7, SLICE - 256)
    assert resolver.resolve(addr, 256) == "sip0.cube0.hbm_ctrl.pe7"
    with pytest.raises(AddressError):
        resolver.resolve(addr, 257)
    # nbytes <= 0 is treated as a single byte
    assert resolver.resolve(addr, 0) == "sip0.cube0.hbm_ctrl.pe7"


@pytest.mark.parametrize("args", [(2, 0, 0), (0, 16, 0), (0, 0, 8), (-1, 0, 0)])
def test_hbm_addr_nonexistent_location(resolver, args):
    with pytest.raises(AddressError):
        resolver.hbm_addr(*args)


@pytest.mark.parametrize("offset", [-1, SLICE, SLICE + 5])
def test_hbm_addr_offset_outside_slice(resolver, offset):
    with pytest.raises(AddressError, match="slice"):
        resolver.hbm_addr(0, 0, 0, offset)


def test_hbm_offset_beyond_capacity(resolver):
    # offset 8 slices in = PE 8, which does not exist in an 8-PE cube
    with pytest.raises(AddressError):
        resolver.resolve(PhysAddr(0, 0, "hbm", 8 * SLICE))


def test_tcm_sram_mcpu_nodes(resolver):
    assert resolver.resolve(PhysAddr(1, 9, "tcm", 0, pe=5)) == "sip1.cube9.pe5.pe_tcm"
    assert resolver.owner_pe(PhysAddr(1, 9, "tcm", 0, pe=5)) == 5
    assert resolver.resolve(PhysAddr(1, 9, "tcm", TCM - 64, pe=5), 64) == "sip1.cube9.pe5.pe_tcm"
    assert resolver.resolve(PhysAddr(0, 15, "sram", SRAM - 1)) == "sip0.cube15.sram"
    assert resolver.resolve(PhysAddr(0, 3, "mcpu", 1234)) == "sip0.cube3.m_cpu"
    assert resolver.resolve(PhysAddr(0, 3, "sram", 0).encode()) == "sip0.cube3.sram"


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 1), st.integers(0, 15), st.integers(0, 7), st.integers(0, TCM - 1))
def test_tcm_property(resolver, s, c, p, off):
    assert resolver.resolve(PhysAddr(s, c, "tcm", off, pe=p)) == f"sip{s}.cube{c}.pe{p}.pe_tcm"
    assert resolver.resolve(PhysAddr(s, c, "sram", off)) == f"sip{s}.cube{c}.sram"


def test_tcm_sram_overflow(resolver):
    with pytest.raises(AddressError, match="TCM"):
        resolver.resolve(PhysAddr(0, 0, "tcm", TCM - 64, pe=0), 65)
    with pytest.raises(AddressError, match="TCM"):
        resolver.resolve(PhysAddr(0, 0, "tcm", TCM, pe=0))
    with pytest.raises(AddressError, match="SRAM"):
        resolver.resolve(PhysAddr(0, 0, "sram", SRAM))
    with pytest.raises(AddressError):
        resolver.resolve(PhysAddr(0, 0, "tcm", 0, pe=8))  # PE 8 does not exist


@pytest.mark.parametrize("addr", [PhysAddr(2, 0, "sram", 0), PhysAddr(0, 16, "mcpu", 0),
                                  PhysAddr(5, 0, "hbm", 0)])
def test_resolve_nonexistent_unit(resolver, addr):
    with pytest.raises(AddressError):
        resolver.resolve(addr)


def test_finders(resolver):
    assert resolver.find_m_cpu(1, 4) == "sip1.cube4.m_cpu"
    assert resolver.find_pcie_ep(1) == "sip1.io0.pcie_ep"
    assert resolver.find_io_cpu(0) == "sip0.io0.io_cpu"
    assert resolver.find_pe_block(0, 2, 6, "pe_gemm") == "sip0.cube2.pe6.pe_gemm"
    assert resolver.find_all_pcie_eps() == ["sip0.io0.pcie_ep", "sip1.io0.pcie_ep"]
    with pytest.raises(AddressError):
        resolver.find_m_cpu(0, 16)


def test_finders_unknown_nodes(resolver):
    from kernbench.topology import RoutingError
    with pytest.raises(RoutingError, match=re.escape("sip2.io0.pcie_ep")):
        resolver.find_pcie_ep(2)
    with pytest.raises(RoutingError):
        resolver.find_io_cpu(0, io=1)
    with pytest.raises(RoutingError):
        resolver.find_pe_block(0, 0, 0, "pe_nonexistent")


def test_resolver_follows_the_spec():
    g = compile_spec(spec_from_dict({
        "system": {"sips": {"count": 1}}, "sip": {"cube_mesh": {"w": 1, "h": 2}},
        "cube": {"pe_layout": {"corners": ["NW", "SE"], "pe_per_corner": 1},
                 "hbm": {"capacity_gib": 2.0, "pseudo_channels": 4}, "sram": {"capacity_mib": 1.0}},
        "pe": {"tcm": {"capacity_mib": 2.0}},
    }))
    r = AddressResolver(g)
    assert r.hbm_slice_bytes == GIB  # 2 GiB / 2 PEs
    assert r.resolve(PhysAddr(0, 1, "hbm", GIB + 7)) == "sip0.cube1.hbm_ctrl.pe1"
    with pytest.raises(AddressError):
        r.resolve(PhysAddr(0, 1, "hbm", 2 * GIB))
    with pytest.raises(AddressError):
        r.resolve(PhysAddr(0, 2, "sram", 0))  # only 2 cubes
    with pytest.raises(AddressError):
        r.resolve(PhysAddr(0, 0, "sram", MIB))
    assert r.resolve(PhysAddr(0, 0, "tcm", 2 * MIB - 1, pe=1)) == "sip0.cube0.pe1.pe_tcm"
