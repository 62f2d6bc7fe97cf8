"""Compiled topologies for study points: one compile per (file, overrides) per process.

A topology graph is immutable, so the points a worker process runs share
it; every point still builds its own runtime (engine, allocators, op log)
on top. Overrides change spec fields in memory (``{"cube.hbm.bw_gbs":
2048.0}``) without a new YAML file; they are validated like the file's own
values would be (a positive number, or zero where the field's declared lower bound is zero: the PE_CPU
dispatch cost model, which an ablation sets to zero).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

from kernbench.studies.base import Scalar, StudyError
from kernbench.topology import TopologyGraph, TopologySpec, compile_spec, load_topology
from kernbench.topology.block_params import PE_CPU
from kernbench.topology.sip_topologies import SHIPPED, TORUS_2D

#: The 6-SIP 2×3 topology file of each shipped SIP topology family (``6sip_2x3_<family>.yaml``), and the torus's.
SIX_SIP_FILES: tuple[str, ...] = tuple(f"6sip_2x3_{t.name}.yaml" for t in SHIPPED)
SIX_SIP_TORUS = f"6sip_2x3_{TORUS_2D.name}.yaml"

#: Fields an override may set to zero: the PE_CPU's fields whose declared lower bound is zero.
ZERO_ALLOWED = frozenset(p.field for p in PE_CPU if p.field and p.low == 0.0)


def _override(spec: TopologySpec, path: str, value: Scalar, full: str | None = None) -> TopologySpec:
    """``spec`` with the dotted field ``path`` set to ``value`` (a number replacing a number of the same sign);
    ``full`` is the whole dotted path when ``spec`` is a section."""
    full = full or path
    head, _, rest = path.partition(".")
    names = {f.name for f in dataclasses.fields(spec)}
    if head not in names:
        raise StudyError(f"spec override {full!r}: {type(spec).__name__} has no field {head!r} "
                         f"(fields: {', '.join(sorted(names))})")
    current = getattr(spec, head)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise StudyError(f"spec override {full!r}: {head!r} is a value, not a section")
        return dataclasses.replace(spec, **{head: _override(current, rest, value, full)})
    if isinstance(current, bool) or not isinstance(current, int | float):
        raise StudyError(f"spec override {full!r}: only numeric fields can be overridden, {head!r} is "
                         f"{type(current).__name__}")
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (
            value == 0 and full not in ZERO_ALLOWED):
        bound = "a number >= 0" if full in ZERO_ALLOWED else "a positive number"
        raise StudyError(f"spec override {full!r} = {value!r}: use {bound}")
    return dataclasses.replace(spec, **{head: type(current)(value)})


#: Derived overrides: a name that is not a spec field, and the spec field it sets from the spec.
DERIVED = {
    # per-pseudo-channel HBM bandwidth, GB/s: the cube's aggregate is that times its pseudo-channels
    "cube.hbm.channel_bw_gbs": ("cube.hbm.bw_gbs", lambda spec, v: v * spec.cube.hbm.pseudo_channels),
}


@lru_cache(maxsize=16)
def _graph(path: str, overrides: tuple[tuple[str, Scalar], ...]) -> TopologyGraph:
    base = load_topology(path)
    if not overrides:
        return base
    spec = base.spec
    for field_path, value in overrides:
        if field_path in DERIVED:
            target, derive = DERIVED[field_path]
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise StudyError(f"spec override {field_path!r} = {value!r}: use a positive number")
            spec = _override(spec, target, derive(spec, value))
            continue
        spec = _override(spec, field_path, value)
    return compile_spec(spec)  # the mesh does not depend on the overridable numbers; no cache file is written


def study_graph(topology_dir: Path, name: str, overrides: dict[str, Scalar] | None = None) -> TopologyGraph:
    """The compiled topology ``topology_dir/name`` with ``overrides`` applied (memoised per process)."""
    path = Path(topology_dir) / name
    if not path.is_file():
        raise StudyError(f"topology file {path} does not exist; run from the repository root or pass "
                         f"--topologies DIR (the folder holding {name})")
    return _graph(str(path.resolve()), tuple(sorted((overrides or {}).items())))
