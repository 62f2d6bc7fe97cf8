"""The GEMM section's generated numbers, claims and tables, from the gemm study's ``results.json``."""

from __future__ import annotations

import statistics

from kernbench.studies.figures.gemm import BAND_NARROW, BAND_WIDE
from kernbench.studies.report.numbers import Numbers, fixed
from kernbench.studies.report.reference import seed_claims, seed_number, seed_numbers
from kernbench.studies.report.tables import TableData
from kernbench.studies.results import one, select

#: The shapes whose fill caps the earlier report quoted (``\\seedCap<role>`` in tex/reference/seed-claims.tex).
SEED_CAP_ROLES = ("Cube", "SmallM", "SmallK")


def seed_tile(seeds: dict[str, str] | None = None) -> tuple[int, int, int]:
    """The earlier report's GEMM tile (M, K, N), read from ``\\seedTile``."""
    m, k, n = (int(x) for x in seed_numbers("seedTile", seeds))
    return m, k, n


def seed_caps(seeds: dict[str, str] | None = None) -> dict[str, float]:
    """The fill caps the earlier report quoted for :data:`SEED_CAP_ROLES`, as ratios (``\\seedCap<role>``)."""
    return {role: seed_number(f"seedCap{role}", seeds) / 100 for role in SEED_CAP_ROLES}
VARIANTS = {"ref_ref": "RefRef", "load_ref": "LoadRef", "load_load": "LoadLoad"}
#: Macro role of each shape of the shapes series.
ROLES = {(32, 32, 32): "Cube", (32, 64, 32): "Pair", (32, 128, 32): "Quad", (32, 128, 128): "Wide",
         (32, 3072, 32): "DeepK", (8, 128, 128): "SmallM", (128, 8, 128): "SmallK", (512, 512, 512): "Big"}


def _shape(r: dict) -> str:
    return f"{r['m']}×{r['k']}×{r['n']}"


#: Why the model misses a point, by the simplification that does not hold there (see :func:`cause`), as the error
#: table names it (the section's text explains each).
CAUSES = {
    "reads": "model reads slower (packet pacing)",
    "sharing": "measured DMA slower (read-write sharing)",
    "pipeline": "stage overlap (fill, drain, look-ahead)",
}


def _pct(ratio: float) -> str:
    """A ratio as a percentage cell with one decimal, a true minus sign, and no negative zero."""
    text = fixed(100 * ratio, 1)
    return "0.0" if text == "-0.0" else text.replace("-", "−")


def _read_gap(r: dict) -> float:
    """Measured minus modelled DMA time per tile (reads and writes), ns."""
    return (r["busy_dma_read_ns"] + r["busy_dma_write_ns"]) / r["tiles"] - r["model_read_ns"] - r["model_write_ns"]


def cause(r: dict) -> str | None:
    """The key of :data:`CAUSES` that explains a point outside the narrow band, read off its stage times (None
    inside the band): the model predicts too long with slower reads than measured (``reads``), too short with
    faster DMA stages than measured (``sharing``), or neither (``pipeline``)."""
    if abs(r["model_error"]) <= BAND_NARROW:
        return None
    if r["model_error"] > 0 and r["busy_dma_read_ns"] < r["tiles"] * r["model_read_ns"]:
        return "reads"
    if r["model_error"] < 0 and _read_gap(r) > 0:
        return "sharing"
    return "pipeline"


