"""The 51-bit physical address layout.

::

    50      47 46     42 41   39 38                                       0
    +---------+---------+-------+------------------------------------------+
    |  SIP(4) | CUBE(5) |TYPE(3)|  type-specific field (39 bits)           |
    +---------+---------+-------+------------------------------------------+

    TYPE 0 HBM   field = byte offset into the cube's HBM (up to 512 GiB).
                 The owning PE is offset // slice_bytes: a slice is a
                 contiguous range, so the offset alone names the PE.
    TYPE 1 TCM   field = PE(5) | offset(34)
    TYPE 2 SRAM  field = 0(5)  | offset(34)
    TYPE 3 MCPU  field = 0(5)  | offset(34)   (M_CPU local memory)
    TYPE 4-7     reserved for new unit types

Encoding is pure bit packing; whether a decoded address exists in a given
topology (enough SIPs, cubes, PEs, capacity) is checked by
:class:`kernbench.topology.resolver.AddressResolver`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.topology.errors import AddressError

ADDR_BITS = 51
SIP_BITS, CUBE_BITS, TYPE_BITS, FIELD_BITS = 4, 5, 3, 39
PE_BITS, UNIT_OFFSET_BITS = 5, 34
TYPE_SHIFT = FIELD_BITS
CUBE_SHIFT = TYPE_SHIFT + TYPE_BITS
SIP_SHIFT = CUBE_SHIFT + CUBE_BITS

KIND_CODES = {"hbm": 0, "tcm": 1, "sram": 2, "mcpu": 3}
CODE_KINDS = {v: k for k, v in KIND_CODES.items()}


@dataclass(frozen=True, slots=True)
class PhysAddr:
    """A decoded physical address.

    ``pe`` is the PE of a TCM address; for other kinds it is 0 (an HBM
    address's owning PE is derived from ``offset`` by the resolver).
    ``offset`` is in bytes.
    """

    sip: int
    cube: int
    kind: str
    offset: int
    pe: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KIND_CODES:
            raise AddressError(f"unknown address kind {self.kind!r}; expected one of {', '.join(KIND_CODES)}")
        _check("sip", self.sip, SIP_BITS)
        _check("cube", self.cube, CUBE_BITS)
        if self.kind == "hbm":
            _check("offset", self.offset, FIELD_BITS)
            if self.pe:
                raise AddressError("an HBM address has no pe field: the offset names the owning slice")
        else:
            _check("pe", self.pe, PE_BITS)
            _check("offset", self.offset, UNIT_OFFSET_BITS)
            if self.kind != "tcm" and self.pe:
                raise AddressError(f"a {self.kind} address has no pe field (got pe={self.pe})")

    def encode(self) -> int:
        """Pack into the 51-bit integer form."""
        body = self.offset if self.kind == "hbm" else (self.pe << UNIT_OFFSET_BITS) | self.offset
        return (self.sip << SIP_SHIFT) | (self.cube << CUBE_SHIFT) | (KIND_CODES[self.kind] << TYPE_SHIFT) | body

    def __add__(self, delta: int) -> PhysAddr:
        return PhysAddr(self.sip, self.cube, self.kind, self.offset + delta, self.pe)


def _check(name: str, value: int, bits: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < (1 << bits):
        raise AddressError(f"address field {name}={value!r} is out of range [0, {1 << bits})")


def decode(addr: int) -> PhysAddr:
    """Unpack a 51-bit integer address; :class:`AddressError` on reserved types or bits."""
    if not isinstance(addr, int) or not 0 <= addr < (1 << ADDR_BITS):
        raise AddressError(f"physical address {addr!r} is not a {ADDR_BITS}-bit unsigned integer")
    sip = addr >> SIP_SHIFT
    cube = (addr >> CUBE_SHIFT) & ((1 << CUBE_BITS) - 1)
    code = (addr >> TYPE_SHIFT) & ((1 << TYPE_BITS) - 1)
    body = addr & ((1 << FIELD_BITS) - 1)
    if code not in CODE_KINDS:
        raise AddressError(f"physical address {addr:#x} has reserved type code {code}")
    kind = CODE_KINDS[code]
    if kind == "hbm":
        return PhysAddr(sip, cube, kind, body)
    return PhysAddr(sip, cube, kind, body & ((1 << UNIT_OFFSET_BITS) - 1), body >> UNIT_OFFSET_BITS)
