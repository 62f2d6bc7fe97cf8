"""Installing a neighbour table: receive rings in the chosen memory, then every PE_IPCQ at once.

Each direction of each PE gets a receive ring of ``pe.ipcq.depth`` slots of
``pe.ipcq.slot_kib`` KiB, reserved from the runtime's allocators in the
*buffer kind*'s memory: the PE's TCM (outside the kernel scratch), its cube's
SRAM, or its HBM slice. Reservation is all-or-nothing: if any ring does not
fit, the ones already reserved are released and nothing is installed. Only
then are the PE_IPCQ tables replaced. Installing is setup, like creating a
communicator: it takes no simulated time.

``extend=True`` adds a table's links to PEs that already have a table (a
process group's, say) instead of refusing them: an added direction gets a
ring in the memory that PE already uses, a direction it already has must
reach the same peer, and removing the installation gives those PEs back
exactly their earlier links. Every touched PE's rings restart empty, so
extend only between kernels, as any installation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.ccl.neighbours import NeighbourError, Table
from kernbench.components.pe.ipcq import BUFFER_KINDS, OPPOSITE, IpcqLink
from kernbench.runtime import RuntimeContext
from kernbench.topology import naming as nm
from kernbench.topology.address import PhysAddr
from kernbench.topology.errors import KernbenchError


@dataclass
class Installation:
    """An installed table: the PEs it configured and the rings it reserved (kind, address, bytes)."""

    ctx: RuntimeContext
    table: Table
    buffer_kind: str
    rings: list[tuple[str, PhysAddr, int]] = field(default_factory=list)
    active: bool = True
    #: PEs that had a table before an ``extend`` installation: their earlier links and buffer kind.
    previous: dict = field(default_factory=dict)

    def remove(self) -> None:
        """Clear the PEs' tables (or give extended PEs back their earlier links) and release the rings."""
        if not self.active:
            return
        for pe in self.table:
            links, kind = self.previous.get(pe, ({}, self.buffer_kind))
            _ipcq(self.ctx, pe).install(links, kind)
        for kind, addr, nbytes in self.rings:
            self.ctx.release(kind, addr, nbytes)
        self.active = False


def _ipcq(ctx: RuntimeContext, pe):
    return ctx.engine.components[nm.pe_block(*pe, "pe_ipcq")]


def install(ctx: RuntimeContext, table: Table, buffer_kind: str = "tcm", *, extend: bool = False) -> Installation:
    """Reserve a receive ring per (PE, direction) in ``buffer_kind`` memory and install ``table``; with
    ``extend``, add the links to PEs that already have a table (see the module docstring)."""
    if buffer_kind not in BUFFER_KINDS:
        raise NeighbourError(f"unknown IPCQ buffer kind {buffer_kind!r}; use one of {', '.join(BUFFER_KINDS)}")
    spec = ctx.spec
    sips, cubes, pes = spec.system.sips.count, spec.cubes_per_sip, spec.pes_per_cube
    for pe, dirs in table.items():
        for p in (pe, *dirs.values()):
            if not (0 <= p[0] < sips and 0 <= p[1] < cubes and 0 <= p[2] < pes):
                raise NeighbourError(f"PE {p} of the neighbour table is not in the topology "
                                     f"({sips} SIPs x {cubes} cubes x {pes} PEs)")
    for a, dirs in table.items():
        for d, b in dirs.items():
            if table.get(b, {}).get(OPPOSITE[d]) != a:
                raise NeighbourError(f"neighbour table is not symmetric: PE {a} reaches {b} through {d!r} but {b} "
                                     f"does not reach {a} through {OPPOSITE[d]!r}; build tables with "
                                     f"kernbench.ccl.neighbours.link()")
    busy = [pe for pe in table if _ipcq(ctx, pe).links]
    if busy and extend:
        return _extend(ctx, table, buffer_kind, busy)
    if busy:
        raise NeighbourError(f"PE {busy[0]} already has a neighbour table installed ({len(busy)} PE(s) of this table "
                             f"do); remove that installation (Installation.remove() or destroy_process_group()) "
                             f"first, or merge the tables with kernbench.ccl.neighbours.merge()")
    inst = Installation(ctx, table, buffer_kind)
    _reserve_and_install(ctx, inst, {pe: ({}, buffer_kind) for pe in table})
    return inst


def _extend(ctx: RuntimeContext, table: Table, buffer_kind: str, busy: list) -> Installation:
    """Install ``table`` over the tables the ``busy`` PEs already have (``install(..., extend=True)``)."""
    base = {}
    for pe in busy:
        ipcq = _ipcq(ctx, pe)
        for d, peer in table[pe].items():
            have = ipcq.links.get(d)
            if have is not None and tuple(have.peer) != tuple(peer):
                raise NeighbourError(f"PE {pe} already reaches {tuple(have.peer)} through {d!r}; the table to add "
                                     f"links it to {peer} instead; use other directions or remove the installed "
                                     f"table first")
        base[pe] = (dict(ipcq.links), ipcq.buffer_kind)
    inst = Installation(ctx, table, buffer_kind, previous=base)
    _reserve_and_install(ctx, inst, {pe: base.get(pe, ({}, buffer_kind)) for pe in table})
    return inst


def _reserve_and_install(ctx: RuntimeContext, inst: Installation, start: dict) -> None:
    """Reserve a ring for every direction of ``inst.table`` a PE does not have yet (in the memory of the PE's
    links, ``start[pe] = (links, kind)``), all or nothing, then install each PE's links."""
    ring_bytes = ctx.spec.pe.ipcq.depth * ctx.spec.pe.ipcq.slot_bytes
    links: dict = {}
    kinds: dict = {}
    try:
        for pe, dirs in inst.table.items():
            have, kind = start[pe]
            links[pe], kinds[pe] = dict(have), kind
            for d, peer in dirs.items():
                if d in have:
                    continue
                addr = ctx.reserve(kind, *pe, ring_bytes)
                inst.rings.append((kind, addr, ring_bytes))
                links[pe][d] = IpcqLink(peer, addr.encode())
    except KernbenchError as exc:
        for kind, addr, nbytes in inst.rings:
            ctx.release(kind, addr, nbytes)
        raise NeighbourError(f"cannot reserve IPCQ receive rings in {inst.buffer_kind}: {exc}; use another buffer "
                             f"kind or lower pe.ipcq.depth / pe.ipcq.slot_kib") from None
    for pe, pe_links in links.items():
        _ipcq(ctx, pe).install(pe_links, kinds[pe])
