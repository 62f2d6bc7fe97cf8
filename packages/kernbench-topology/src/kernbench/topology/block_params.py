"""PE block parameters, declared by the blocks: what each block's graph node carries, with unit, bounds and doc.

A block implementation declares its parameters as a tuple of
:class:`BlockParam` (its class attribute ``PARAMS``), the way a gem5
SimObject declares its ``Param``\\ s. The compiler gives each PE block's node
the parameters the implementation bound to that block (``components:``)
declares, each value checked against its declaration:

* a parameter with a ``field`` takes its value from that topology field
  (``pe.gemm.tile_m``): the shipped blocks' parameters, whose fields keep the
  YAML format every topology file uses; :mod:`kernbench.topology.spec` builds
  those fields *from* the declarations below (:func:`spec_field`), so default,
  bounds and doc are written once, here;
* any other parameter is set under ``pe.blocks.<block>.<name>`` in the YAML
  (a plugin's own parameters), or takes its default.

An unknown name under ``pe.blocks`` or a value out of bounds is a
:class:`BlockParamError` naming the block, the parameter and what is allowed.

The shipped declarations live here, not beside the component classes in
``kernbench.components``, because the topology package sits below the
components package and must compile the default topology on its own; the
component classes refer to them (``PeGemm.PARAMS = block_params.PE_GEMM``).
A plugin implementation declares its own ``PARAMS`` and reaches this
registry through :func:`register` (``kernbench.components.registry`` does it
for installed plugins; an installed ``kernbench.components`` entry point is
also looked up here, on first use, so a topology binding it compiles before
any component registry was built). See adr/0034.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import reduce
from importlib import metadata
from types import MappingProxyType
from typing import Any

from kernbench.topology.errors import SpecError

#: The entry-point group component plugins register under (read by ``kernbench.components.registry`` too).
ENTRY_POINT_GROUP = "kernbench.components"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: Attribute names the compiler gives every PE block's node itself.
RESERVED = ("pe",)


class BlockParamError(SpecError):
    """A block parameter is unknown to the block's implementation, out of bounds, or badly declared."""


def _num(x: float) -> str:
    """A bound as people write it: whole numbers in full up to ten digits, else ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e10 else f"{x:g}"


@dataclass(frozen=True)
class BlockParam:
    """One parameter of a PE block: the attribute ``name`` its graph node carries (units in the name, like every
    attribute), its ``unit``, ``default``, inclusive bounds ``low``/``high`` (``None``: unbounded) and a one-line
    ``doc``.

    ``default``'s type is the parameter's type: an ``int`` default makes an integer parameter (a float value is
    refused), a ``float`` default a number (an integer value is accepted and made a float). ``field`` (shipped
    blocks) names the topology field the value is written in (``"pe.gemm.tile_m"``); ``unit``, ``default`` and
    the bounds then describe that field, and the node carries ``int(value * scale)`` when ``scale`` is not 1
    (``pe.tcm.capacity_mib`` in MiB -> ``capacity_bytes``). Without a ``field`` the value is written under
    ``pe.blocks.<block>.<name>``.
    """

    name: str
    unit: str
    default: int | float
    low: float | None = None
    high: float | None = None
    doc: str = ""
    field: str = ""
    scale: int = 1

    def __post_init__(self) -> None:
        where = f"block parameter {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise BlockParamError(f"{where}: the name must be lowercase snake_case (a node attribute name)")
        if self.name in RESERVED:
            raise BlockParamError(f"{where}: the name is reserved; every PE block's node carries its PE index as 'pe'")
        if isinstance(self.default, bool) or not isinstance(self.default, (int, float)):
            raise BlockParamError(f"{where}: the default must be an int or a float, got {self.default!r}")
        for bound in (self.low, self.high):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                                      or not math.isfinite(bound)):
                raise BlockParamError(f"{where}: bounds must be finite numbers or None, got {bound!r}")
        if not self.admits(self.default):
            raise BlockParamError(f"{where}: the default {self.default!r} is outside its bounds ({self.allowed()})")
        if not isinstance(self.unit, str) or not isinstance(self.doc, str) or not isinstance(self.field, str):
            raise BlockParamError(f"{where}: unit, doc and field must be text")
        if isinstance(self.scale, bool) or not isinstance(self.scale, int) or self.scale < 1:
            raise BlockParamError(f"{where}: scale must be a positive integer, got {self.scale!r}")

    @property
    def kind(self) -> type:
        """``int`` or ``float``: the type of the values this parameter takes."""
        return int if isinstance(self.default, int) else float

    def admits(self, value: object) -> bool:
        """True when ``value`` has this parameter's type and lies within its bounds."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind is int and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def allowed(self) -> str:
        """What the parameter allows, in words (``an integer from 1 to 4096``)."""
        parts = ["an integer" if self.kind is int else "a number"]
        if self.low is not None and self.high is not None:
            parts.append(f"from {_num(self.low)} to {_num(self.high)}")
        elif self.low is not None:
            parts.append(f">= {_num(self.low)}")
        elif self.high is not None:
            parts.append(f"<= {_num(self.high)}")
        return " ".join(parts)

    def to_node(self, value: int | float) -> int | float:
        """The value the block's node carries for a written ``value`` (scaled, made the parameter's type)."""
        if self.scale != 1:
            return int(value * self.scale)
        return float(value) if self.kind is float else value


