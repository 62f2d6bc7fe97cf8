"""The node-id naming convention — the only module that formats or parses ids.

Ids are dotted paths from the tray down::

    tray.host_cpu                      host CPU
    fabric.switch0                     tray PCIe switch
    sip{S}.io{I}.{pcie_ep|io_cpu|io_noc}
    sip{S}.io{I}.io_ucie.c{K}          IO chiplet UCIe PHYs
    sip{S}.cube{C}.noc.r{R}c{X}        cube NoC router at grid row R, column X
    sip{S}.cube{C}.ucie_{n|s|e|w}.c{K} cube UCIe PHYs
    sip{S}.cube{C}.{m_cpu|sram}
    sip{S}.cube{C}.hbm_ctrl.pe{P}      HBM controller of PE P's slice
    sip{S}.cube{C}.pe{P}.{block}       one of the nine PE blocks

Everything else builds ids through these functions, so a change of
convention is a one-file edit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

HOST = "tray.host_cpu"
SWITCH = "fabric.switch0"

PE_BLOCKS = ("pe_cpu", "pe_scheduler", "pe_dma", "pe_fetch_store", "pe_gemm", "pe_math",
             "pe_tcm", "pe_mmu", "pe_ipcq")
UCIE_SIDES = ("n", "s", "e", "w")


def switch() -> str:
    """Id of the tray's PCIe switch."""
    return SWITCH


def pcie_ep(sip: int, io: int = 0) -> str:
    """Id of a SIP's PCIe endpoint."""
    return f"sip{sip}.io{io}.pcie_ep"


def io_cpu(sip: int, io: int = 0) -> str:
    """Id of a SIP's IO control CPU."""
    return f"sip{sip}.io{io}.io_cpu"


def io_noc(sip: int, io: int = 0) -> str:
    """Id of a SIP's IO NoC."""
    return f"sip{sip}.io{io}.io_noc"


def io_ucie(sip: int, k: int, io: int = 0) -> str:
    """Id of the IO chiplet's k-th UCIe PHY."""
    return f"sip{sip}.io{io}.io_ucie.c{k}"


def sip_prefix(sip: int) -> str:
    """The id prefix shared by every node of one SIP."""
    return f"sip{sip}"


def cube_prefix(sip: int, cube: int) -> str:
    """The id prefix shared by every node of one cube."""
    return f"sip{sip}.cube{cube}"


def router(sip: int, cube: int, row: int, col: int) -> str:
    """Id of a cube NoC router."""
    return f"sip{sip}.cube{cube}.noc.r{row}c{col}"


def ucie_phy(sip: int, cube: int, side: str, k: int) -> str:
    """Id of a cube's k-th UCIe PHY on one side (n, s, e, w)."""
    return f"sip{sip}.cube{cube}.ucie_{side}.c{k}"


def m_cpu(sip: int, cube: int) -> str:
    """Id of a cube's management CPU."""
    return f"sip{sip}.cube{cube}.m_cpu"


def sram(sip: int, cube: int) -> str:
    """Id of a cube's shared SRAM."""
    return f"sip{sip}.cube{cube}.sram"


def hbm_ctrl(sip: int, cube: int, pe: int) -> str:
    """Id of the HBM controller serving PE ``pe``'s slice."""
    return f"sip{sip}.cube{cube}.hbm_ctrl.pe{pe}"


def pe_prefix(sip: int, cube: int, pe: int) -> str:
    """The id prefix of one PE's blocks."""
    return f"sip{sip}.cube{cube}.pe{pe}"


def pe_block(sip: int, cube: int, pe: int, block: str) -> str:
    """Id of one block of a PE (``block`` is one of :data:`PE_BLOCKS`)."""
    return f"sip{sip}.cube{cube}.pe{pe}.{block}"


@dataclass(frozen=True, slots=True)
class NodeLocation:
    """Where a node sits in the hierarchy; ``None`` for levels it is above."""

    sip: int | None
    cube: int | None
    pe: int | None
    unit: str


_OWNER = re.compile(r"^(sip\d+\.(?:cube\d+|io\d+))\.(.+)$")
_RE = re.compile(r"^sip(\d+)\.(?:cube(\d+)\.(?:pe(\d+)\.)?|io\d+\.)?(.+)$")
_HBM = re.compile(r"^hbm_ctrl\.pe(\d+)$")


def _parse(node_id: str) -> tuple[int | None, int | None, int | None, str]:
    """``(sip, cube, pe, unit)`` of an id, the levels it is above None (the one parser of ids)."""
    m = _RE.match(node_id)
    if not m:
        return None, None, None, node_id
    sip, cube, pe, unit = m.groups()
    pe_id = int(pe) if pe is not None else None
    if unit.startswith("hbm_ctrl."):
        h = _HBM.match(unit)
        if h:
            pe_id = int(h.group(1))
    return int(sip), int(cube) if cube is not None else None, pe_id, unit


@lru_cache(maxsize=65536)
def locate(node_id: str) -> NodeLocation:
    """Parse an id into its hierarchy location (memoised)."""
    return NodeLocation(*_parse(node_id))


def coordinates(node_id: str) -> tuple[int | None, int | None, int | None]:
    """``(sip, cube, pe)`` of an id, as :func:`locate` gives them, without memoising (for a pass over every node
    of a graph, which a memo would only fill)."""
    return _parse(node_id)[:3]


def same_cube(a: str, b: str) -> bool:
    """True when both ids are inside the same cube."""
    la, lb = locate(a), locate(b)
    return la.cube is not None and la.sip == lb.sip and la.cube == lb.cube


def pe_of(node_id: str) -> str:
    """The PE prefix of a PE-block id (``sip0.cube1.pe2.pe_dma`` -> ``sip0.cube1.pe2``)."""
    return node_id.rsplit(".", 1)[0]


def pe_coords(prefix: str) -> tuple[int, int, int]:
    """``(sip, cube, pe)`` of a PE prefix (``sip0.cube1.pe2``) or of any of its blocks' ids."""
    loc = locate(prefix if prefix.count(".") > 2 else f"{prefix}.pe_cpu")
    if loc.pe is None or loc.cube is None:
        raise ValueError(f"{prefix!r} is not a PE id")
    return loc.sip, loc.cube, loc.pe


def sibling(block_id: str, block: str) -> str:
    """Id of another block of the same PE (``sibling("sip0.cube1.pe2.pe_dma", "pe_tcm")`` ->
    ``sip0.cube1.pe2.pe_tcm``)."""
    return f"{pe_of(block_id)}.{block}"


def unit_of(node_id: str) -> str:
    """The last part of an id: the block or unit name (``sip0.cube1.pe2.pe_dma`` -> ``pe_dma``)."""
    return node_id.rsplit(".", 1)[-1]


def owner_and_unit(node_id: str) -> tuple[str, str]:
    """The hardware owner of a node and the unit within it, e.g. for one trace process per owner.

    ``sip0.cube0.pe0.pe_gemm`` -> ``("sip0.cube0.pe0", "pe_gemm")``;
    ``sip0.cube1.hbm_ctrl.pe2`` -> ``("sip0.cube1", "hbm_ctrl.pe2")``;
    ``sip0.io0.pcie_ep`` -> ``("sip0.io0", "pcie_ep")``; ``host`` -> ``("host", "host")``.
    """
    head, sep, last = node_id.rpartition(".")
    if sep and last.startswith("pe_"):
        return head, last
    m = _OWNER.match(node_id)
    if m:
        return m.group(1), m.group(2)
    return node_id, node_id
