"""The GEMM section's generated numbers, claims and tables, from the gemm study's ``results.json``."""

from __future__ import annotations

from kernbench.studies.report.numbers import Numbers, fixed
from kernbench.studies.report.tables import TableData
from kernbench.studies.results import one, select

TOLERANCE = 0.15
#: The earlier report's GEMM tile (M, K, N) and the fill caps it quoted for the Cube, SmallM and SmallK shapes
#: (../shared/seeds/extracted/docs/report/1H-codesign-paper/sections/03-gemm.tex); tex/reference/seed-claims.tex
#: typesets the caps.
SEED_TILE = (32, 64, 32)
SEED_CAPS = {"Cube": 0.5, "SmallM": 0.25, "SmallK": 0.125}
VARIANTS = {"ref_ref": "RefRef", "load_ref": "LoadRef", "load_load": "LoadLoad"}
#: Macro role of each shape of the shapes series.
ROLES = {(32, 32, 32): "Cube", (32, 64, 32): "Pair", (32, 128, 32): "Quad", (32, 128, 128): "Wide",
         (32, 3072, 32): "DeepK", (8, 128, 128): "SmallM", (128, 8, 128): "SmallK", (512, 512, 512): "Big"}


def _shape(r: dict) -> str:
    return f"{r['m']}×{r['k']}×{r['n']}"


def explain(r: dict) -> str:
    """Why the model misses a point by more than the tolerance, from the model's own assumptions."""
    if r["variant"] != "load_load" and r["output_tiles"] == r["tiles"] and r["tiles"] > 1:
        return ("every tile writes an output block: the write shares the slice's pseudo-channels and NoC link with "
                "the next block reads, which the model keeps independent")
    if r["tiles"] <= 2:
        return "two tiles or fewer: the per-tile mean that paces the model does not apply"
    return "stage overlap differs from the pipeline formula (see the stage breakdown)"


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
        nums.ns(f"kbBigRead{tag}", big[v]["model_read_ns"], f"{src}: model_read_ns 512x512x512 {v}")
        nums.text(f"kbBigBottleneck{tag}", big[v]["model_bottleneck"].replace("_", " "),
                  f"{src}: model_bottleneck 512x512x512 {v}")
        nums.pct(f"kbGemmCeilingBig{tag}", big[v]["compute_bound_efficiency"],
                 f"{src}: compute_bound_efficiency 512x512x512 {v}")
    nums.plain("kbBigReadRatioRefRef", big["ref_ref"]["model_read_ns"] / big["ref_ref"]["model_gemm_ns"],
               f"{src}: model_read_ns / model_gemm_ns, 512x512x512 ref_ref", r"$\times$")
    for v, tag in VARIANTS.items():
        rows = select(doc, series="tiles", variant=v)
        nums.pct(f"kbTileEffOne{tag}", rows[0]["mac_efficiency"], f"{src}: tiles series {v}, 1 tile")
        nums.pct(f"kbTileEffMax{tag}", rows[-1]["mac_efficiency"], f"{src}: tiles series {v}, largest count")
    nums.pct("kbTileCeilingMax", tiles[-1]["compute_bound_efficiency"],
             f"{src}: compute_bound_efficiency at the largest tile count")
    errs_s = [abs(r["model_error"]) for r in shapes]
    errs_t = [abs(r["model_error"]) for r in tiles]
    nums.pct("kbGemmErrMaxShapes", max(errs_s), f"{src}: largest |model_error| of the shapes series")
    nums.pct("kbGemmErrMaxTiles", max(errs_t), f"{src}: largest |model_error| of the tiles series")
    inside_s = sum(e <= TOLERANCE for e in errs_s)
    inside_t = sum(e <= TOLERANCE for e in errs_t)
    nums.count("kbGemmWithinShapes", inside_s, f"{src}: shapes points with |model_error| <= 15 %")
    nums.count("kbGemmWithinTiles", inside_t, f"{src}: tiles points with |model_error| <= 15 %")
    nums.pct("kbGemmTolerance", TOLERANCE, "the acceptance band of the GEMM model check", 0)
    outliers = [r for r in shapes + tiles if abs(r["model_error"]) > TOLERANCE]
    claims = {}
    if not outliers:
        claims["kbClaimGemmModel"] = (r"the model is within \kbGemmTolerance{} of the measurement at every one of the "
                                      r"\kbGemmShapePoints{} shape points and the \kbGemmTilePoints{} tile-series "
                                      r"points, so no point needs an explanation beyond the model itself")
    else:
        claims["kbClaimGemmModel"] = (r"the model is within \kbGemmTolerance{} of the measurement at "
                                      r"\kbGemmWithinShapes{} of the \kbGemmShapePoints{} shape points and "
                                      r"\kbGemmWithinTiles{} of the \kbGemmTilePoints{} tile-series points; "
                                      r"Table~\ref{tab:gemm-outliers} lists the others with the part of the model "
                                      r"that misses them")
    tile = (first["tile_m"], first["tile_k"], first["tile_n"])
    caps = {role: one(doc, series="shapes", variant="ref_ref", m=m, k=k, n=n)["fill_ratio"]
            for (m, k, n), role in ROLES.items() if role in SEED_CAPS}
    agree = [r for r in SEED_CAPS if abs(caps[r] - SEED_CAPS[r]) < 1e-9]
    differ = [r for r in SEED_CAPS if r not in agree]
    seed_tile = r"$\times$".join(str(x) for x in SEED_TILE)
    quoted = (r"the earlier report quoted \seedCapCube, \seedCapSmallM{} and \seedCapSmallK{} for the same three "
              rf"shapes with its M$\times$K$\times$N tile of {seed_tile}")
    if not differ:
        claims["kbClaimCapsVsSeed"] = quoted + ", the caps we measure" + (
            " with the same tile" if tile == SEED_TILE else "")
    else:
        names = ", ".join(rf"\kbShape{r}" for r in differ)
        claims["kbClaimCapsVsSeed"] = (quoted + f"; ours differ for {names} because our tile is "
                                       r"\kbTileM$\times$\kbTileK$\times$\kbTileN: the caps follow the tile, not the "
                                       r"pipeline")
    files = {f"tab-{t.label.removeprefix('tab:')}.tex": t.latex() for t in tables(doc)}
    # no point outside the band: no empty table, the claim above says so in a sentence
    files.setdefault("tab-gemm-outliers.tex", "% Generated by kernbench report: every GEMM point is inside the model's "
                     "band (the text says so); no table.\n")
    return claims, files