def generate(doc: dict, nums: Numbers) -> tuple[dict[str, str], dict[str, str]]:
    """Add the GEMM numbers to ``nums``; return (claims name -> LaTeX, generated file name -> text)."""
    src = "out/studies/gemm/results.json"
    shapes = select(doc, series="shapes")
    tiles = select(doc, series="tiles")
    first = shapes[0]
    nums.count("kbTileM", first["tile_m"], f"{src}: tile_m", "")
    nums.count("kbTileK", first["tile_k"], f"{src}: tile_k", "")
    nums.count("kbTileN", first["tile_n"], f"{src}: tile_n", "")
    nums.count("kbGemmShapePoints", len(shapes), f"{src}: points of the shapes series")
    nums.count("kbGemmTilePoints", len(tiles), f"{src}: points of the tiles series")
    nums.count("kbTilesMax", max(r["tiles"] for r in tiles), f"{src}: largest tile count of the tiles series")
    nums.ns("kbGemmTileNs", first["model_gemm_ns"], f"{src}: model_gemm_ns (one tile on the GEMM engine)", 3)
    for (m, k, n), role in ROLES.items():
        rows = {v: one(doc, series="shapes", variant=v, m=m, k=k, n=n) for v in VARIANTS}
        nums.text(f"kbShape{role}", f"{m}×{k}×{n}", f"{src}: shape of the {role} point")
        nums.pct(f"kbFill{role}", rows["ref_ref"]["fill_ratio"], f"{src}: fill_ratio of {m}x{k}x{n}")
        nums.count(f"kbTiles{role}", rows["ref_ref"]["tiles"], f"{src}: tiles of {m}x{k}x{n}")
        for v, tag in VARIANTS.items():
            nums.pct(f"kbGemmEff{role}{tag}", rows[v]["mac_efficiency"], f"{src}: mac_efficiency {m}x{k}x{n} {v}")
            nums.pct(f"kbGemmModel{role}{tag}", rows[v]["model_efficiency"],
                     f"{src}: model_efficiency {m}x{k}x{n} {v}")
    big = {v: one(doc, series="shapes", variant=v, m=512, k=512, n=512) for v in VARIANTS}
    for v, tag in VARIANTS.items():
        nums.ns(f"kbBigRead{tag}", big[v]["busy_dma_read_ns"] / big[v]["tiles"],
                f"{src}: busy_dma_read_ns / tiles, 512x512x512 {v}")
        nums.text(f"kbBigBottleneck{tag}", big[v]["model_bottleneck"].replace("_", " "),
                  f"{src}: model_bottleneck 512x512x512 {v}")
        nums.pct(f"kbGemmCeilingBig{tag}", big[v]["compute_bound_efficiency"],
                 f"{src}: compute_bound_efficiency 512x512x512 {v}")
    nums.plain("kbBigReadRatioRefRef", big["ref_ref"]["busy_dma_read_ns"] / big["ref_ref"]["busy_gemm_ns"],
               f"{src}: busy_dma_read_ns / busy_gemm_ns, 512x512x512 ref_ref", r"$\times$")
    for v, tag in VARIANTS.items():
        rows = select(doc, series="tiles", variant=v)
        nums.pct(f"kbTileEffOne{tag}", rows[0]["mac_efficiency"], f"{src}: tiles series {v}, 1 tile")
        nums.pct(f"kbTileEffMax{tag}", rows[-1]["mac_efficiency"], f"{src}: tiles series {v}, largest count")
    nums.pct("kbTileCeilingMax", tiles[-1]["compute_bound_efficiency"],
             f"{src}: compute_bound_efficiency at the largest tile count")
    claims = {"kbClaimGemmModel": _model_error(doc, nums, src)}
    rows = select(doc)
    claims["kbClaimGemmErrHigh"] = _point_claim(max(rows, key=lambda r: r["model_error"]), "High")
    claims["kbClaimGemmErrLow"] = _point_claim(min(rows, key=lambda r: r["model_error"]), "Low")
    causes = [cause(r) for r in rows]
    claims["kbClaimGemmCauseReads"] = _count_claim(causes.count("reads"), "kbGemmCauseReads",
                                                   "above the narrow band because the model's reads are slower "
                                                   "than measured.")
    claims["kbClaimGemmCauseSharing"] = _count_claim(causes.count("sharing"), "kbGemmCauseSharing",
                                                     "below the narrow band because the measured DMA stages are "
                                                     "slower than the model's.")
    tile = (first["tile_m"], first["tile_k"], first["tile_n"])
    seeds = seed_claims()
    seed_cap = seed_caps(seeds)
    caps = {role: one(doc, series="shapes", variant="ref_ref", m=m, k=k, n=n)["fill_ratio"]
            for (m, k, n), role in ROLES.items() if role in seed_cap}
    agree = [r for r in seed_cap if abs(caps[r] - seed_cap[r]) < 1e-9]
    differ = [r for r in seed_cap if r not in agree]
    quoted = (r"the earlier report quoted \seedCapCube, \seedCapSmallM{} and \seedCapSmallK{} for the same shapes "
              r"with its M$\times$K$\times$N tile of \seedTile")
    if not differ:
        claims["kbClaimCapsVsSeed"] = quoted + ", the caps we measure" + (
            " with the same tile" if tile == seed_tile(seeds) else "")
    else:
        names = ", ".join(rf"\kbShape{r}" for r in differ)
        claims["kbClaimCapsVsSeed"] = (quoted + f"; ours differ for {names} because our tile is "
                                       r"\kbTileM$\times$\kbTileK$\times$\kbTileN: the caps follow the tile, not the "
                                       r"pipeline")
    files = {f"tab-{t.label.removeprefix('tab:')}.tex": t.latex() for t in tables(doc, nums)}
    return claims, files


