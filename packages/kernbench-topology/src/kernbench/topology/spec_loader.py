"""Reading a topology: YAML text or a parsed mapping, checked against the schema of :mod:`kernbench.topology.spec`.

Every field is checked for its type and range, unknown fields get a
"did you mean", and the cross-field rules (packets hold a control message,
PEs sit on the die, the address layout can name every cube, ...) run on the
whole spec; every failure is one :class:`SpecError` line naming the file, the
dotted field, the value (quoted to 80 characters) and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from pathlib import Path
from typing import Any

from kernbench.topology import naming as nm
from kernbench.topology.errors import SpecError
from kernbench.topology.safe_yaml import MAX_BYTES, load_yaml, quote
from kernbench.topology.sip_topologies import get_sip_topology
from kernbench.topology.spec import DEFAULT_COMPONENTS, MAX_ROUTER_COLUMNS, TopologySpec
from kernbench.topology.tcm_layout import TcmLayout


def _describe(meta: dict[str, Any], typ: Any) -> str:
    """What a field allows, in words: its type and range, or its choices."""
    if meta.get("choices"):
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    lo, hi = meta.get("lo"), meta.get("hi")
    parts = [_type_name(typ)]
    if lo is not None and hi is not None:
        parts.append(f"from {_num(lo)} to {_num(hi)}")
    elif meta.get("positive") and hi is not None:
        parts.append(f"> 0 and <= {_num(hi)}")
    else:
        if meta.get("positive"):
            parts.append("> 0")
        if lo is not None:
            parts.append(f">= {_num(lo)}")
        if hi is not None:
            parts.append(f"<= {_num(hi)}")
    return " ".join(parts)


def _num(x: float) -> str:
    """A bound as people write it: whole numbers in full up to ten digits, else ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e10 else f"{x:g}"


def _type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is tuple:
        args = typing.get_args(typ)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_type_name(args[0])}"
        return f"a list of {len(args)} numbers"
    return {int: "an integer", float: "a number", str: "a string"}.get(typ, str(typ))