def tables(doc: dict) -> list[TableData]:
    """The GEMM section's tables: the shapes series, and the points outside the model's band (only when there are
    any: an empty table is a sentence of the text instead)."""
    shapes = select(doc, series="shapes")
    outliers = [r for r in shapes + select(doc, series="tiles") if abs(r["model_error"]) > TOLERANCE]
    return [_points_table(shapes)] + ([_outlier_table(outliers)] if outliers else [])


def _points_table(shapes: list[dict]) -> TableData:
    rows = [[_shape(r), r["variant"], str(r["tiles"]), fixed(100 * r["fill_ratio"], 1),
             fixed(r["composite_ns"], 1), fixed(r["model_ns"], 1), fixed(100 * r["mac_efficiency"], 1),
             fixed(100 * r["model_efficiency"], 1), fixed(100 * r["model_error"], 1), r["model_bottleneck"]]
            for r in shapes]
    return TableData("tab:gemm-points",
                 "The shapes series: one composite GEMM per row (M×K×N in elements, f16 inputs and output), "
                 "measured beside the pipeline model. Fill is the share of the paid tile MACs the shape uses; the "
                 "bottleneck is the model's slowest stage per tile.",
                 ["shape", "staging", "tiles", "fill %", "measured ns", "model ns", "eff. %", "model eff. %",
                  "error %", "bottleneck"], rows, "llrrrrrrrl")


def _outlier_table(outliers: list[dict]) -> TableData:
    rows = [[_shape(r), r["variant"], str(r["tiles"]), fixed(100 * r["model_error"], 1), explain(r)]
            for r in outliers]
    return TableData("tab:gemm-outliers",
                 "Points where the pipeline model misses the measurement by more than the band, with the model "
                 "assumption that does not hold there.",
                 ["shape", "staging", "tiles", "error %", "why the model misses"], rows, "llrrp{0.45\\linewidth}")
