"""Automatic layout of one cube's NoC router mesh, cached in a YAML file.

Inputs are the layout-relevant spec fields only (cube geometry, PE layout,
UCIe connection count, HBM mapping mode, M_CPU/SRAM placement). The layout:

* **PE positions** — each corner holds ``pe_per_corner`` PEs in a row,
  ``pe_inset_mm`` from the two cube edges and ``pe_pitch_mm`` apart.
* **Columns** — the distinct PE x positions, plus relay columns wherever two
  neighbouring columns are more than ``max_spacing_mm`` apart.
* **Rows** — ``ceil(n/2)`` rows in each half (``n`` = UCIe connections per
  side, at least 2) from the PE row towards the centre, plus two HBM rows at
  ``h/2 -+ hbm_gap_mm``.
* **HBM exclusion zone** — router slots on the two HBM rows in the two
  middle columns hold no router; the HBM stack sits there.
* **Attachments** — each PE (DMA, CPU, MMU and its HBM slice controller) to
  the router nearest its position; M_CPU and SRAM to the router nearest
  their ``pos_mm`` (Euclidean, ties to the first in row-major order); UCIe
  PHYs spread evenly over the routers of each boundary side.

The result is cached in the user cache directory (``mesh_cache_dir()``),
one YAML file per hash of those inputs, so the layout is an inspectable
artifact that never lands beside a user's topology. Writes are atomic. An
entry also holds ``content_sha256``, the SHA-256 of the layout as generated;
an entry that does not parse, whose layout no longer matches that hash
(edited, e.g. scaled coordinates), or that fails the structural checks of
:func:`mesh_problem` (router slots off the grid or on an empty slot, no
routers, coordinates that are not finite or not increasing, UCIe ports off
their side) is regenerated with a :class:`CacheWarning`, never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import yaml

from kernbench.topology.errors import SpecError
from kernbench.topology.files import atomic_write_text, cache_root
from kernbench.topology.safe_yaml import load_yaml
from kernbench.topology.spec import TopologySpec

MESH_FORMAT = 2  # 2: entries hold content_sha256


@dataclass(frozen=True)
class UciePort:
    """One UCIe PHY of a cube: its side, index, router slot and die position (mm)."""

    side: str
    index: int
    row: int
    col: int
    x_mm: float
    y_mm: float


@dataclass(frozen=True)
class CubeMesh:
    """A cube's router grid and what attaches where (positions in mm, y downwards)."""

    source_hash: str
    col_xs: tuple[float, ...]
    row_ys: tuple[float, ...]
    present: tuple[tuple[int, int], ...]
    hbm_zone: tuple[int, int, int, int]
    pe_positions: tuple[tuple[float, float], ...]
    pe_routers: tuple[tuple[int, int], ...]
    m_cpu_router: tuple[int, int]
    sram_router: tuple[int, int]
    ucie: tuple[UciePort, ...]

    def router_xy(self, row: int, col: int) -> tuple[float, float]:
        """Die position of the router at a grid slot, mm."""
        return self.col_xs[col], self.row_ys[row]


def layout_inputs(spec: TopologySpec) -> dict:
    """The spec fields that decide the mesh layout (and nothing else)."""
    cube = spec.cube
    return {
        "format": MESH_FORMAT,
        "geometry": asdict(cube.geometry),
        "pe_layout": asdict(cube.pe_layout),
        "ucie_connections": cube.noc.ucie_connections,
        "hbm_mapping_mode": cube.hbm.mapping_mode,
        "placement": asdict(cube.placement),
    }


