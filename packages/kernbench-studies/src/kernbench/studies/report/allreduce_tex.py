"""The all-reduce section's generated numbers, claims and tables, from the allreduce study's ``results.json``.

Besides the panels' numbers it generates the fitted α–β line of every topology (a least-squares fit over the
measured points, :func:`kernbench.studies.allreduce_model.fit_alpha_beta`) and the section's "Differences from the
reference" table: each row a result of the earlier report (its macro in ``tex/reference/seed-claims.tex``), ours,
the mechanism behind the difference and the ablation run that shows it, every number a macro made here from the
results or there from the earlier report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernbench.studies.allreduce_model import fit_alpha_beta
from kernbench.studies.report import allreduce_links_tex
from kernbench.studies.report.numbers import Numbers, fixed, sig, tex_escape
from kernbench.studies.report.reference import SEED_CLAIMS, seed_claims, seed_number  # noqa: F401 (re-exported)
from kernbench.studies.report.tables import TableData
from kernbench.studies.results import select
from kernbench.topology.sip_topologies import MESH_2D_NO_WRAP, RING_1D, SHIPPED, TORUS_2D

#: SIP topology -> the tag in macro names (its strategy's label, capitalised: Ring, Torus, Mesh)
TOPOLOGIES = {t.name: t.label.capitalize() for t in SHIPPED}
KINDS = {"tcm": "Tcm", "sram": "Sram", "hbm": "Hbm"}
SRC = "out/studies/allreduce/results.json"


def _size(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB" if nbytes >= 1024 and nbytes % 1024 == 0 else f"{nbytes} B"


def generate(doc: dict, nums: Numbers) -> tuple[dict[str, str], dict[str, str]]:
    """Add the all-reduce numbers to ``nums``; return (claims name -> LaTeX, generated file name -> text)."""
    src = SRC
    topo = {t: select(doc, panel="topology", sip_topology=t) for t in TOPOLOGIES}
    kinds = {k: select(doc, panel="buffer_kind", buffer_kind=k) for k in KINDS}
    sens = {k: select(doc, panel="sensitivity", buffer_kind=k) for k in KINDS}
    payloads = [r["bytes_per_pe"] for r in topo[TORUS_2D.name]]
    nums.count("kbArPayloads", len(payloads), f"{src}: payloads per topology")
    nums.text("kbArPayloadMin", _size(payloads[0]), f"{src}: smallest bytes_per_pe")
    nums.text("kbArPayloadMax", _size(payloads[-1]), f"{src}: largest bytes_per_pe")
    nums.count_word("kbArSips", topo[TORUS_2D.name][0]["sips"], f"{src}: sips")
    for t, tag in TOPOLOGIES.items():
        rows = topo[t]
        nums.us(f"kbAr{tag}Min", rows[0]["allreduce_ns"], f"{src}: allreduce_ns {t}, smallest payload")
        nums.us(f"kbAr{tag}Max", rows[-1]["allreduce_ns"], f"{src}: allreduce_ns {t}, largest payload")
        nums.count(f"kbAr{tag}Messages", rows[-1]["messages"], f"{src}: messages on the critical path, {t}")
        nums.count(f"kbAr{tag}Accumulates", rows[-1]["accumulates"], f"{src}: accumulates on the critical path, {t}")
        errs = [r["model_error"] for r in rows]
        nums.pct(f"kbAr{tag}ErrLow", min(errs), f"{src}: smallest model_error, {t}")
        nums.pct(f"kbAr{tag}ErrHigh", max(errs), f"{src}: largest model_error, {t}")
        nums.us(f"kbAr{tag}Alpha", rows[-1]["model_alpha_ns"], f"{src}: model_alpha_ns {t}")
        nums.plain(f"kbAr{tag}Beta", rows[-1]["model_beta_ns_per_b"], f"{src}: model_beta_ns_per_b {t}, largest "
                   "payload", "ns/B")
    torus, ring, mesh = topo[TORUS_2D.name], topo[RING_1D.name], topo[MESH_2D_NO_WRAP.name]
    for other, tag in ((ring, "Ring"), (mesh, "Mesh")):
        nums.pct(f"kbArTorusVs{tag}Min", 1 - torus[0]["allreduce_ns"] / other[0]["allreduce_ns"],
                 f"{src}: 1 - torus/{tag.lower()} latency, smallest payload")
        nums.pct(f"kbArTorusVs{tag}Max", 1 - torus[-1]["allreduce_ns"] / other[-1]["allreduce_ns"],
                 f"{src}: 1 - torus/{tag.lower()} latency, largest payload")
    fastest = sum(all(t["allreduce_ns"] < o["allreduce_ns"] for o in (r, m))
                  for t, r, m in zip(torus, ring, mesh, strict=True))
    nums.count("kbArTorusFastestCount", fastest, f"{src}: payloads at which the torus is fastest")
    ring_faster = [r["bytes_per_pe"] for r, m in zip(ring, mesh, strict=True) if r["allreduce_ns"] < m["allreduce_ns"]]
    nums.count("kbArRingFasterCount", len(ring_faster), f"{src}: payloads at which {RING_1D.name} beats "
                                                      f"{MESH_2D_NO_WRAP.name}")
    big = torus[-1]
    nums.pct("kbArAccShareMax", big["model_accumulate_ns"] / big["model_ns"],
             f"{src}: model_accumulate_ns / model_ns, torus, largest payload")
    nums.pct("kbArMsgShareMax", big["model_message_ns"] / big["model_ns"],
             f"{src}: model_message_ns / model_ns, torus, largest payload")
    at = {k: next(r for r in rows if r["bytes_per_pe"] == sens["tcm"][0]["bytes_per_pe"]) for k, rows in kinds.items()}
    nums.text("kbArKindPayload", _size(at["tcm"]["bytes_per_pe"]), f"{src}: payload of the buffer-kind comparison")
    for k, tag in KINDS.items():
        nums.us(f"kbArKind{tag}", at[k]["allreduce_ns"], f"{src}: allreduce_ns torus {k} at the comparison payload")
        nums.us(f"kbArKind{tag}Min", kinds[k][0]["allreduce_ns"], f"{src}: allreduce_ns torus {k}, smallest payload")
    nums.pct("kbArSramOverTcm", at["sram"]["allreduce_ns"] / at["tcm"]["allreduce_ns"] - 1,
             f"{src}: sram / tcm - 1 at the comparison payload")
    nums.pct("kbArHbmOverTcm", at["hbm"]["allreduce_ns"] / at["tcm"]["allreduce_ns"] - 1,
             f"{src}: hbm / tcm - 1 at the comparison payload")
    nums.pct("kbArHbmOverSram", at["hbm"]["allreduce_ns"] / at["sram"]["allreduce_ns"] - 1,
             f"{src}: hbm / sram - 1 at the comparison payload", 2)
    order = " < ".join(k.upper() for k in sorted(KINDS, key=lambda k: at[k]["allreduce_ns"]))
    nums.text("kbArKindOrder", order, f"{src}: buffer kinds from fastest to slowest at the comparison payload")
    chans = [r["channel_gbs"] for r in sens["hbm"]]
    nums.plain("kbArChanLow", chans[0], f"{src}: lowest channel_gbs of the sensitivity panel", "GB/s")
    nums.plain("kbArChanHigh", chans[-1], f"{src}: highest channel_gbs of the sensitivity panel", "GB/s")
    for k, tag in KINDS.items():
        nums.us(f"kbArSens{tag}Low", sens[k][0]["allreduce_ns"], f"{src}: sensitivity {k}, lowest bandwidth")
        nums.us(f"kbArSens{tag}High", sens[k][-1]["allreduce_ns"], f"{src}: sensitivity {k}, highest bandwidth")
        nums.pct(f"kbArSens{tag}Gain", 1 - sens[k][-1]["allreduce_ns"] / sens[k][0]["allreduce_ns"],
                 f"{src}: 1 - {k} latency at the highest / lowest bandwidth")
    order_high = " < ".join(k.upper() for k in sorted(KINDS, key=lambda k: sens[k][-1]["allreduce_ns"]))
    nums.text("kbArKindOrderHigh", order_high, f"{src}: buffer kinds fastest to slowest at the highest bandwidth")
    cross = next((r["channel_gbs"] for r, s in zip(sens["hbm"], sens["sram"], strict=True)
                  if r["allreduce_ns"] < s["allreduce_ns"]), None)
    claims = {}
    if fastest == len(payloads):
        claims["kbClaimTorus"] = r"the torus is the fastest topology at every one of the \kbArPayloads{} payloads"
    else:
        claims["kbClaimTorus"] = (r"the torus is the fastest topology at \kbArTorusFastestCount{} of the "
                                  r"\kbArPayloads{} payloads")
    if not ring_faster:
        claims["kbClaimRingMesh"] = r"the mesh beats the ring at every payload"
    elif len(ring_faster) == len(payloads):
        claims["kbClaimRingMesh"] = r"the ring beats the mesh at every payload"
    else:
        nums.text("kbArRingFasterFrom", _size(ring_faster[0]), f"{src}: smallest payload where ring beats mesh")
        nums.text("kbArRingFasterTo", _size(ring_faster[-1]), f"{src}: largest payload where ring beats mesh")
        claims["kbClaimRingMesh"] = (r"the ring beats the mesh at \kbArRingFasterCount{} of the \kbArPayloads{} "
                                     r"payloads (between \kbArRingFasterFrom{} and \kbArRingFasterTo{}) and loses at "
                                     r"the others")
    if cross is None:
        claims["kbClaimHbmSram"] = (r"HBM rings stay slower than SRAM rings over the whole range of pseudo-channel "
                                    r"bandwidths")
    elif cross == chans[0]:
        claims["kbClaimHbmSram"] = r"HBM rings are already faster than SRAM rings at the lowest bandwidth"
    else:
        nums.plain("kbArHbmBeatsSramAt", cross, f"{src}: lowest channel_gbs where hbm beats sram", "GB/s")
        claims["kbClaimHbmSram"] = (r"HBM rings overtake SRAM rings from \kbArHbmBeatsSramAt{} per pseudo-channel "
                                    r"onwards")
    seeds = seed_claims()
    seed_vs = {"ring": seed_number("seedArTorusVsRing", seeds) / 100,
               "mesh": seed_number("seedArTorusVsMesh", seeds) / 100}
    gaps = {"ring": 1 - torus[-1]["allreduce_ns"] / ring[-1]["allreduce_ns"],
            "mesh": 1 - torus[-1]["allreduce_ns"] / mesh[-1]["allreduce_ns"]}
    smaller = all(gaps[k] < seed_vs[k] for k in gaps)
    larger = all(gaps[k] > seed_vs[k] for k in gaps)
    longer = torus[-1]["allreduce_ns"] > 1e3 * seed_number("seedArTorusMax", seeds)
    gap_word = "smaller" if smaller else "larger" if larger else "mixed"
    claims["kbClaimArVsSeed"] = (f"our gaps are {gap_word}" if gap_word != "mixed" else "our gaps differ") + \
        (" and our latencies longer" if longer else " and our latencies shorter")
    seed_order = seed_kind_order(seeds)
    ours = sorted(KINDS, key=lambda k: at[k]["allreduce_ns"])
    if ours == seed_order:
        claims["kbClaimKindsVsSeed"] = "the same order as ours"
    elif ours[0] == seed_order[0]:
        claims["kbClaimKindsVsSeed"] = (f"the same winner, but {seed_order[1].upper()} ahead of "
                                        f"{seed_order[2].upper()}, the reverse of our order at this bandwidth")
    else:
        claims["kbClaimKindsVsSeed"] = f"a different winner ({seed_order[0].upper()})"
    claims.update(allreduce_links_tex.generate(doc, nums))
    claims.update(_fit_numbers(doc, nums))
    claims.update(_ablation_numbers(doc, nums, seeds))
    diff = differences(doc, claims, seeds)
    files = {f"tab-{t.label.removeprefix('tab:')}.tex": t.latex() for t in _panel_tables(doc, nums)}
    files[f"tab-{diff.label.removeprefix('tab:')}.tex"] = diff.latex()
    return claims, files


def seed_kind_order(seeds: dict[str, str]) -> list[str]:
    """The earlier report's receive-ring memories at 64 KiB per PE, fastest first."""
    latency = {k: seed_number(f"seedAr{tag}", seeds) for k, tag in KINDS.items()}
    return sorted(latency, key=latency.get)