def _model_error(doc: dict, nums: Numbers, src: str) -> str:
    """Add the numbers of the model's error distribution; return the claim that summarises it."""
    rows = select(doc)
    errs = [r["model_error"] for r in rows]
    size = [abs(e) for e in errs]
    narrow = sum(e <= BAND_NARROW for e in size)
    wide = sum(e <= BAND_WIDE for e in size)
    nums.count("kbGemmModelPoints", len(rows), f"{src}: points of both series")
    nums.pct("kbGemmBandNarrow", BAND_NARROW, "the narrow error band of the GEMM model check", 0)
    nums.pct("kbGemmBandWide", BAND_WIDE, "the wide error band of the GEMM model check", 0)
    nums.pct("kbGemmErrMedian", statistics.median(size), f"{src}: median |model_error|, both series")
    nums.pct("kbGemmErrMax", max(size), f"{src}: largest |model_error|, both series")
    nums.count("kbGemmWithinNarrow", narrow, f"{src}: points with |model_error| <= {BAND_NARROW:.0%}")
    nums.count("kbGemmWithinWide", wide, f"{src}: points with |model_error| <= {BAND_WIDE:.0%}")
    gemm_bound = [abs(r["model_error"]) for r in rows if r["model_bottleneck"] == "GEMM"]
    nums.count("kbGemmGemmBound", len(gemm_bound), f"{src}: points the model finds GEMM-bound")
    nums.pct("kbGemmGemmBoundErrMax", max(gemm_bound, default=0.0),
             f"{src}: largest |model_error| of the GEMM-bound points", 2)
    causes = [cause(r) for r in rows]
    for key in CAUSES:
        nums.count(f"kbGemmCause{key.capitalize()}", causes.count(key),
                   f"{src}: points outside the narrow band whose cause is '{key}'")
    for tag, r in (("High", max(rows, key=lambda r: r["model_error"])),
                   ("Low", min(rows, key=lambda r: r["model_error"]))):
        point = f"{r['m']}x{r['k']}x{r['n']} {r['variant']}"
        nums.pct(f"kbGemmErr{tag}", r["model_error"], f"{src}: model_error, {point}")
        nums.text(f"kbGemmErr{tag}Shape", _shape(r), f"{src}: shape, {point}")
        nums.text(f"kbGemmErr{tag}Staging", r["variant"], f"{src}: variant, {point}")
        nums.ns(f"kbGemmErr{tag}ReadModel", r["model_read_ns"], f"{src}: model_read_ns, {point}")
        nums.ns(f"kbGemmErr{tag}ReadMeasured", r["busy_dma_read_ns"] / r["tiles"],
                f"{src}: busy_dma_read_ns / tiles, {point}")
        nums.ns(f"kbGemmErr{tag}WriteModel", r["model_write_ns"] * r["tiles"] / r["output_tiles"],
                f"{src}: model_write_ns * tiles / output_tiles, {point}")
        nums.ns(f"kbGemmErr{tag}WriteMeasured", r["busy_dma_write_ns"] / r["output_tiles"],
                f"{src}: busy_dma_write_ns / output_tiles, {point}")
    return _summary_claim(wide == len(rows))


