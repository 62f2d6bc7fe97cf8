"""What the viewer loads: the compiled graph as compact JSON, a run summary and a run's links.

:func:`graph_payload` turns a :class:`~kernbench.topology.TopologyGraph` into
column arrays the page reads (node ids, types, positions in mm, hierarchy
location, the box each node belongs to at the system, SIP and cube levels,
parameters; directed edges with kind, bandwidth, propagation, length and
routing weight), plus the routing rules of
:mod:`kernbench.topology.routing` and the colour scale of
:mod:`kernbench.topology.heatmap`. Node ids and box ids come from
:mod:`kernbench.topology.naming`; the page never builds an id.

:func:`read_run` and :func:`load_links` read and check the files given to
``kernbench web --run/--links``, raising :class:`ViewerInputError` /
:class:`~kernbench.sim.links.LinksFileError` with what, where and how to fix.
"""

from __future__ import annotations

import json
import math
from os import PathLike
from pathlib import Path

from kernbench.sim.links import LinksReport, check_topology, load_json, read_links
from kernbench.topology import TopologyGraph
from kernbench.topology import naming as nm
from kernbench.topology.diagrams import box_colour
from kernbench.topology.errors import KernbenchError
from kernbench.topology.heatmap import HIDDEN_KINDS, IDLE_COLOUR, LINK_COLOURS
from kernbench.topology.routing import excluded_kinds
from kernbench.topology.sip_topologies import get_sip_topology

SCHEMA = "kernbench.web/1"
LEVELS = ("system", "sip", "cube", "pe")


class ViewerInputError(KernbenchError):
    """A file or option given to ``kernbench web`` is unusable (a run file, a view name, a port)."""


def _owner_ids(node_id: str) -> tuple[str | None, str | None, str | None]:
    """The box ids that hold a node at the system, SIP and cube levels (None where it is not drawn)."""
    loc = nm.locate(node_id)
    if node_id in (nm.HOST, nm.SWITCH):
        return node_id, None, None
    if loc.sip is None:
        return None, None, None
    system = nm.sip_prefix(loc.sip)
    sip = nm.owner_and_unit(node_id)[0] if loc.cube is None else nm.cube_prefix(loc.sip, loc.cube)
    cube = nm.pe_of(node_id) if loc.unit in nm.PE_BLOCKS else node_id
    return system, sip, cube if loc.cube is not None else None


def sip_pairs(spec) -> tuple[tuple[int, int], list[list]]:
    """The SIP grid ``(rows, cols)`` and the neighbour pairs a collective exchanges between, from the SIP topology
    strategy (:func:`~kernbench.topology.sip_topologies.get_sip_topology`): ``[a, b, axis, wraps]`` with ``a < b``,
    ``axis`` ``"row"`` (``E``/``W``) or ``"col"`` (``N``/``S``), ``wraps`` true for a wrap-around pair."""
    sips = spec.system.sips
    strategy = get_sip_topology(sips.topology)
    rows, cols = strategy.grid(sips.count, sips.grid)
    seen: dict[tuple[int, int], list] = {}
    for i in range(sips.count):
        for direction, axis in (("E", "row"), ("W", "row"), ("S", "col"), ("N", "col")):
            j = strategy.neighbour(i, direction, rows, cols)
            if j is None or j == i or not 0 <= j < sips.count:
                continue
            a, b = min(i, j), max(i, j)
            ra, ca = strategy.layout(a, sips.count, sips.grid)
            rb, cb = strategy.layout(b, sips.count, sips.grid)
            seen.setdefault((a, b), [a, b, axis, abs(ra - rb) + abs(ca - cb) > 1])
    return (rows, cols), [seen[k] for k in sorted(seen)]