def _ratio(nums: Numbers, name: str, value: float, source: str) -> None:
    nums.add(name, fixed(value, 2), r"$\times$", source)


def _fit_numbers(doc: dict, nums: Numbers) -> dict[str, str]:
    """α and β of every topology fitted by least squares to its measured latencies, and the residuals."""
    fits = {}
    for t, tag in TOPOLOGIES.items():
        rows = select(doc, panel="topology", sip_topology=t)
        fit = fit_alpha_beta([r["bytes_per_pe"] for r in rows], [r["allreduce_ns"] for r in rows])
        fits[t] = fit
        src = f"{SRC}: least-squares fit of allreduce_ns against bytes_per_pe, {t}, topology panel"
        nums.us(f"kbAr{tag}FitAlpha", fit.alpha_ns, src)
        nums.plain(f"kbAr{tag}FitBeta", fit.beta_ns_per_byte, src, "ns/B")
        nums.pct(f"kbAr{tag}FitMax", fit.max_rel, f"{src}: largest |fit - measured| / measured")
        nums.pct(f"kbAr{tag}FitRms", fit.rms_rel, f"{src}: root mean square of (fit - measured) / measured")
    worst = max(fits, key=lambda t: fits[t].max_rel)
    nums.pct("kbArFitMaxAll", fits[worst].max_rel, f"{SRC}: largest relative residual of the fits ({worst})")
    return {}


