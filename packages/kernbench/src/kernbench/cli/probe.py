"""``kernbench probe``: a traffic catalog measured on the fabric beside an analytic formula.

Every case runs in its own :class:`GraphEngine` (no cross-talk). The formula
is an independent closed form of the latency model, computed from the path's
nodes and edges only::

    formula = overhead + wire + fill + drain

* overhead — the sum of ``overhead_ns`` of every node on the path(s);
* wire     — the sum of edge propagation latencies;
* fill     — the head flit's serialisation on every edge (pipeline fill);
* drain    — the rest of the payload behind the head: ``(N - flit) / BN`` at
  the bottleneck link for link-bound targets; for HBM the per-channel closed
  form (bursts striped over ``k`` channels, each ``s = burst / channel_bw``,
  fed one flit every ``Δ``): ``s + max((n-1)Δ, ((n-1) mod k)Δ + ⌊(n-1)/k⌋ s)``.
  A read adds the command leg and, on the way back, the HBM-paced data.

The contention category runs 2 and 4 concurrent host writes whose common
bottleneck is one wire (the SRAM link) and checks that they share it, next
to the same write alone (``contention-1flow``). Every case name the probe
prints is a valid ``--case`` (:func:`case_names`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

from kernbench.components import default_registry
from kernbench.sim import GraphEngine, MemoryReadMsg, MemoryWriteMsg, PeDmaWriteMsg, Request
from kernbench.topology import AddressResolver, PathRouter, PhysAddr, TopologyGraph, load_topology, path_edges
from kernbench.topology import naming as nm
from kernbench.topology.errors import KernbenchError

NBYTES = 32768
SWEEP_SIZES = (4096, 16384, 65536, 262144, 1048576)
FORMULA_TOLERANCE = 0.02


class ProbeError(KernbenchError):
    """A probe request cannot be satisfied (e.g. an unknown case name)."""


@dataclass
class CaseResult:
    """One measured case (times in ns, bandwidths in GB/s)."""

    name: str
    category: str
    actual_ns: float
    overhead_ns: float
    wire_ns: float
    fill_ns: float
    drain_ns: float
    formula_ns: float
    bottleneck_bw_gbs: float
    eff_bw_gbs: float
    util_pct: float
    hops: int
    path: list[str]
    hop_times: list[tuple[str, str, float, float]] = field(default_factory=list)  # (leg, node, t_in, t_out) ns
    bottleneck_edge: tuple[str, str] = ("", "")
    flows: list[dict] = field(default_factory=list)


@dataclass
class ProbeResult:
    """The whole probe run: cases, utilisation sweep and invariants."""

    nbytes: int
    cases: list[CaseResult]
    sweep: list[dict]
    invariants: list[dict]

    def to_json(self) -> dict:
        """The documented JSON contract of ``kernbench probe --json``."""
        cases = []
        for c in self.cases:
            d = asdict(c)
            d.pop("hop_times")
            d.pop("bottleneck_edge")
            if not d["flows"]:
                d.pop("flows")
            cases.append(d)
        return {"nbytes": self.nbytes, "cases": cases, "sweep": self.sweep, "invariants": self.invariants}

    @property
    def all_pass(self) -> bool:
        """Whether every invariant passed."""
        return all(i["pass"] for i in self.invariants)


@dataclass(frozen=True)
class _Case:
    name: str
    category: str
    kind: str  # "write" (host or PE) or "read" (host)
    src: tuple  # ("host",) or ("pe", sip, cube, pe)
    dst: tuple  # (sip, cube, pe) of the target HBM slice, or ("sram", sip, cube)


def catalog(graph: TopologyGraph) -> list[_Case]:
    """The single-flow cases for this topology (sizes follow the cube mesh)."""
    spec = graph.spec
    w, h = spec.sip.cube_mesh.w, spec.sip.cube_mesh.h
    base = spec.sip.io.attach_cube
    col = [base + k * w for k in range(h) if base + k * w < spec.cubes_per_sip][:4]
    cases = [_Case(f"h2d-{i + 1}hop", "h2d", "write", ("host",), (0, c, 0)) for i, c in enumerate(col)]
    cases += [_Case(f"d2h-{i + 1}hop", "d2h", "read", ("host",), (0, c, 0)) for i, c in enumerate(col)]
    pes = spec.pes_per_cube
    pe_cases = [("pe-local-hbm", (0, 0, 0))]
    if pes > 1:
        pe_cases.append(("pe-same-half-hbm", (0, 0, 1)))
    if pes > 2:
        pe_cases.append(("pe-cross-half-hbm", (0, 0, pes // 2)))
    if spec.cubes_per_sip > 1:
        pe_cases.append(("pe-cross-cube-hbm-best", (0, 1, 0)))
        pe_cases.append(("pe-cross-cube-hbm-worst", (0, spec.cubes_per_sip - 1, 0)))
    if spec.system.sips.count > 1:
        pe_cases.append(("pe-cross-sip-hbm", (1, 0, 0)))
    cases += [_Case(n, "pe_dma", "write", ("pe", 0, 0, 0), d) for n, d in pe_cases]
    return cases


def _contention_sizes(graph: TopologyGraph) -> list[int]:
    return [2, 4]


#: The contention category's reference: one host write alone into the SRAM the contention cases share.
LONE_FLOW = "contention-1flow"


def case_names(graph: TopologyGraph) -> list[str]:
    """Every case name the probe prints for this topology, in the order it prints them; each one is a valid
    ``--case``."""
    return [c.name for c in catalog(graph)] + [LONE_FLOW] + [f"contention-{n}flows" for n in _contention_sizes(graph)]


class _Probe:
    def __init__(self, graph: TopologyGraph) -> None:
        self.graph = graph
        self.spec = graph.spec
        self.resolver = AddressResolver(graph)
        self.router = PathRouter(graph)
        self.registry = default_registry()

    def engine(self) -> GraphEngine:
        return GraphEngine(self.graph, self.registry, router=self.router)

    # ------------------------------------------------------------ running
    def submit(self, engine: GraphEngine, case: _Case, nbytes: int) -> tuple[Request, tuple[str, ...]]:
        sip, cube, pe = case.dst
        addr = self.resolver.hbm_addr(sip, cube, pe)
        dst = self.resolver.resolve(addr, nbytes)
        if case.src[0] == "host":
            path = self.router.memory_path(nm.HOST, dst)
            msg = MemoryWriteMsg(addr, nbytes) if case.kind == "write" else MemoryReadMsg(addr, nbytes)
        else:
            _, s, c, p = case.src
            path = self.router.pe_dma_path(nm.pe_block(s, c, p, "pe_dma"), dst)
            msg = PeDmaWriteMsg(s, c, p, addr, nbytes)
        return engine.submit(msg), path

    def measure(self, case: _Case, nbytes: int) -> CaseResult:
        eng = self.engine()
        req, path = self.submit(eng, case, nbytes)
        eng.run()
        f = self.formula(path, nbytes, read=case.kind == "read")
        actual = req.latency_ns
        eff = nbytes / actual
        return CaseResult(case.name, case.category, actual, f["overhead"], f["wire"], f["fill"], f["drain"],
                          f["total"], f["bn_bw"], eff, 100.0 * eff / f["bn_bw"], len(path) - 1, list(path),
                          list(req.hops), f["bn_edge"])

    # ------------------------------------------------------------ formula
    def formula(self, path: tuple[str, ...], nbytes: int, *, read: bool = False) -> dict:
        g, fab = self.graph, self.spec.fabric
        flit = fab.flit_bytes
        edges = path_edges(g, path)
        nodes = [g.nodes[n] for n in path]
        term = nodes[-1]
        bn_edge = min(edges, key=lambda e: e.bw_gbs)
        link_bw = bn_edge.bw_gbs
        n_flits = math.ceil(nbytes / flit)
        head = min(flit, nbytes)
        if term.type == "hbm_ctrl":
            k = int(term.attrs["channels"])
            s = int(term.attrs["burst_bytes"]) / float(term.attrs["channel_bw_gbs"])
            service_bw = k * float(term.attrs["channel_bw_gbs"])
        else:
            k, s, service_bw = 0, 0.0, math.inf
        bn_bw = min(link_bw, service_bw)
        wire = sum(e.latency_ns for e in edges)
        if not read:
            overhead = sum(n.overhead_ns for n in nodes)
            fill = sum(head / e.bw_gbs for e in edges)
            if term.type == "hbm_ctrl":
                d = flit / link_bw
                drain = s + max((n_flits - 1) * d, ((n_flits - 1) % k) * d + ((n_flits - 1) // k) * s)
            else:
                drain = (nbytes - head) / link_bw
        else:
            cmd = fab.control_bytes
            # command leg (every node, incl. the target's access overhead) + data leg back
            # (every node but the target and the requester, whose costs are already counted).
            overhead = sum(n.overhead_ns for n in nodes) + sum(n.overhead_ns for n in nodes[1:-1])
            wire *= 2
            fill = sum(cmd / e.bw_gbs for e in edges) + sum(flit / e.bw_gbs for e in edges)
            if term.type == "hbm_ctrl":
                drain = max(math.ceil(n_flits / k) * s, s + (nbytes - head) / link_bw) - s
                fill += s
            else:
                drain = (nbytes - head) / link_bw
        return {"overhead": overhead, "wire": wire, "fill": fill, "drain": drain,
                "total": overhead + wire + fill + drain, "bn_bw": bn_bw, "bn_edge": (bn_edge.src, bn_edge.dst)}

    # ------------------------------------------------------------ contention
    def lone(self, nbytes: int) -> CaseResult:
        """One host write alone into cube 0's SRAM: the reference of the contention cases (``contention-1flow``)."""
        path = self.router.memory_path(nm.HOST, nm.sram(0, 0))
        eng = self.engine()
        req = eng.submit(MemoryWriteMsg(PhysAddr(0, 0, "sram", 0), nbytes))
        eng.run()
        f = self.formula(path, nbytes)
        eff = nbytes / req.latency_ns
        return CaseResult(LONE_FLOW, "contention", req.latency_ns, f["overhead"], f["wire"], f["fill"], f["drain"],
                          f["total"], f["bn_bw"], eff, 100 * eff / f["bn_bw"], len(path) - 1, list(path),
                          list(req.hops), f["bn_edge"])

    def contention(self, n: int, nbytes: int) -> CaseResult:
        """n concurrent host writes into cube 0's SRAM (``contention-<n>flows``).

        Every flow crosses the same router-to-SRAM link, the bottleneck of the
        path, so the flows must share its bandwidth rather than each get all of it.
        """
        path = self.router.memory_path(nm.HOST, nm.sram(0, 0))
        eng = self.engine()
        reqs = [eng.submit(MemoryWriteMsg(PhysAddr(0, 0, "sram", i * nbytes), nbytes)) for i in range(n)]
        eng.run()
        f = self.formula(path, nbytes)
        bw = f["bn_bw"]
        last = max(reqs, key=lambda r: r.t_end)
        flows = [{"flow": i, "actual_ns": r.latency_ns, "eff_bw_gbs": nbytes / r.latency_ns}
                 for i, r in enumerate(reqs)]
        mean_eff = sum(fl["eff_bw_gbs"] for fl in flows) / n
        # n flows through one wire: the last one finishes (n-1) payloads later than a lone flow.
        drain = f["drain"] + (n - 1) * nbytes / bw
        return CaseResult(f"contention-{n}flows", "contention", last.latency_ns, f["overhead"], f["wire"], f["fill"],
                          drain, f["total"] + (n - 1) * nbytes / bw, bw, mean_eff, 100 * mean_eff / bw,
                          len(path) - 1, list(path), list(last.hops), f["bn_edge"], flows)