# ------------------------------------------------------------------------------------------- shipped declarations
# Bounds are wide (far beyond any hardware we model): they keep a typo from hanging a run or exhausting memory.
_OVERHEAD = {"low": 0.0, "high": 1e6}  # ns: up to one millisecond
_BW = {"low": 1e-3, "high": 1e6}       # GB/s: 1 MB/s .. 1 PB/s

CLOCK_GHZ = BlockParam("clock_ghz", "GHz", 1.0, 1e-3, 100.0, "PE clock, GHz", field="pe.clock_ghz")
TILE_M = BlockParam("tile_m", "elements", 32, 1, 4096, "tile rows (M)", field="pe.gemm.tile_m")
TILE_N = BlockParam("tile_n", "elements", 32, 1, 4096, "tile columns (N)", field="pe.gemm.tile_n")
TILE_K = BlockParam("tile_k", "elements", 64, 1, 4096, "tile depth (K)", field="pe.gemm.tile_k")

PE_CPU = (
    BlockParam("overhead_ns", "ns", 2.0, doc="PE_CPU per-message overhead, ns", field="pe.cpu_overhead_ns",
               **_OVERHEAD),
    CLOCK_GHZ,
    BlockParam("fixed_cycles", "cycles", 40.0, 0.0, 1e6, "fixed cycles per command",
               field="pe.cost_model.fixed_cycles"),
    BlockParam("r_cycles_per_byte", "cycles/B", 0.0625, 0.0, 1000.0, "cycles per logical descriptor byte",
               field="pe.cost_model.r_cycles_per_byte"),
)
PE_SCHEDULER = (
    BlockParam("overhead_ns", "ns", 1.0, doc="PE_SCHEDULER per-command overhead, ns",
               field="pe.scheduler_overhead_ns", **_OVERHEAD),
    TILE_M, TILE_N, TILE_K,
)
PE_DMA = (
    BlockParam("overhead_ns", "ns", 2.0, doc="per-descriptor DMA setup overhead, ns", field="pe.dma.overhead_ns",
               **_OVERHEAD),
    BlockParam("read_channels", "DMAs", 1, 1, 64, "concurrent read DMAs", field="pe.dma.read_channels"),
    BlockParam("write_channels", "DMAs", 1, 1, 64, "concurrent write DMAs", field="pe.dma.write_channels"),
)
PE_TCM = (
    BlockParam("read_bw_gbs", "GB/s", 512.0, doc="TCM read bandwidth, GB/s", field="pe.tcm.read_bw_gbs", **_BW),
    BlockParam("write_bw_gbs", "GB/s", 512.0, doc="TCM write bandwidth, GB/s", field="pe.tcm.write_bw_gbs", **_BW),
    BlockParam("capacity_bytes", "MiB", 16.0, 0.001, None, "TCM capacity, MiB; at most 16384 (the address layout)",
               field="pe.tcm.capacity_mib", scale=1 << 20),
    BlockParam("scratch_bytes", "MiB", 1.0, 0.001, 16384.0,
               "kernel scratch region inside the TCM, MiB; at most capacity_mib", field="pe.tcm.scratch_mib",
               scale=1 << 20),
)
PE_FETCH_STORE: tuple[BlockParam, ...] = ()
PE_GEMM = (
    TILE_M, TILE_N, TILE_K,
    BlockParam("peak_tflops", "TFLOP/s", 8.0, 1e-3, 1e4, "f16 peak throughput, TFLOP/s", field="pe.gemm.peak_tflops"),
)
PE_MATH = (
    BlockParam("lanes", "elements/cycle", 64, 1, 65536, "elements the math engine processes per cycle",
               field="pe.math_lanes"),
    CLOCK_GHZ,
)
PE_MMU = (
    BlockParam("translate_ns", "ns", 1.0, doc="time a DMA pays to translate a virtual address, ns",
               field="pe.mmu_translate_ns", **_OVERHEAD),
    BlockParam("page_bytes", "bytes", 4096, 256, 1 << 30, "MMU page size, bytes (a power of two)",
               field="pe.mmu_page_bytes"),
)
PE_IPCQ = (
    BlockParam("overhead_ns", "ns", 2.0, doc="PE_IPCQ per-message processing overhead, ns",
               field="pe.ipcq.overhead_ns", **_OVERHEAD),
    BlockParam("depth", "slots", 2, 1, 1024,
               "slots per receive ring (messages a sender may have in flight per direction)", field="pe.ipcq.depth"),
    BlockParam("slot_bytes", "KiB", 128.0, 0.0625, 1 << 20,
               "bytes per slot, KiB: the largest message one send can carry", field="pe.ipcq.slot_kib", scale=1024),
)