def _faster(a: list[dict], b: list[dict]) -> list[int]:
    """Payloads at which series ``a`` is faster than series ``b`` (rows in payload order)."""
    return [x["bytes_per_pe"] for x, y in zip(a, b, strict=True) if x["allreduce_ns"] < y["allreduce_ns"]]


#: How close (as a ratio) one of our torus advantages must come to the earlier report's to be called "close".
CLOSE = 0.05


def _ablation_numbers(doc: dict, nums: Numbers, seeds: dict[str, str]) -> dict[str, str]:
    """The numbers of the differences table and of the paragraph on the two ablations."""
    claims = {}
    panels = {"": "topology", "Ex": "exchange_only", "Ow": "schedule"}
    series = {p: {t: select(doc, panel=panel, sip_topology=t) for t in TOPOLOGIES} for p, panel in panels.items()}
    for p, panel in panels.items():
        ring, torus, mesh = (series[p][t.name] for t in (RING_1D, TORUS_2D, MESH_2D_NO_WRAP))
        where = f"{SRC}: allreduce_ns, {panel} panel"
        _ratio(nums, f"kbAr{p}TorusOverRingSmall", ring[0]["allreduce_ns"] / torus[0]["allreduce_ns"],
               f"{where}: {RING_1D.name} / {TORUS_2D.name} at the smallest payload")
        _ratio(nums, f"kbAr{p}TorusOverMeshSmall", mesh[0]["allreduce_ns"] / torus[0]["allreduce_ns"],
               f"{where}: {MESH_2D_NO_WRAP.name} / {TORUS_2D.name} at the smallest payload")
        for t, tag in TOPOLOGIES.items():
            rows = series[p][t]
            if p != "Ex":  # one cube per SIP changes nothing between SIPs: the same steps as the topology panel
                nums.count(f"kbAr{p}{tag}ExSteps", rows[0]["exchange_messages"],
                           f"{SRC}: exchange_messages {t}, {panel} panel")
                nums.count(f"kbAr{p}{tag}ExAccs", rows[0]["exchange_accumulates"],
                           f"{SRC}: exchange_accumulates {t}, {panel} panel")
        if p:
            faster = _faster(ring, mesh)
            payloads = [r["bytes_per_pe"] for r in ring]
            gaps = [y["allreduce_ns"] / x["allreduce_ns"] - 1 for x, y in zip(ring, mesh, strict=True)]
            if faster:
                nums.pct(f"kbAr{p}RingLeadMax", max(gaps), f"{where}: largest mesh / ring - 1")
            if len(faster) < len(ring):
                nums.pct(f"kbAr{p}MeshLeadMax", max(-g for g in gaps), f"{where}: largest 1 - mesh / ring")
            if not faster:
                claims[f"kbClaimAr{p}RingMesh"] = rf"the mesh wins at every payload (by up to \kbAr{p}MeshLeadMax)"
            elif len(faster) == len(ring):
                claims[f"kbClaimAr{p}RingMesh"] = rf"the ring wins at every payload (by up to \kbAr{p}RingLeadMax)"
            else:
                nums.count(f"kbAr{p}RingFasterCount", len(faster),
                           f"{where}: payloads at which {RING_1D.name} beats {MESH_2D_NO_WRAP.name}")
                nums.text(f"kbAr{p}RingFasterFrom", _size(faster[0]), f"{where}: smallest payload {RING_1D.name} beats "
                          f"{MESH_2D_NO_WRAP.name}")
                nums.text(f"kbAr{p}RingFasterTo", _size(faster[-1]), f"{where}: largest payload {RING_1D.name} beats "
                          f"{MESH_2D_NO_WRAP.name}")
                i = payloads.index(faster[0])
                where_ring = (rf"from \kbAr{p}RingFasterFrom{{}} to \kbAr{p}RingFasterTo{{}}"
                              if faster == payloads[i:i + len(faster)]
                              else rf"at some payloads between \kbAr{p}RingFasterFrom{{}} and "
                                   rf"\kbAr{p}RingFasterTo{{}}")
                claims[f"kbClaimAr{p}RingMesh"] = (rf"the ring wins at \kbAr{p}RingFasterCount{{}} payloads, "
                                                   rf"{where_ring} (by up to \kbAr{p}RingLeadMax), the mesh at the "
                                                   rf"others (by up to \kbAr{p}MeshLeadMax)")
    r, m = series[""][RING_1D.name][0], series[""][MESH_2D_NO_WRAP.name][0]
    if r["exchange_messages"] != m["exchange_messages"]:
        more = "more" if m["exchange_messages"] > r["exchange_messages"] else "fewer"
        claims["kbClaimArRingMeshWhy"] = (f"The mesh's exchange takes {more} serial steps than the ring's, which the "
                                          "model charges at every payload, and contention, which it leaves out, "
                                          "adds to that")
    elif r["exchange_accumulates"] != m["exchange_accumulates"]:
        who = "ring" if r["exchange_accumulates"] > m["exchange_accumulates"] else "mesh"
        claims["kbClaimArRingMeshWhy"] = (f"With the steps even, what separates ring and mesh is the {who}'s extra "
                                          f"accumulates, which the model charges to the {who} at every payload, and "
                                          "contention, which it leaves out")
    else:
        claims["kbClaimArRingMeshWhy"] = ("With steps and accumulates even, only contention, which the model leaves "
                                          "out, separates ring and mesh")
    torus = series[""][TORUS_2D.name]
    small = torus[0]
    nums.pct("kbArSipShareSmall", (small["reduce_ns"] + small["broadcast_ns"]) / small["allreduce_ns"],
             f"{SRC}: (reduce_ns + broadcast_ns) / allreduce_ns, {TORUS_2D.name}, smallest payload")
    nums.ns("kbArReduceSmall", small["reduce_ns"], f"{SRC}: reduce_ns {TORUS_2D.name}, smallest payload", 0)
    nums.ns("kbArBroadcastSmall", small["broadcast_ns"], f"{SRC}: broadcast_ns {TORUS_2D.name}, smallest payload", 0)
    # how far the SIP-internal phases of the three topologies lie apart, over every payload (the mechanism says:
    # not at all, the topology only changes the exchange)
    spread = max(max(abs(r["reduce_ns"] + r["broadcast_ns"] - (x["reduce_ns"] + x["broadcast_ns"]))
                     / x["allreduce_ns"] for r in rows)
                 for x, *rows in zip(*(series[""][t] for t in TOPOLOGIES), strict=True))
    if spread < 1e-9:
        claims["kbClaimArSipSame"] = "exactly the same time on every topology"
    else:
        nums.pct("kbArSipSpread", spread, f"{SRC}: largest difference of reduce_ns + broadcast_ns between a pair of "
                                          "topologies at one payload / allreduce_ns", 2)
        claims["kbClaimArSipSame"] = r"the same time on every topology (within \kbArSipSpread)"
    big, low = torus[-1], torus[0]
    span = big["bytes_per_pe"] - low["bytes_per_pe"]
    nums.plain("kbArAccNsPerB", (big["model_accumulate_ns"] - low["model_accumulate_ns"]) / big["accumulates"] / span,
               f"{SRC}: model_accumulate_ns per accumulate and byte, {TORUS_2D.name}, smallest to largest "
               "payload", "ns/B")
    nums.plain("kbArMsgNsPerB", (big["model_message_ns"] - low["model_message_ns"]) / big["messages"] / span,
               f"{SRC}: model_message_ns per message and byte, {TORUS_2D.name}, smallest to largest payload", "ns/B")
    ex = {t: rows[0]["exchange_ns"] for t, rows in series[""].items()}
    _ratio(nums, "kbArExchTorusOverRingSmall", ex[RING_1D.name] / ex[TORUS_2D.name],
           f"{SRC}: exchange_ns {RING_1D.name} / {TORUS_2D.name}, topology panel, smallest payload")
    _ratio(nums, "kbArExchTorusOverMeshSmall", ex[MESH_2D_NO_WRAP.name] / ex[TORUS_2D.name],
           f"{SRC}: exchange_ns {MESH_2D_NO_WRAP.name} / {TORUS_2D.name}, topology panel, smallest payload")
    ex_ring = series["Ex"][RING_1D.name][0]["allreduce_ns"] / series["Ex"][TORUS_2D.name][0]["allreduce_ns"]
    ex_mesh = series["Ex"][MESH_2D_NO_WRAP.name][0]["allreduce_ns"] / series["Ex"][TORUS_2D.name][0]["allreduce_ns"]
    close = {k: abs(v / seed_number(f"seedArTorusOver{k}Small", seeds) - 1) <= CLOSE
             for k, v in (("Ring", ex_ring), ("Mesh", ex_mesh))}
    said = {True: "close to", False: "against"}
    claims["kbClaimArDilution"] = (
        rf"with one cube per SIP the torus's gain over the ring is \kbArExTorusOverRingSmall, {said[close['Ring']]} "
        rf"the earlier report's \seedArTorusOverRingSmall, and over the mesh \kbArExTorusOverMeshSmall, "
        rf"{said[close['Mesh']]} its \seedArTorusOverMeshSmall")
    ow = series["Ow"]
    errs = [r["model_error"] for rows in ow.values() for r in rows]
    nums.pct("kbArOwErrLow", min(errs), f"{SRC}: smallest model_error, schedule panel")
    nums.pct("kbArOwErrHigh", max(errs), f"{SRC}: largest model_error, schedule panel")
    return claims