def graph_payload(graph: TopologyGraph) -> dict:
    """The compiled graph as the viewer's JSON object (schema ``kernbench.web/1``)."""
    spec = graph.spec
    strings: dict[str, int] = {}
    types: dict[str, int] = {}
    attrs: dict[str, int] = {}

    def sid(s: str | None) -> int:
        return -1 if s is None else strings.setdefault(s, len(strings))

    ids, typ, xs, ys, loc, units, own, att = [], [], [], [], [], [], [], []
    for n in graph.nodes.values():
        where = nm.locate(n.id)
        ids.append(n.id)
        typ.append(types.setdefault(n.type, len(types)))
        xs.append(round(n.x_mm, 6))
        ys.append(round(n.y_mm, 6))
        loc += [-1 if v is None else v for v in (where.sip, where.cube, where.pe)]
        units.append(where.unit)
        own += [sid(o) for o in _owner_ids(n.id)]
        key = json.dumps(dict(n.attrs), sort_keys=True)
        att.append(attrs.setdefault(key, len(attrs)))
    index = {nid: i for i, nid in enumerate(ids)}
    params: dict[tuple, int] = {}
    src, dst, par = [], [], []
    for e in graph.edges:
        src.append(index[e.src])
        dst.append(index[e.dst])
        par.append(params.setdefault((e.kind, e.bw_gbs, e.latency_ns, e.distance_mm, e.routing_weight_mm),
                                     len(params)))
    kinds = sorted({*types, "sip", "io", "cube", "pe"})
    grid, pairs = sip_pairs(spec)
    return {
        "schema": SCHEMA,
        "topology": {"name": spec.name, "source": str(spec.source) if spec.source else None,
                     "sips": spec.system.sips.count, "sip_topology": spec.system.sips.topology,
                     "cubes_per_sip": spec.cubes_per_sip, "pes_per_cube": spec.pes_per_cube,
                     "mesh_w": spec.sip.cube_mesh.w, "mesh_h": spec.sip.cube_mesh.h,
                     "io_attach_cube": spec.sip.io.attach_cube, "pe_w_mm": spec.pe.w_mm,
                     "cube_w_mm": spec.cube.geometry.w_mm, "cube_h_mm": spec.cube.geometry.h_mm,
                     "flit_bytes": spec.fabric.flit_bytes, "packet_bytes": spec.fabric.packet_bytes,
                     "control_bytes": spec.fabric.control_bytes, "nodes": len(ids), "edges": len(src),
                     "sip_grid": list(grid), "sip_pairs": pairs},
        "nodes": {"id": ids, "type": typ, "x": xs, "y": ys, "loc": loc, "unit": units, "own": own, "attrs": att},
        "types": list(types),
        "attrs": [json.loads(k) for k in attrs],
        "strings": list(strings),
        "edges": {"src": src, "dst": dst, "param": par},
        "edge_params": [list(p) for p in params],
        "routing": {"exclude": {k: sorted(v) for k, v in excluded_kinds().items()}, "pe_blocks": list(nm.PE_BLOCKS)},
        "views": {name: graph.views[name].title for name in LEVELS},
        "colours": {"links": list(LINK_COLOURS), "idle": IDLE_COLOUR, "hidden_kinds": sorted(HIDDEN_KINDS),
                    "boxes": {k: box_colour(k) for k in kinds}},
    }


def read_run(path: str | PathLike[str]) -> dict | list:
    """A ``kernbench run --json`` output (one run object, or a list of them for ``--device all``)."""
    p = Path(path)
    hint = "write it with `kernbench run --bench NAME --json > RUN.json`"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ViewerInputError(f"run file {p} does not exist; {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ViewerInputError(f"cannot read run file {p}: {exc}; {hint}") from None
    data = load_json(text, f"run file {p}", ViewerInputError, hint)
    runs = data if isinstance(data, list) else [data]
    for i, r in enumerate(runs):
        where = f"run file {p}" + (f" item {i}" if isinstance(data, list) else "")
        if not isinstance(r, dict) or not isinstance(r.get("bench"), str):
            raise ViewerInputError(f"{where} is not a run result (no \"bench\" name); {hint}")
        lat = r.get("latency_ns")
        if isinstance(lat, bool) or not isinstance(lat, int | float) or not math.isfinite(lat) or lat < 0:
            raise ViewerInputError(f"{where}: latency_ns is {lat!r}, expected a non-negative number of ns; {hint}")
    if not runs:
        raise ViewerInputError(f"run file {p} holds an empty list; {hint}")
    return data


def links_payload(report: LinksReport) -> dict:
    """What the page needs of a links report: run, window, fabric, the topology's edge count and the links that
    carried traffic (:func:`~kernbench.sim.links.carried_traffic`; the page counts them as they come)."""
    return report.to_json()


def load_links(path: str | PathLike[str], graph: TopologyGraph) -> dict:
    """Read, check against ``graph`` and reduce a links file for the page."""
    report = read_links(path)
    check_topology(report, graph, f"links file {path}")
    return links_payload(report)


__all__ = ["LEVELS", "SCHEMA", "ViewerInputError", "graph_payload", "links_payload", "load_links",
           "read_run", "sip_pairs"]