def source_hash(spec: TopologySpec) -> str:
    """Stable hash of :func:`layout_inputs`."""
    blob = json.dumps(layout_inputs(spec), sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _pe_positions(spec: TopologySpec) -> list[tuple[float, float]]:
    geo, layout = spec.cube.geometry, spec.cube.pe_layout
    out = []
    for corner in layout.corners:
        for i in range(layout.pe_per_corner):
            dx = geo.pe_inset_mm + i * geo.pe_pitch_mm
            x = dx if corner[1] == "W" else geo.w_mm - dx
            y = geo.pe_inset_mm if corner[0] == "N" else geo.h_mm - geo.pe_inset_mm
            out.append((round(x, 6), round(y, 6)))
    return out


def _columns(xs: list[float], max_spacing: float) -> list[float]:
    cols = sorted(set(xs))
    out = [cols[0]]
    for x in cols[1:]:
        gap = x - out[-1]
        if gap > max_spacing:
            n_relay = math.ceil(gap / max_spacing) - 1
            step = gap / (n_relay + 1)
            left = out[-1]
            out.extend(round(left + step * k, 6) for k in range(1, n_relay + 1))
        out.append(x)
    return out


def _rows(spec: TopologySpec) -> tuple[list[float], int]:
    geo = spec.cube.geometry
    per_half = max(1, math.ceil(max(spec.cube.noc.ucie_connections, 2) / 2))
    top, hbm_top = geo.pe_inset_mm, geo.h_mm / 2 - geo.hbm_gap_mm
    bot, hbm_bot = geo.h_mm - geo.pe_inset_mm, geo.h_mm / 2 + geo.hbm_gap_mm
    if hbm_top <= top:
        hbm_top, hbm_bot = top + 1e-3, bot - 1e-3
    step = (hbm_top - top) / per_half
    upper = [round(top + k * step, 6) for k in range(per_half)]
    lower = [round(bot - k * step, 6) for k in range(per_half)][::-1]
    return [*upper, round(hbm_top, 6), round(hbm_bot, 6), *lower], per_half


def _nearest(present: list[tuple[int, int]], xs: list[float], ys: list[float],
             x: float, y: float) -> tuple[int, int]:
    return min(present, key=lambda rc: (math.hypot(xs[rc[1]] - x, ys[rc[0]] - y), rc))


def _spread(items: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    return [items[min(len(items) - 1, int((i + 0.5) * len(items) / n))] for i in range(n)]


def generate_mesh(spec: TopologySpec) -> CubeMesh:
    """Compute the cube mesh layout from the spec (pure)."""
    geo = spec.cube.geometry
    pes = _pe_positions(spec)
    xs = _columns([p[0] for p in pes], geo.max_spacing_mm)
    ys, per_half = _rows(spec)
    n_cols, n_rows = len(xs), len(ys)
    zone = (per_half, per_half + 1, max(0, n_cols // 2 - 1), n_cols // 2)
    present = [(r, c) for r in range(n_rows) for c in range(n_cols)
               if not (zone[0] <= r <= zone[1] and zone[2] <= c <= zone[3] and n_cols > 2)]
    pe_routers = [_nearest(present, xs, ys, x, y) for x, y in pes]
    m_cpu = _nearest(present, xs, ys, *spec.cube.placement.m_cpu_pos_mm)
    sram = _nearest(present, xs, ys, *spec.cube.placement.sram_pos_mm)
    n_conn = spec.cube.noc.ucie_connections
    ucie = []
    sides = {
        "n": ([(0, c) for c in range(n_cols)], lambda r, c: (xs[c], 0.0)),
        "s": ([(n_rows - 1, c) for c in range(n_cols)], lambda r, c: (xs[c], geo.h_mm)),
        "e": ([(r, n_cols - 1) for r in range(n_rows)], lambda r, c: (geo.w_mm, ys[r])),
        "w": ([(r, 0) for r in range(n_rows)], lambda r, c: (0.0, ys[r])),
    }
    for side, (slots, pos) in sides.items():
        slots = [s for s in slots if s in present]
        for k, (r, c) in enumerate(_spread(slots, n_conn)):
            x, y = pos(r, c)
            ucie.append(UciePort(side, k, r, c, round(x, 6), round(y, 6)))
    return CubeMesh(source_hash(spec), tuple(xs), tuple(ys), tuple(present), zone, tuple(pes),
                    tuple(pe_routers), m_cpu, sram, tuple(ucie))


class CacheWarning(UserWarning):
    """A cache entry was unusable (corrupt, truncated, of another format) and has been regenerated."""


def mesh_cache_dir() -> Path:
    """The folder of cached cube meshes: ``cube-mesh`` in the user cache (``files.cache_root``)."""
    return cache_root() / "cube-mesh"


def mesh_path_for(spec: TopologySpec) -> Path:
    """Where the cached mesh of ``spec``'s layout lives: one file per hash of the layout inputs."""
    return mesh_cache_dir() / f"{source_hash(spec)}.yaml"


def _layout(mesh: CubeMesh) -> dict:
    """The mesh as plain JSON data (tuples as lists)."""
    return json.loads(json.dumps(asdict(mesh)))


def content_sha256(mesh: CubeMesh) -> str:
    """SHA-256 (hex) of the mesh layout: what a cache entry stores of the layout it was generated with."""
    text = json.dumps(_layout(mesh), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _to_yaml(mesh: CubeMesh) -> str:
    data = {**_layout(mesh), "content_sha256": content_sha256(mesh)}
    header = "# Generated by kernbench.topology.mesh_gen; regenerated when source_hash changes.\n"
    return header + yaml.safe_dump(data, sort_keys=False)


def _tup(v):
    return tuple(_tup(i) for i in v) if isinstance(v, list) else v


def _is_slot(v: object) -> bool:
    return (isinstance(v, tuple) and len(v) == 2
            and all(isinstance(i, int) and not isinstance(i, bool) for i in v))


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def mesh_problem(mesh: CubeMesh, spec: TopologySpec) -> str | None:
    """Why ``mesh`` cannot be ``spec``'s cube layout (None when it can): router coordinates finite and strictly
    increasing, at least one router, every router slot on the grid, every attachment on a present router, the PE
    count of the spec, finite PE positions, UCIe ports of known sides on present routers."""
    rows, cols = len(mesh.row_ys), len(mesh.col_xs)
    for name, axis in (("col_xs", mesh.col_xs), ("row_ys", mesh.row_ys)):
        if not isinstance(axis, tuple) or not axis or not all(_finite(x) for x in axis):
            return f"{name} is not a list of finite numbers"
        if any(b <= a for a, b in itertools.pairwise(axis)):
            return f"{name} is not increasing"
    if not isinstance(mesh.present, tuple) or not mesh.present:
        return "the mesh has no routers (present is empty)"
    if not all(_is_slot(s) and 0 <= s[0] < rows and 0 <= s[1] < cols for s in mesh.present):
        return f"a router slot in present is off the {rows} x {cols} grid"
    present = set(mesh.present)
    n_pe = spec.pes_per_cube
    if not isinstance(mesh.pe_positions, tuple) or len(mesh.pe_positions) != n_pe or not all(
            isinstance(p, tuple) and len(p) == 2 and all(_finite(x) for x in p) for p in mesh.pe_positions):
        return f"pe_positions is not {n_pe} finite (x, y) pairs"
    if not isinstance(mesh.pe_routers, tuple) or len(mesh.pe_routers) != n_pe:
        return f"pe_routers does not hold {n_pe} slots"
    for name, slot in [*(("pe_routers", s) for s in mesh.pe_routers), ("m_cpu_router", mesh.m_cpu_router),
                       ("sram_router", mesh.sram_router)]:
        if not _is_slot(slot) or slot not in present:
            return f"{name} {slot!r} is not a present router"
    if not (isinstance(mesh.hbm_zone, tuple) and len(mesh.hbm_zone) == 4
            and all(isinstance(i, int) and not isinstance(i, bool) for i in mesh.hbm_zone)):
        return "hbm_zone is not four integers"
    for port in mesh.ucie:
        if port.side not in ("n", "s", "e", "w") or (port.row, port.col) not in present or not (
                _finite(port.x_mm) and _finite(port.y_mm)):
            return f"UCIe port {port.side}{port.index} (row {port.row}, col {port.col}) is not on a present router"
    return None


def _from_yaml(data: dict, spec: TopologySpec) -> CubeMesh:
    """A :class:`CubeMesh` from a cache entry's mapping; ``ValueError`` unless it is complete, matches the hash
    of the layout it was generated with, and fits ``spec`` (:func:`mesh_problem`)."""
    names = [f.name for f in fields(CubeMesh)]
    stored = data.get("content_sha256")
    data = {k: v for k, v in data.items() if k != "content_sha256"}
    if set(data) != set(names):
        raise ValueError(f"keys {sorted(data)} are not {names}")
    if not isinstance(data["ucie"], list) or not all(isinstance(u, dict) for u in data["ucie"]):
        raise ValueError("ucie is not a list of ports")
    ucie = tuple(UciePort(**u) for u in data["ucie"])
    mesh = CubeMesh(ucie=ucie, **{k: _tup(v) for k, v in data.items() if k != "ucie"})
    problem = mesh_problem(mesh, spec)
    if problem is not None:
        raise ValueError(problem)
    if stored != content_sha256(mesh):
        raise ValueError("the layout does not match its content_sha256 (edited or damaged)")
    return mesh


def _read_cache(path: Path, spec: TopologySpec) -> CubeMesh | None:
    """The cached mesh at ``path`` (None when absent or stale); a corrupt entry warns and yields None."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        data = load_yaml(raw, str(path), SpecError)
        if not isinstance(data, dict):
            raise ValueError(f"the document is a {type(data).__name__}, not a mapping")
        if data.get("source_hash") != source_hash(spec):
            return None
        return _from_yaml(data, spec)
    except (SpecError, ValueError, TypeError, KeyError, AttributeError) as exc:
        msg = " ".join(str(exc).split())[:120]
        warnings.warn(f"cube-mesh cache {path} is unusable ({type(exc).__name__}: {msg}); regenerating it",
                      CacheWarning, stacklevel=3)
        return None


def ensure_mesh(spec: TopologySpec, mesh_path: Path | None) -> tuple[CubeMesh, bool]:
    """Load the cached mesh at ``mesh_path`` if it is valid and current, else generate (and cache) it.

    Returns the mesh and whether it was regenerated. ``mesh_path=None`` runs
    uncached; an unwritable cache folder is not an error either.
    """
    if mesh_path is not None:
        cached = _read_cache(mesh_path, spec)
        if cached is not None:
            return cached, False
    mesh = generate_mesh(spec)
    if mesh_path is not None:
        with contextlib.suppress(OSError):  # read-only cache: run uncached
            atomic_write_text(mesh_path, _to_yaml(mesh))
    return mesh, True