@dataclass(frozen=True)
class Differences:
    """The "Differences from the reference" table: one row per result of the earlier report that ours departs
    from, each cell LaTeX whose numbers are macros (``\\seed…`` from the earlier report's claims, ``\\kb…`` and
    claims generated from the results)."""

    label: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def latex(self) -> str:
        """A full-width table whose text columns wrap (ADR 0040)."""
        lines = ["% Generated by kernbench report from study results and tex/reference/seed-claims.tex; do not edit.",
                 r"\begin{table}[tbp]", r"\centering\footnotesize\setlength{\tabcolsep}{4pt}",
                 rf"\caption{{{tex_escape(self.caption)}}}", rf"\label{{{self.label}}}",
                 r"\begin{tabularx}{\linewidth}{@{}>{\raggedright\arraybackslash}p{0.15\linewidth}"
                 r">{\raggedright\arraybackslash}p{0.09\linewidth}>{\raggedright\arraybackslash}p{0.09\linewidth}"
                 r"LL@{}}",
                 r"\toprule", " & ".join(tex_escape(h) for h in self.header) + r" \\", r"\midrule"]
        lines += [" & ".join(row) + r" \\" + (r"\addlinespace" if i < len(self.rows) - 1 else "")
                  for i, row in enumerate(self.rows)]
        lines += [r"\bottomrule", r"\end{tabularx}", r"\end{table}", ""]
        return "\n".join(lines)

    def plain(self, values: dict[str, str]) -> TableData:
        """The same table as plain text (for the documentation site): every macro replaced by its value from
        ``values`` (macro name -> LaTeX), then the LaTeX turned into text."""
        return TableData(self.label, self.caption, list(self.header),
                         [[latex_to_text(c, values) for c in row] for row in self.rows], "lllll")