#: The shipped implementations' declarations, by implementation name (the same as the PE block it serves).
SHIPPED: Mapping[str, tuple[BlockParam, ...]] = MappingProxyType({
    "pe_cpu": PE_CPU, "pe_scheduler": PE_SCHEDULER, "pe_dma": PE_DMA, "pe_tcm": PE_TCM,
    "pe_fetch_store": PE_FETCH_STORE, "pe_gemm": PE_GEMM, "pe_math": PE_MATH, "pe_mmu": PE_MMU, "pe_ipcq": PE_IPCQ,
})


def shipped_field(path: str) -> BlockParam:
    """The shipped declaration written in topology field ``path`` (``"pe.gemm.tile_m"``); what ``spec.py`` builds
    that field from."""
    for params in SHIPPED.values():
        for p in params:
            if p.field == path:
                return p
    raise KeyError(path)


# ------------------------------------------------------------------------------------------------------ registry
_REGISTERED: dict[str, tuple[BlockParam, ...]] = {}
_LOOKED_UP: dict[str, tuple[BlockParam, ...] | None] = {}


def check_declarations(impl: str, params: object) -> tuple[BlockParam, ...]:
    """``params`` as a tuple of :class:`BlockParam` with distinct names; :class:`BlockParamError` otherwise."""
    if isinstance(params, (str, bytes)) or not isinstance(params, Iterable):
        raise BlockParamError(f"block implementation {impl!r}: PARAMS must be a tuple of BlockParam, got "
                              f"{type(params).__name__}")
    found = tuple(params)
    bad = [p for p in found if not isinstance(p, BlockParam)]
    if bad:
        raise BlockParamError(f"block implementation {impl!r}: PARAMS must hold BlockParam declarations, got "
                              f"{bad[0]!r}")
    names = [p.name for p in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BlockParamError(f"block implementation {impl!r} declares parameter(s) {', '.join(twice)} twice")
    return found


def register(impl: str, params: Iterable[BlockParam]) -> tuple[BlockParam, ...]:
    """Declare the parameters of block implementation ``impl`` (the name a topology's ``components:`` binds);
    returns them as a tuple. Registering the same declarations again is harmless; other declarations for a
    shipped name, or for a name already registered, are a :class:`BlockParamError`."""
    found = check_declarations(impl, params)
    taken = SHIPPED.get(impl, _REGISTERED.get(impl))
    if taken is not None and taken != found:
        raise BlockParamError(f"block implementation {impl!r} already declares parameters "
                              f"({', '.join(p.name for p in taken) or 'none'}); choose another implementation name")
    if impl not in SHIPPED:
        _REGISTERED[impl] = found
    return found


def unregister(impl: str) -> None:
    """Forget a registered (not shipped) implementation's declarations (tests, reloading a plugin)."""
    _REGISTERED.pop(impl, None)
    _LOOKED_UP.pop(impl, None)


def _entry_point_params(impl: str) -> tuple[BlockParam, ...] | None:
    """The ``PARAMS`` of the installed component plugin named ``impl``, or None (none installed, it fails to
    load, or it declares nothing; ``kernbench.components.registry`` reports broken plugins)."""
    if impl not in _LOOKED_UP:
        found = None
        try:
            for ep in metadata.entry_points(group=ENTRY_POINT_GROUP, name=impl):
                params = getattr(ep.load(), "PARAMS", None)
                found = None if params is None else check_declarations(impl, params)
                break
        except Exception:  # a broken plugin must not break compiling; the component registry names it
            found = None
        _LOOKED_UP[impl] = found
    return _LOOKED_UP[impl]


def declared(impl: str) -> tuple[BlockParam, ...] | None:
    """The parameters implementation ``impl`` declares: shipped, registered, or an installed plugin's ``PARAMS``;
    None when nothing is known of it."""
    if impl in SHIPPED:
        return SHIPPED[impl]
    if impl in _REGISTERED:
        return _REGISTERED[impl]
    return _entry_point_params(impl)


def declarations() -> dict[str, tuple[BlockParam, ...]]:
    """Every known declaration (shipped, then registered), by implementation name, for listings and docs."""
    return {**SHIPPED, **_REGISTERED}


# ---------------------------------------------------------------------------------------------------- resolution
def params_of(spec: Any, block: str) -> tuple[str, tuple[BlockParam, ...]]:
    """The implementation bound to PE block ``block`` in ``spec`` and the parameters it declares. An
    implementation nothing is known of gets its block's shipped parameters (a plugin without ``PARAMS`` reads the
    same attributes as the block it replaces; an unknown name is reported by the component registry)."""
    impl = spec.component_bindings.get(block, block)
    found = declared(impl)
    return impl, (found if found is not None else SHIPPED.get(block, ()))


def block_values(spec: Any, block: str) -> dict[str, int | float]:
    """The parameters PE block ``block``'s node carries in ``spec``, in declaration order: each from its topology
    field, else from ``pe.blocks.<block>``, else its default; :class:`BlockParamError` (one line naming the
    block, the parameter and what is allowed) for an unknown name or a value out of bounds."""
    impl, params = params_of(spec, block)
    written = dict(dict(spec.pe.blocks).get(block, ()))
    by_name = {p.name: p for p in params}
    settable = [p.name for p in params if not p.field]
    src = spec.source
    for name in written:
        p = by_name.get(name)
        if p is None:
            near = difflib.get_close_matches(name[:80], settable, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise BlockParamError(f"{src}: pe.blocks.{block}.{name[:80]}: block {block} (implementation {impl!r}) "
                                  f"has no parameter {name[:80]!r}; {hint}its parameters: "
                                  f"{', '.join(settable) or 'none'}")
        if p.field:
            raise BlockParamError(f"{src}: pe.blocks.{block}.{name}: parameter {name!r} of block {block} is set by "
                                  f"the topology field '{p.field}', not under pe.blocks")
    values: dict[str, int | float] = {}
    for p in params:
        if p.field:
            try:
                value = reduce(getattr, p.field.split("."), spec)
            except AttributeError:
                raise BlockParamError(f"{src}: parameter {p.name!r} of block {block} (implementation {impl!r}) "
                                      f"is declared in topology field '{p.field}', which does not exist") from None
            where = p.field
        else:
            value = written.get(p.name, p.default)
            where = f"pe.blocks.{block}.{p.name}"
        if not p.admits(value):
            unit = f" ({p.unit})" if p.unit else ""
            raise BlockParamError(f"{src}: {where} = {value!r} is out of bounds for parameter {p.name!r} of block "
                                  f"{block} (implementation {impl!r}); expected {p.allowed()}{unit}")
        values[p.name] = p.to_node(value)
    return values


def param_docs() -> list[tuple[str, str, str, str, str]]:
    """One row per declared parameter: (implementation, parameter, unit, default, where it is set and what it
    allows with its doc), for listings and the documentation."""
    rows = []
    for impl, params in declarations().items():
        for p in params:
            where = p.field or f"pe.blocks.<block>.{p.name}"
            scaled = f"; the node carries x {p.scale}" if p.scale != 1 else ""
            rows.append((impl, p.name, p.unit, repr(p.default), f"{p.doc} ({p.allowed()}; set at {where}{scaled})"))
    return rows


__all__ = ["SHIPPED", "BlockParam", "BlockParamError", "block_values", "declarations", "declared", "params_of",
           "register", "unregister"]
