"""The all-reduce links panel in the report: numbers, claims and the table beside the heatmaps.

Everything comes from the links-panel points of the allreduce study's
``results.json``: the run window, the ``links`` rows
(:mod:`kernbench.studies.allreduce_links`) and the payload. The
busiest link *drawn* is the busiest among the links a whole-tray heatmap
shows (PE-internal and command links left out), the one the figure labels.
"""

from __future__ import annotations

from kernbench.studies import allreduce_links
from kernbench.studies.allreduce_links import LinkRow
from kernbench.studies.report.numbers import Numbers, fixed, sig
from kernbench.studies.report.tables import TableData
from kernbench.studies.results import one
from kernbench.topology.sip_topologies import MESH_2D_NO_WRAP, SHIPPED

SRC = "out/studies/allreduce/results.json"
#: SIP topology -> the tag in macro names (its strategy's label, capitalised: Ring, Torus, Mesh)
TOPOLOGIES = {t.name: t.label.capitalize() for t in SHIPPED}
#: Busy share of the run window from which the report calls a link's load a bound on the all-reduce.
SATURATED = 0.5


def _size(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB" if nbytes >= 1024 and nbytes % 1024 == 0 else f"{nbytes} B"


def links_points(doc: dict) -> dict[str, tuple[dict, tuple[LinkRow, ...]]]:
    """SIP topology -> (its links-panel row, its decoded link rows)."""
    out = {}
    for t in TOPOLOGIES:
        row = one(doc, panel="links", sip_topology=t)
        out[t] = (row, allreduce_links.decode(row["links"], f"{SRC}, links point of {t}"))
    return out


def pcie_bytes(rows: tuple[LinkRow, ...]) -> list[int]:
    """Bytes of every PCIe link that carried any (each direction of each SIP's link to the switch), B."""
    return [r.bytes for r in rows if r.kind == "pcie"]


def _pcie_senders(rows: tuple[LinkRow, ...]) -> str:
    """The SIPs whose link up to the switch carried the most bytes, as ``1 and 4`` (ids from the link names)."""
    up = {r.src.split(".")[0].removeprefix("sip"): r.bytes for r in rows
          if r.kind == "pcie" and r.src.startswith("sip")}
    top = max(up.values(), default=0)
    ids = sorted((s for s, b in up.items() if b == top), key=int)
    return ", ".join(ids[:-1]) + (" and " if len(ids) > 1 else "") + ids[-1] if ids else "none"


def generate(doc: dict, nums: Numbers) -> dict[str, str]:
    """Add the links panel's numbers to ``nums``; return its claims (name -> LaTeX)."""
    points = links_points(doc)
    claims = {}
    payloads = {row["bytes_per_pe"] for row, _ in points.values()}
    nums.text("kbArLinksPayload", "/".join(_size(b) for b in sorted(payloads)), f"{SRC}: bytes_per_pe, links panel")
    overall = None
    for t, tag in TOPOLOGIES.items():
        row, rows = points[t]
        window = float(row["window_ns"])
        nums.us(f"kbArLinks{tag}Window", window, f"{SRC}: window_ns, links panel, {t}")
        drawn = allreduce_links.busiest(rows, window, drawn_only=True)
        nums.pct(f"kbArLinks{tag}Busiest", drawn.utilisation(window) if drawn else 0.0,
                 f"{SRC}: links, {t}: busy_ns / window_ns of the busiest link a whole-tray heatmap draws")
        pcie = pcie_bytes(rows)
        lo, hi = min(pcie, default=0), max(pcie, default=0)
        if lo == hi:
            nums.plain(f"kbArLinks{tag}Pcie", hi / 1024, f"{SRC}: links, {t}: bytes of every PCIe link", "KiB")
            claims[f"kbClaimArLinks{tag}Pcie"] = rf"\kbArLinks{tag}Pcie{{}}"
        else:
            nums.plain(f"kbArLinks{tag}PcieMin", lo / 1024, f"{SRC}: links, {t}: fewest bytes on a PCIe link", "KiB")
            nums.plain(f"kbArLinks{tag}PcieMax", hi / 1024, f"{SRC}: links, {t}: most bytes on a PCIe link", "KiB")
            claims[f"kbClaimArLinks{tag}Pcie"] = rf"between \kbArLinks{tag}PcieMin{{}} and \kbArLinks{tag}PcieMax{{}}"
        top = allreduce_links.busiest(rows, window)
        if top is not None and (overall is None or top.utilisation(window) > overall[0]):
            overall = (top.utilisation(window), top, t)
    share, top, where = overall if overall else (0.0, None, "")
    nums.pct("kbArLinksBusiestAll", share, f"{SRC}: links: the highest busy_ns / window_ns of any link of any "
             "topology")
    nums.text("kbArLinksBusiestAllLink", f"{top.src} → {top.dst}" if top else "none",
              f"{SRC}: links: that link ({where})")
    nums.text("kbArLinksBusiestAllKind", top.kind if top else "none", f"{SRC}: links: that link's kind")
    if share < SATURATED:
        claims["kbClaimArLinksSaturation"] = ("no link comes near saturation: the time goes to the serial steps and "
                                              "the accumulates, as the model's split says")
    else:
        claims["kbClaimArLinksSaturation"] = ("that link is busy for a large part of the run, so link bandwidth, not "
                                              "only the number of steps, bounds this all-reduce")
    mesh = pcie_bytes(points[MESH_2D_NO_WRAP.name][1])
    if len(set(mesh)) <= 1:
        claims["kbClaimArLinksMeshSpread"] = "every SIP's PCIe link carries the same bytes in the mesh too"
    else:
        nums.text("kbArLinksMeshTopSenders", _pcie_senders(points[MESH_2D_NO_WRAP.name][1]),
                  f"{SRC}: links, {MESH_2D_NO_WRAP.name}: the SIPs whose PCIe link up to the switch carried the most")
        claims["kbClaimArLinksMeshSpread"] = (r"in the mesh the load is uneven: SIPs \kbArLinksMeshTopSenders{} send "
                                              r"the most, \kbArLinksMeshPcieMax{} each")
    return claims


def table(doc: dict, nums: Numbers | None = None) -> TableData:
    """Per topology: run window, links that carried bytes, bytes summed over links, the busiest link drawn (its
    kind and busy share) and the bytes of the PCIe links. ``nums``: the report's numbers (made here when not given),
    whose payload macro the caption uses."""
    if nums is None:
        nums = Numbers()
        generate(doc, nums)
    rows = []
    for t, (row, links) in links_points(doc).items():
        window = float(row["window_ns"])
        drawn = allreduce_links.busiest(links, window, drawn_only=True)
        pcie = pcie_bytes(links)
        lo, hi = sig(min(pcie, default=0) / 1024, 3), sig(max(pcie, default=0) / 1024, 3)
        rows.append([t, sig(window / 1e3, 4), str(len(links)), sig(sum(r.bytes for r in links) / 2**20, 4),
                     drawn.kind if drawn else "none", fixed(100 * drawn.utilisation(window), 1) if drawn else "0",
                     hi if lo == hi else f"{lo}–{hi}"])
    return TableData("tab:allreduce-links",
                     r"Links panel: one all-reduce per SIP topology at \kbArLinksPayload{} "
                     "per PE with TCM rings. Run window, directed links that carried bytes, bytes summed over those "
                     "links (a transfer counts on every link it crosses), the busiest link a whole-tray heatmap "
                     "draws (kind, % of the window busy) and the KiB on each PCIe link between a SIP and the "
                     "switch, per direction.",
                     ["topology", "window µs", "links used", "MiB on links", "busiest drawn", "busy %", "PCIe KiB"],
                     rows, "lrrrlrr", values={"kbArLinksPayload": nums.plain_text("kbArLinksPayload")})
