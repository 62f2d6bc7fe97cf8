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

The result is written beside the topology file and reused while the hash of
those inputs is unchanged, so the layout is an inspectable artifact.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from kernbench.topology.spec import TopologySpec

MESH_FORMAT = 1


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


def mesh_path_for(topology_path: Path) -> Path:
    """Where the mesh cache of a topology file lives (beside it, one per topology)."""
    return topology_path.with_name(f"{topology_path.stem}.cube_mesh.yaml")


def _to_yaml(mesh: CubeMesh) -> str:
    data = asdict(mesh)
    data = json.loads(json.dumps(data))  # tuples -> lists for a plain YAML file
    header = "# Generated by kernbench.topology.mesh_gen; regenerated when source_hash changes.\n"
    return header + yaml.safe_dump(data, sort_keys=False)


def _from_yaml(data: dict) -> CubeMesh:
    def tup(v):
        return tuple(tup(i) for i in v) if isinstance(v, list) else v

    ucie = tuple(UciePort(**u) for u in data["ucie"])
    fields = {k: tup(v) for k, v in data.items() if k != "ucie"}
    return CubeMesh(ucie=ucie, **fields)


def ensure_mesh(spec: TopologySpec, mesh_path: Path | None) -> tuple[CubeMesh, bool]:
    """Load the cached mesh if its hash matches, else generate (and write) it.

    Returns the mesh and whether it was regenerated. An unwritable directory
    is not an error: the mesh is then simply not cached.
    """
    want = source_hash(spec)
    if mesh_path is not None and mesh_path.is_file():
        try:
            data = yaml.safe_load(mesh_path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("source_hash") == want:
                return _from_yaml(data), False
        except (yaml.YAMLError, KeyError, TypeError):
            pass
    mesh = generate_mesh(spec)
    if mesh_path is not None:
        with contextlib.suppress(OSError):  # read-only directory: run uncached
            mesh_path.write_text(_to_yaml(mesh), encoding="utf-8")
    return mesh, True