def _point_claim(r: dict, tag: str) -> str:
    """What the model gets wrong at the point whose numbers are the ``kbGemmErr{tag}…`` macros."""
    found = cause(r)
    if found == "reads":
        return (rf"has slower reads in the model than measured: \kbGemmErr{tag}ReadModel{{}} per tile against "
                rf"\kbGemmErr{tag}ReadMeasured")
    if found == "sharing":
        return (rf"has faster DMA stages in the model than measured: reads \kbGemmErr{tag}ReadModel{{}} per tile "
                rf"against \kbGemmErr{tag}ReadMeasured{{}} measured, output writes \kbGemmErr{tag}WriteModel{{}} "
                rf"per output tile against \kbGemmErr{tag}WriteMeasured")
    if found == "pipeline":
        return "has the model's stage times but not the overlap of its stages"
    return r"is inside the narrow band"


def _count_claim(n: int, macro: str, rest: str) -> str:
    """A sentence "<n> point(s) lie(s) <rest>" with the count as its macro."""
    if n == 0:
        return "No point lies " + rest
    return rf"\{macro}{{}} " + ("point lies " if n == 1 else "points lie ") + rest


def _summary_claim(all_wide: bool) -> str:
    if all_wide:
        return (r"the independent model is within \kbGemmBandNarrow{} of the measurement at \kbGemmWithinNarrow{} "
                r"of the \kbGemmModelPoints{} points and within \kbGemmBandWide{} at all of them (median error "
                r"\kbGemmErrMedian, largest \kbGemmErrMax)")
    return (r"the independent model is within \kbGemmBandNarrow{} of the measurement at \kbGemmWithinNarrow{} of the "
            r"\kbGemmModelPoints{} points and within \kbGemmBandWide{} at \kbGemmWithinWide{} (median error "
            r"\kbGemmErrMedian, largest \kbGemmErrMax)")


def tables(doc: dict, nums: Numbers | None = None) -> list[TableData]:
    """The GEMM section's tables: the shapes series, and the model's error by series and staging. ``nums``: the
    report's numbers (made here when not given), whose macros the captions use."""
    if nums is None:
        nums = Numbers()
        generate(doc, nums)
    return [_points_table(select(doc, series="shapes")), _error_table(doc, nums)]


def _points_table(shapes: list[dict]) -> TableData:
    rows = [[_shape(r), r["variant"], str(r["tiles"]), fixed(100 * r["fill_ratio"], 1),
             fixed(r["composite_ns"], 1), fixed(r["model_ns"], 1), fixed(100 * r["mac_efficiency"], 1),
             fixed(100 * r["model_efficiency"], 1), _pct(r["model_error"]), r["model_bottleneck"]]
            for r in shapes]
    return TableData("tab:gemm-points",
                 "The shapes series: one composite GEMM per row (M×K×N in elements, f16 inputs and output), "
                 "measured beside the independent model. Fill is the share of the paid tile MACs the shape uses; the "
                 "bottleneck is the stage that sets the model's bound.",
                 ["shape", "staging", "tiles", "fill %", "measured ns", "model ns", "eff. %", "model eff. %",
                  "error %", "bottleneck"], rows, "llrrrrrrrl")


def _error_table(doc: dict, nums: Numbers) -> TableData:
    rows = []
    for series in ("shapes", "tiles"):
        for v in VARIANTS:
            group = select(doc, series=series, variant=v)
            if not group:
                continue
            errs = [r["model_error"] for r in group]
            found = [c for c in (cause(r) for r in group) if c]
            why = "; ".join(CAUSES[c] for c in sorted(set(found), key=lambda c: (-found.count(c), c))) or "-"
            rows.append([f"{series}, {v}", str(len(group)), str(sum(abs(e) <= BAND_NARROW for e in errs)),
                         _pct(statistics.median(errs)), f"{_pct(min(errs))} to {_pct(max(errs))}", why])
    return TableData("tab:gemm-model-error",
                     "The independent model's error, (model − measured) / measured, by series and staging, and what "
                     r"the points outside ±\kbGemmBandNarrow{} miss: the model's reads slower than measured (the "
                     "simulator paces a packet's flits evenly), or the measured DMA stages slower than the model's "
                     "(reads and output writes share the slice's channels and link), read off each point's measured "
                     "stage busy times against the model's.",
                     ["series, staging", "points", r"within ±\kbGemmBandNarrow{}", "median error %", "error range %",
                      "outside the band"], rows, "lrrrrp{0.34\\linewidth}",
                     values={"kbGemmBandNarrow": nums.plain_text("kbGemmBandNarrow")})