_MACRO = re.compile(r"\\((?:kb|seed)[A-Za-z]+)(?:\{\})?")
_TEXT = ((r"$\times$", "×"), (r"\textmu{}", "µ"), (r"\,", " "), (r"\%", "%"), ("~", " "), ("--", "–"),
         (r"\texttt{", ""), ("}", ""), ("{", ""))


def latex_to_text(latex: str, values: dict[str, str]) -> str:
    """``latex`` with every ``\\kb…``/``\\seed…`` macro expanded from ``values`` (recursively) and its LaTeX
    spellings of ×, µ, spaces and percent signs turned into text."""
    for _ in range(8):
        expanded = _MACRO.sub(lambda m: values[m.group(1)], latex)
        if expanded == latex:
            break
        latex = expanded
    for a, b in _TEXT:
        latex = latex.replace(a, b)
    return latex


def differences(doc: dict, claims: dict[str, str], seeds: dict[str, str]) -> Differences:
    """The "Differences from the reference" table of the all-reduce section, from the results (through the
    macros :func:`generate` defines) and the earlier report's claims. Which words a row uses follows the
    results too: the mechanism of the ring-versus-mesh row names the serial exchange steps the model counted."""
    topo = {t: select(doc, panel="topology", sip_topology=t) for t in TOPOLOGIES}
    ring, mesh = topo[RING_1D.name][0], topo[MESH_2D_NO_WRAP.name][0]
    steps = ("the same number of serial steps" if ring["exchange_messages"] == mesh["exchange_messages"]
             else "fewer serial steps" if mesh["exchange_messages"] < ring["exchange_messages"]
             else "more serial steps")
    seed_order = " < ".join(k.upper() for k in seed_kind_order(seeds))
    rows = (
        (r"Payloads at which the ring beats the mesh",
         r"\seedArRingFasterCount{} of \seedArPayloads", r"\kbArRingFasterCount{} of \kbArPayloads",
         rf"Our exchange between SIPs takes {steps} on the mesh as on the ring (\kbArMeshExSteps{{}} against "
         r"\kbArRingExSteps, the diameter of each), and \kbArMeshExAccs{} accumulates on the mesh's busiest root "
         r"against \kbArRingExAccs{} on the ring's. The earlier report's ring and mesh gaps over its torus keep a "
         r"ratio of \seedArGapRatioSmall--\seedArGapRatioLarge{} at every payload, as more serial steps on its "
         r"mesh than on its ring would.",
         r"One cube per SIP (the exchange alone): \kbClaimArExRingMesh. One-way exchange (\kbArOwRingExSteps{} "
         r"steps on the ring, \kbArOwMeshExSteps{} on the mesh, whose extra steps carry no accumulate): "
         r"\kbClaimArOwRingMesh."),
        (r"Torus advantage over the ring at \kbArPayloadMin",
         r"\seedArTorusOverRingSmall", r"\kbArTorusOverRingSmall",
         r"The reduction inside the SIPs and the broadcast back take \kbClaimArSipSame, \kbArSipShareSmall{} of "
         r"the torus's latency at \kbArPayloadMin; they dilute the exchange's advantage, which alone is "
         r"\kbArExchTorusOverRingSmall.",
         r"One cube per SIP: \kbArExTorusOverRingSmall. One-way exchange: \kbArOwTorusOverRingSmall."),
        (r"Torus advantage over the mesh at \kbArPayloadMin",
         r"\seedArTorusOverMeshSmall", r"\kbArTorusOverMeshSmall",
         r"The same dilution (the exchange alone: \kbArExchTorusOverMeshSmall), and our mesh needs no more "
         r"exchange steps than our ring (first row).",
         r"One cube per SIP: \kbArExTorusOverMeshSmall. One-way exchange: \kbArOwTorusOverMeshSmall."),
        (r"Receive-ring memories at \kbArKindPayload, fastest first",
         tex_escape(seed_order), r"\kbArKindOrder",
         r"An HBM ring slot is written and read through the receiving PE's pseudo-channels, together as wide as the "
         r"SRAM link, and the HBM controller's fixed cost is the larger; so the pseudo-channel bandwidth decides "
         r"the order of HBM and SRAM.",
         r"Sensitivity panel: \kbClaimHbmSram."),
    )
    return Differences("tab:allreduce-differences", "Differences from the reference (the earlier report): its "
                       "value, ours, the mechanism behind the difference, and the ablation run of this study that "
                       "shows it.", ("Result", "Reference", "Ours", "Mechanism", "Shown by"), rows)