class _Loader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, value: Any, expected: str) -> SpecError:
        return SpecError(f"{self.source}: field '{path}' = {quote(value)} is invalid; expected {expected}")

    def build(self, cls: type, data: Any, path: str) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.fail(path or "<root>", data, "a mapping of fields")
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
        unknown = [k for k in data if k not in fields]
        if unknown:
            key = unknown[0]
            near = difflib.get_close_matches(str(key)[:80], list(fields), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else f"; known fields: {', '.join(fields)}"
            raise SpecError(f"{self.source}: unknown field {quote(_join(path, str(key)))}{hint}")
        kwargs = {}
        for name, f in fields.items():
            if name not in data:
                continue
            kwargs[name] = self.value(hints[name], f.metadata, data[name], _join(path, name))
        return cls(**kwargs)

    def value(self, typ: Any, meta: Any, raw: Any, path: str) -> Any:
        if dataclasses.is_dataclass(typ):
            return self.build(typ, raw, path)
        if path == "components":
            return self.components(raw, path)
        if path == "pe.blocks":
            return self.block_values(raw, path)
        if path == "disabled_links":
            if not isinstance(raw, list) or not all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in raw):
                raise self.fail(path, raw, "a list of [src, dst] node-id pairs")
            return tuple((a, b) for a, b in raw)
        origin = typing.get_origin(typ)
        if origin is tuple:
            return self.sequence(typ, meta, raw, path)
        return self.scalar(typ, meta, raw, path)

    def scalar(self, typ: Any, meta: Any, raw: Any, path: str) -> Any:
        expected = _describe(dict(meta), typ)
        if isinstance(raw, bool):
            raise self.fail(path, raw, expected)
        if typ is int:
            if not isinstance(raw, int):
                raise self.fail(path, raw, expected)
            value: Any = raw
        elif typ is float:
            if not isinstance(raw, (int, float)):
                raise self.fail(path, raw, expected)
            value = float(raw)
        elif typ is str:
            if not isinstance(raw, str):
                raise self.fail(path, raw, expected)
            value = raw
        else:  # pragma: no cover - schema error
            raise TypeError(typ)
        choices = meta.get("choices")
        if choices and value not in choices:
            raise self.fail(path, raw, expected)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(path, raw, expected)
        if isinstance(value, (int, float)):
            lo, hi = meta.get("lo"), meta.get("hi")
            if (meta.get("positive") and value <= 0) or (lo is not None and value < lo) or (
                    hi is not None and value > hi):
                raise self.fail(path, raw, expected)
        return value

    def sequence(self, typ: Any, meta: Any, raw: Any, path: str) -> tuple[Any, ...]:
        args = typing.get_args(typ)
        expected = _describe(dict(meta), typ)
        if not isinstance(raw, (list, tuple)):
            raise self.fail(path, raw, expected)
        if args[-1] is Ellipsis:
            elem_types = [args[0]] * len(raw)
        else:
            if len(raw) != len(args):
                raise self.fail(path, raw, expected)
            elem_types = list(args)
        elem_meta = {k: meta.get(k) for k in ("choices", "lo", "hi", "positive")}
        return tuple(self.scalar(t, elem_meta, item, f"{path}[{i}]")
                     for i, (t, item) in enumerate(zip(elem_types, raw, strict=True)))

    def components(self, raw: Any, path: str) -> tuple[tuple[str, str], ...]:
        if not isinstance(raw, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
            raise self.fail(path, raw, "a mapping of node type -> implementation name")
        merged = dict(DEFAULT_COMPONENTS)
        for key in raw:
            if key not in merged:
                near = difflib.get_close_matches(key[:80], list(merged), n=1)
                hint = f"did you mean '{near[0]}'?" if near else f"node types: {', '.join(merged)}"
                raise SpecError(f"{self.source}: components: {quote(key)} is not a node type; {hint}")
        merged.update(raw)
        return tuple(merged.items())


    def block_values(self, raw: Any, path: str) -> tuple[tuple[str, tuple[tuple[str, float], ...]], ...]:
        """``pe.blocks``: PE block -> {parameter: number}. The names and bounds are checked by the compiler against
        the declarations of the implementation bound to each block (:mod:`kernbench.topology.block_params`)."""
        if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in raw.items()):
            raise self.fail(path, raw, "a mapping of PE block -> {parameter: number}")
        for block, values in raw.items():
            if block not in nm.PE_BLOCKS:
                near = difflib.get_close_matches(block[:80], list(nm.PE_BLOCKS), n=1)
                hint = f"did you mean '{near[0]}'?" if near else f"PE blocks: {', '.join(nm.PE_BLOCKS)}"
                raise SpecError(f"{self.source}: {path}: {quote(block)} is not a PE block; {hint}")
            for name, value in values.items():
                if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, float)) or (
                        isinstance(value, float) and not math.isfinite(value)):
                    raise self.fail(f"{path}.{block}.{str(name)[:80]}", value, "a finite number")
        return tuple((block, tuple(values.items())) for block, values in raw.items())


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check_consistency(spec: TopologySpec) -> None:
    src = spec.source
    if not spec.cube.pe_layout.corners:
        raise SpecError(f"{src}: field 'cube.pe_layout.corners' is empty; list at least one of NW NE SW SE")
    _check_sip_grid(spec)
    # The 51-bit address layout (address.py) bounds what a topology may hold.
    for what, value, limit, where in (
            ("cubes per SIP", spec.cubes_per_sip, 32, "sip.cube_mesh.w * sip.cube_mesh.h"),
            ("PEs per cube", spec.pes_per_cube, 32, "cube.pe_layout"),
            ("HBM bytes per cube", spec.cube.hbm.capacity_gib * (1 << 30), 1 << 39, "cube.hbm.capacity_gib"),
            ("TCM bytes", spec.pe.tcm.capacity_mib * (1 << 20), 1 << 34, "pe.tcm.capacity_mib"),
            ("SRAM bytes", spec.cube.sram.capacity_mib * (1 << 20), 1 << 34, "cube.sram.capacity_mib")):
        if value > limit:  # compared as a float: `capacity_gib: 1e300` overflows to inf, which int() refused
            shown = int(value) if value < 1e30 else f"{value:.3g}" if math.isfinite(value) else "over 1e308"
            raise SpecError(f"{src}: {where} gives {shown} {what}, more than the physical address layout can "
                            f"name ({limit}); reduce it (see adr/0003)")
    attach = spec.sip.io.attach_cube
    if attach >= spec.cubes_per_sip or attach % spec.sip.cube_mesh.w:
        raise SpecError(f"{src}: field 'sip.io.attach_cube' = {attach} is invalid; expected the index of "
                        f"a cube in the mesh's west column (a multiple of sip.cube_mesh.w = "
                        f"{spec.sip.cube_mesh.w}, below {spec.cubes_per_sip}): the IO chiplet sits west")
    hbm = spec.cube.hbm
    if hbm.pseudo_channels % spec.pes_per_cube:
        raise SpecError(f"{src}: field 'cube.hbm.pseudo_channels' = {hbm.pseudo_channels} is invalid; "
                        f"expected a multiple of the {spec.pes_per_cube} PEs per cube")
    if len(set(spec.cube.pe_layout.corners)) != len(spec.cube.pe_layout.corners):
        raise SpecError(f"{src}: field 'cube.pe_layout.corners' repeats a corner; list each at most once")
    if spec.fabric.packet_bytes % spec.fabric.flit_bytes:
        raise SpecError(f"{src}: field 'fabric.packet_bytes' = {spec.fabric.packet_bytes} is invalid; "
                        f"expected a multiple of fabric.flit_bytes = {spec.fabric.flit_bytes}")
    if spec.fabric.packet_bytes < spec.fabric.control_bytes:
        raise SpecError(f"{src}: field 'fabric.packet_bytes' = {spec.fabric.packet_bytes} is invalid; expected at "
                        f"least fabric.control_bytes = {spec.fabric.control_bytes} (a control message is one packet)")
    page = spec.pe.mmu_page_bytes
    if page & (page - 1):
        raise SpecError(f"{src}: field 'pe.mmu_page_bytes' = {page} is invalid; expected a power of two")
    if spec.pe.tcm.scratch_mib > spec.pe.tcm.capacity_mib:
        raise SpecError(f"{src}: field 'pe.tcm.scratch_mib' = {spec.pe.tcm.scratch_mib} exceeds "
                        f"pe.tcm.capacity_mib = {spec.pe.tcm.capacity_mib}")
    TcmLayout.of(spec).check(src)
    geo = spec.cube.geometry
    layout = spec.cube.pe_layout
    reach = geo.pe_inset_mm + (layout.pe_per_corner - 1) * geo.pe_pitch_mm
    if reach >= geo.w_mm or geo.pe_inset_mm >= geo.h_mm:
        raise SpecError(f"{src}: field 'cube.geometry.pe_inset_mm' = {geo.pe_inset_mm:g} with pe_pitch_mm = "
                        f"{geo.pe_pitch_mm:g} and {layout.pe_per_corner} PEs per corner puts PEs outside the "
                        f"{geo.w_mm:g} x {geo.h_mm:g} mm cube; expected pe_inset_mm + (pe_per_corner - 1) * "
                        f"pe_pitch_mm = {reach:g} below w_mm = {geo.w_mm:g} and pe_inset_mm below h_mm = "
                        f"{geo.h_mm:g}")
    if geo.hbm_gap_mm >= geo.h_mm / 2:
        raise SpecError(f"{src}: field 'cube.geometry.hbm_gap_mm' = {geo.hbm_gap_mm:g} is invalid; expected below "
                        f"h_mm / 2 = {geo.h_mm / 2:g} (the HBM router rows sit inside the cube)")
    columns = math.ceil(geo.w_mm / geo.max_spacing_mm)
    if columns > MAX_ROUTER_COLUMNS:
        raise SpecError(f"{src}: field 'cube.geometry.max_spacing_mm' = {geo.max_spacing_mm:g} would put about "
                        f"{columns:,} router columns across the {geo.w_mm:g} mm cube; expected at most "
                        f"{MAX_ROUTER_COLUMNS}: max_spacing_mm >= w_mm / {MAX_ROUTER_COLUMNS} = "
                        f"{geo.w_mm / MAX_ROUTER_COLUMNS:g}")
    for name, (x, y) in (("m_cpu_pos_mm", spec.cube.placement.m_cpu_pos_mm),
                         ("sram_pos_mm", spec.cube.placement.sram_pos_mm)):
        if not (0 <= x <= geo.w_mm and 0 <= y <= geo.h_mm):
            raise SpecError(f"{src}: field 'cube.placement.{name}' = {[x, y]!r} lies outside the "
                            f"{geo.w_mm:g} x {geo.h_mm:g} mm cube; give a position inside it")