def _invariants(cases: list[CaseResult], lone: CaseResult | None) -> list[dict]:
    out = []

    def add(name: str, ok: bool, detail: str) -> None:
        out.append({"name": name, "pass": bool(ok), "detail": detail})

    by_cat: dict[str, list[CaseResult]] = {}
    for c in cases:
        by_cat.setdefault(c.category, []).append(c)
    for cat in ("h2d", "d2h"):
        lat = [c.actual_ns for c in by_cat.get(cat, [])]
        if len(lat) > 1:
            add(f"{cat} latency rises with hop count", all(a < b for a, b in pairwise(lat)),
                " < ".join(f"{v:.1f}" for v in lat) + " ns")
    h2d, d2h = by_cat.get("h2d", []), by_cat.get("d2h", [])
    if h2d and d2h and len(h2d) == len(d2h):
        add("d2h >= h2d at every hop count", all(d.actual_ns >= h.actual_ns for h, d in zip(h2d, d2h, strict=True)),
            ", ".join(f"{h.name}: {h.actual_ns:.1f} vs {d.actual_ns:.1f}" for h, d in zip(h2d, d2h, strict=True)))
    pe = {c.name: c for c in by_cat.get("pe_dma", [])}
    if "pe-cross-cube-hbm-best" in pe and "pe-cross-cube-hbm-worst" in pe:
        b, w = pe["pe-cross-cube-hbm-best"], pe["pe-cross-cube-hbm-worst"]
        add("pe dma: adjacent cube faster than farthest cube", b.actual_ns < w.actual_ns,
            f"{b.actual_ns:.1f} < {w.actual_ns:.1f} ns")
    single = [c for c in cases if not c.flows]
    if single:
        worst = max(single, key=lambda c: abs(c.actual_ns - c.formula_ns) / c.formula_ns)
        err = abs(worst.actual_ns - worst.formula_ns) / worst.formula_ns
        add(f"single-flow cases within {FORMULA_TOLERANCE:.0%} of the formula", err <= FORMULA_TOLERANCE,
            f"worst {worst.name}: actual {worst.actual_ns:.2f} vs formula {worst.formula_ns:.2f} ns ({err:.2%})")
    for c in cases:
        if not c.flows or lone is None:
            continue
        n = len(c.flows)
        # Subtract the lone flow's fixed pipeline latency: what remains is time spent draining data.
        fixed = lone.actual_ns - lone.actual_ns * lone.eff_bw_gbs / c.bottleneck_bw_gbs
        lone_data = lone.actual_ns - fixed
        share = [lone_data * n / (fl["actual_ns"] - fixed) for fl in c.flows]
        ratio = (c.actual_ns - fixed) / lone_data
        ok = all(0.9 <= s <= 1.25 for s in share) and 0.9 * n <= ratio <= 1.1 * n
        add(f"{c.name}: the shared wire's bandwidth is shared", ok,
            f"data-phase BW of each flow / (lone/{n}) = {', '.join(f'{s:.2f}' for s in share)}; the last flow "
            f"drains {ratio:.2f}x as long as a lone flow")
    return out