def tables(doc: dict) -> list[TableData]:
    """The all-reduce section's tables: by topology, the least-squares fits, by buffer kind, the sensitivity
    panel, the links panel, and the differences from the reference (as plain text)."""
    nums = Numbers()
    claims, _ = generate(doc, nums)
    values = {**seed_claims(), **{n.name: n.tex for n in nums.items.values()}, **claims}
    return [*_panel_tables(doc, nums), differences(doc, claims, seed_claims()).plain(values)]


def _panel_tables(doc: dict, nums: Numbers) -> list[TableData]:
    """The tables of the study's panels (every table of the section but the differences)."""
    topo = {t: select(doc, panel="topology", sip_topology=t) for t in TOPOLOGIES}
    kinds = {k: select(doc, panel="buffer_kind", buffer_kind=k) for k in KINDS}
    sens = {k: select(doc, panel="sensitivity", buffer_kind=k) for k in KINDS}
    payloads = [r["bytes_per_pe"] for r in topo[TORUS_2D.name]]
    by_topology = _payload_table(
        topo, payloads, "tab:allreduce-topologies", r"All-reduce latency over \kbArSips{} SIPs by payload per PE and "
        "logical SIP topology (TCM receive rings), measured and α–β model.", str, str,
        {"kbArSips": nums.plain_text("kbArSips")})
    by_kind = _payload_table(
        kinds, payloads, "tab:allreduce-kinds", "All-reduce latency on the 2×3 torus by payload and by the memory "
        "holding the IPCQ receive rings, measured and α–β model.", str.upper, lambda k: k.upper() + " rings")
    return [by_topology, _fit_table(doc), by_kind, _sensitivity_table(sens, nums), allreduce_links_tex.table(doc, nums)]