def _check_text(data: Any, source: str) -> None:
    """:class:`SpecError` for a text (a key or a value) holding a lone surrogate such as ``"\\udc80"``: YAML
    escapes can write one, but no file, SVG or web page can hold it, so diagrams and the viewer failed on it."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        texts = [(k, path or "the root") for k in item] if isinstance(item, dict) else []
        if isinstance(item, str):
            texts.append((item, path))
        for text in texts:
            if isinstance(text[0], str):
                try:
                    text[0].encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise SpecError(f"{source}: field '{text[1]}' holds the lone surrogate "
                                    f"U+{ord(text[0][exc.start]):04X} (in {quote(text[0])}), which is not a "
                                    f"character; write the character itself, or remove the escape") from None
        if isinstance(item, dict):
            stack.extend((v, _join(path, str(k))) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))


def spec_from_dict(data: Any, source: str = "<dict>") -> TopologySpec:
    """Validate a parsed mapping and return the spec; raise :class:`SpecError` on bad input."""
    _check_text(data, source)
    spec = _Loader(source).build(TopologySpec, data, "")
    spec = dataclasses.replace(spec, source=source)
    _check_consistency(spec)
    return spec


def _check_sip_grid(spec: TopologySpec) -> None:
    """Ask the SIP topology family whether ``system.sips.grid`` fits ``system.sips.count``."""
    sips = spec.system.sips
    rows, cols = sips.grid
    hint = get_sip_topology(sips.topology).grid_problem(sips.count, (rows, cols))
    if hint:
        raise SpecError(f"{spec.source}: field 'system.sips.grid' = {list(sips.grid)!r} holds {rows * cols} SIPs "
                        f"but system.sips.count = {sips.count}; {hint}")


def spec_from_yaml(text: str | bytes, source: str) -> TopologySpec:
    """Parse and validate topology YAML ``text`` (or raw bytes); ``source`` names it in errors (a path,
    ``builtin:NAME``). Parsing is :func:`kernbench.topology.safe_yaml.load_yaml`: plain data only, no duplicate
    keys, bounded size and aliases."""
    data = load_yaml(text, source, SpecError)
    if data is None:  # an empty file, only comments, or `~`: most likely the wrong file, not a wish for defaults
        raise SpecError(f"{source}: the file holds no topology (it is empty, only comments, or null); start from a "
                        f"builtin (`kernbench topology --export default PATH`), write `{{}}` for every default, or "
                        f"pass no topology for the builtin default")
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the document root must be a mapping of sections, got {type(data).__name__}")
    return spec_from_dict(data, source)


def expand_user(path: str | Path) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded; :class:`SpecError` when that home folder is unknown
    (``Path.expanduser`` raised ``RuntimeError`` for ``~nosuchuser/x.yaml``)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = str(path).split("/", 1)[0]
        raise SpecError(f"topology path {str(path)[:200]!r}: {user} names no user with a home folder on this "
                        f"machine; spell the path out") from None


def load_spec(path: str | Path) -> TopologySpec:
    """Read and validate a topology YAML file."""
    p = expand_user(path)
    if not p.exists():
        raise SpecError(f"topology file not found: {p}; pass an existing YAML file, or a builtin topology name "
                        f"(`kernbench topology --list`), or nothing for the builtin default")
    if not p.is_file():
        raise SpecError(f"topology path is not a file: {p}")
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise SpecError(f"{p}: the file is {size:,} bytes, more than the {MAX_BYTES:,} a topology may hold; "
                            f"is this the right file?")
        raw = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read topology file {p}: {exc.strerror}") from None
    return spec_from_yaml(raw, str(p))


def field_docs() -> list[tuple[str, str, Any]]:
    """Every leaf field as (dotted path, description with its allowed values, default), for documentation."""
    rows: list[tuple[str, str, Any]] = []

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name == "source":
                continue
            path = _join(prefix, f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                walk(hints[f.name], path)
            else:
                allowed = _describe(dict(f.metadata), hints[f.name]) \
                    if path not in ("components", "disabled_links", "pe.blocks") else ""
                doc = f.metadata.get("doc", "")
                rows.append((path, f"{doc} ({allowed})" if allowed else doc, f.default))

    walk(TopologySpec, "")
    return rows


__all__ = ["expand_user", "field_docs", "load_spec", "spec_from_dict", "spec_from_yaml"]
