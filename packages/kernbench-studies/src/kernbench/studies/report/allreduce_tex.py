"""The all-reduce section's generated numbers, claims and tables, from the allreduce study's ``results.json``."""

from __future__ import annotations

from kernbench.studies.report import allreduce_links_tex
from kernbench.studies.report.numbers import Numbers, fixed, sig
from kernbench.studies.report.tables import TableData
from kernbench.studies.results import select
from kernbench.topology.sip_topologies import MESH_2D_NO_WRAP, RING_1D, SHIPPED, TORUS_2D

#: SIP topology -> the tag in macro names (its strategy's label, capitalised: Ring, Torus, Mesh)
TOPOLOGIES = {t.name: t.label.capitalize() for t in SHIPPED}
KINDS = {"tcm": "Tcm", "sram": "Sram", "hbm": "Hbm"}
#: The earlier report's all-reduce figures (../shared/seeds/extracted/docs/report/1H-codesign-paper/sections/
#: 04-allreduce.tex), typeset by tex/reference/seed-claims.tex: torus latency at its largest payload (ns), how
#: much faster the torus was than mesh and ring there, and TCM/HBM/SRAM ring latencies at 64 KiB per PE (ns).
SEED_TORUS_MAX_NS = 28840.0
SEED_TORUS_VS = {"mesh": 0.25, "ring": 0.19}
SEED_KINDS_NS = {"tcm": 19865.0, "hbm": 23081.0, "sram": 32201.0}


def _size(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB" if nbytes >= 1024 and nbytes % 1024 == 0 else f"{nbytes} B"


def generate(doc: dict, nums: Numbers) -> tuple[dict[str, str], dict[str, str]]:
    """Add the all-reduce numbers to ``nums``; return (claims name -> LaTeX, generated file name -> text)."""
    src = "out/studies/allreduce/results.json"
    topo = {t: select(doc, panel="topology", sip_topology=t) for t in TOPOLOGIES}
    kinds = {k: select(doc, panel="buffer_kind", buffer_kind=k) for k in KINDS}
    sens = {k: select(doc, panel="sensitivity", buffer_kind=k) for k in KINDS}
    payloads = [r["bytes_per_pe"] for r in topo[TORUS_2D.name]]
    nums.count("kbArPayloads", len(payloads), f"{src}: payloads per topology")
    nums.text("kbArPayloadMin", _size(payloads[0]), f"{src}: smallest bytes_per_pe")
    nums.text("kbArPayloadMax", _size(payloads[-1]), f"{src}: largest bytes_per_pe")
    nums.count("kbArSips", topo[TORUS_2D.name][0]["sips"], f"{src}: sips")
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
        claims["kbClaimTorus"] = r"the torus is the fastest of the three at every one of the \kbArPayloads{} payloads"
    else:
        claims["kbClaimTorus"] = (r"the torus is the fastest of the three at \kbArTorusFastestCount{} of the "
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
    gaps = {"ring": 1 - torus[-1]["allreduce_ns"] / ring[-1]["allreduce_ns"],
            "mesh": 1 - torus[-1]["allreduce_ns"] / mesh[-1]["allreduce_ns"]}
    smaller = all(gaps[k] < SEED_TORUS_VS[k] for k in gaps)
    larger = all(gaps[k] > SEED_TORUS_VS[k] for k in gaps)
    longer = torus[-1]["allreduce_ns"] > SEED_TORUS_MAX_NS
    gap_word = "smaller" if smaller else "larger" if larger else "mixed"
    claims["kbClaimArVsSeed"] = (f"our gaps are {gap_word}" if gap_word != "mixed" else "our gaps differ") + \
        (" and our latencies longer" if longer else " and our latencies shorter")
    seed_order = sorted(SEED_KINDS_NS, key=SEED_KINDS_NS.get)
    ours = sorted(KINDS, key=lambda k: at[k]["allreduce_ns"])
    if ours == seed_order:
        claims["kbClaimKindsVsSeed"] = "the same order as ours"
    elif ours[0] == seed_order[0]:
        claims["kbClaimKindsVsSeed"] = (f"the same winner, but {seed_order[1].upper()} ahead of "
                                        f"{seed_order[2].upper()}, the reverse of our order at this bandwidth")
    else:
        claims["kbClaimKindsVsSeed"] = f"a different winner ({seed_order[0].upper()})"
    claims.update(allreduce_links_tex.generate(doc, nums))
    files = {f"tab-{t.label.removeprefix('tab:')}.tex": t.latex() for t in tables(doc)}
    return claims, files


def tables(doc: dict) -> list[TableData]:
    """The all-reduce section's tables: by topology, by buffer kind, the sensitivity panel and the links panel."""
    topo = {t: select(doc, panel="topology", sip_topology=t) for t in TOPOLOGIES}
    kinds = {k: select(doc, panel="buffer_kind", buffer_kind=k) for k in KINDS}
    sens = {k: select(doc, panel="sensitivity", buffer_kind=k) for k in KINDS}
    payloads = [r["bytes_per_pe"] for r in topo[TORUS_2D.name]]
    by_topology = _payload_table(
        topo, payloads, "tab:allreduce-topologies", "All-reduce latency over six SIPs by payload per PE and logical "
        "SIP topology (TCM receive rings), measured and α–β model.", str, str)
    by_kind = _payload_table(
        kinds, payloads, "tab:allreduce-kinds", "All-reduce latency on the 2×3 torus by payload and by the memory "
        "holding the IPCQ receive rings, measured and α–β model.", str.upper, lambda k: k.upper() + " rings")
    return [by_topology, by_kind, _sensitivity_table(sens),
            allreduce_links_tex.table(doc)]


def _payload_table(series: dict, payloads: list[int], label: str, caption: str, short, group) -> TableData:
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
                     (("", 1), *((group(name), 2) for name in series)), ("payload / PE", *units * len(series)))


def _sensitivity_table(sens: dict) -> TableData:
    rows = []
    for i, r0 in enumerate(sens["tcm"]):
        row = [fixed(r0["channel_gbs"], 0)]
        for k in KINDS:
            row.append(sig(sens[k][i]["allreduce_ns"] / 1e3, 4))
        rows.append(row)
    return TableData("tab:allreduce-sensitivity",
                 f"Sensitivity panel: all-reduce latency (µs) on the torus at {_size(sens['tcm'][0]['bytes_per_pe'])} "
                 "per PE as the HBM pseudo-channel bandwidth (GB/s) is raised.",
                 ["GB/s per channel", "TCM µs", "SRAM µs", "HBM µs"], rows, "rrrr")