def run_probe(topology: str | Path | TopologyGraph, case: str | None = None, *, sweep: bool = True) -> ProbeResult:
    """Run the catalog (or one case), the utilisation sweep and the invariants."""
    graph = topology if isinstance(topology, TopologyGraph) else load_topology(topology)
    probe = _Probe(graph)
    names = case_names(graph)
    if case not in (None, "all") and case not in names:
        raise ProbeError(f"unknown probe case {case!r}; valid cases: {', '.join(names)}")
    selected = [c for c in catalog(graph) if case in (None, "all", c.name)]
    results = [probe.measure(c, NBYTES) for c in selected]
    flows = [n for n in _contention_sizes(graph) if case in (None, "all", f"contention-{n}flows")]
    lone = probe.lone(NBYTES) if flows or case == LONE_FLOW else None
    if lone is not None:  # a contention case is printed beside its lone flow
        results.append(lone)
    results += [probe.contention(n, NBYTES) for n in flows]
    rows = []
    if sweep:
        for c in selected:
            for size in SWEEP_SIZES:
                r = probe.measure(c, size)
                rows.append({"name": c.name, "nbytes": size, "actual_ns": r.actual_ns, "util_pct": r.util_pct})
    return ProbeResult(NBYTES, results, rows, _invariants(results, lone))