def _fit_table(doc: dict) -> TableData:
    """α and β fitted to each topology's measurements beside the model's two-point values, with the residuals."""
    rows = []
    for t in TOPOLOGIES:
        pts = select(doc, panel="topology", sip_topology=t)
        fit = fit_alpha_beta([r["bytes_per_pe"] for r in pts], [r["allreduce_ns"] for r in pts])
        rows.append([t, sig(fit.alpha_ns / 1e3, 3), sig(fit.beta_ns_per_byte, 3), fixed(100 * fit.max_rel, 1),
                     fixed(100 * fit.rms_rel, 1), sig(pts[-1]["model_alpha_ns"] / 1e3, 3),
                     sig(pts[-1]["model_beta_ns_per_b"], 3)])
    return TableData("tab:allreduce-fit", "α and β fitted by least squares to the measured latencies of each "
                     "topology (all payloads, TCM rings), the largest and the root-mean-square relative residual of "
                     "the fit, and the α–β model's own values (α the latency of an empty payload, β the slope from "
                     "it to the largest payload).",
                     ["topology", "fitted α µs", "fitted β ns/B", "max |residual| %", "RMS residual %",
                      "model α µs", "model β ns/B"], rows, "lrrrrrr")


def _payload_table(series: dict, payloads: list[int], label: str, caption: str, short, group,
                   values: dict[str, str] | None = None) -> TableData:
    """Measured and model latency (µs) by payload per PE, two columns per series: ``short(name)`` names them in
    the flat header, ``group(name)`` above the pair in the typeset table."""
    rows = []
    for i, b in enumerate(payloads):
        row = [_size(b)]
        for name in series:
            r = series[name][i]
            row += [sig(r["allreduce_ns"] / 1e3, 4), sig(r["model_ns"] / 1e3, 4)]
        rows.append(row)
    units = ("µs", "model µs")
    header = ["payload / PE"] + [f"{short(name)} {w}" for name in series for w in units]
    return TableData(label, caption, header, rows, "l" + "rr" * len(series),
                     (("", 1), *((group(name), 2) for name in series)), ("payload / PE", *units * len(series)),
                     values or {})


def _sensitivity_table(sens: dict, nums: Numbers) -> TableData:
    rows = []
    for i, r0 in enumerate(sens["tcm"]):
        row = [fixed(r0["channel_gbs"], 0)]
        for k in KINDS:
            row.append(sig(sens[k][i]["allreduce_ns"] / 1e3, 4))
        rows.append(row)
    return TableData("tab:allreduce-sensitivity",
                     r"Sensitivity panel: all-reduce latency (µs) on the torus at \kbArKindPayload{} per PE as the "
                     "HBM pseudo-channel bandwidth (GB/s) is raised.",
                     ["GB/s per channel", "TCM µs", "SRAM µs", "HBM µs"], rows, "rrrr",
                     values={"kbArKindPayload": nums.plain_text("kbArKindPayload")})
