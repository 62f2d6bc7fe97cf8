"""Building the report: figures and generated LaTeX from results, then ``latexmk`` into a PDF, all under ``out/``.

The report's hand-written LaTeX (``main.tex``, ``sections/``, ``reference/``)
is package data of kernbench-studies, in the ``tex/`` folder beside this
module (:data:`PACKAGED_SOURCE`): an installed ``kernbench report`` finds it
from any folder, and in a clone the same folder is the one to edit (there is
no second copy). ``--source DIR`` builds from another copy.

Layout (``OUT`` defaults to ``out/report``)::

    OUT/tex/main.tex, OUT/tex/sections/*.tex   copies of the report sources (our prose)
    OUT/tex/generated/*.tex, numbers.json       numbers, claims, captions, tables, hardware table, study sections
    OUT/tex/figures/*.pdf                       figures drawn from results.json
    OUT/build/kernbench-codesign-report.pdf     latexmk's output (its aux files beside it)
    OUT/numbers.csv                             every number of the report: macro, value, unit, source file, field,
                                                point (the PDF's appendix only summarises where they come from)
    OUT/pages/page-NN.png                       every page of the PDF as an image, for review (pdftoppm)

The build fails when latexmk's log reports an overfull box of more than
:data:`OVERFULL_LIMIT_PT` (a table or formula running past the margin; ADR 0040), and, before latexmk runs, when
the grounding check (:mod:`kernbench.studies.report.grounding`) finds a hand-typed number, in digits or in words,
in the sources (checked first) or in the LaTeX the generators wrote: claims, figure and table captions, headers.

What a study contributes comes from its registration
(:mod:`kernbench.studies.registry`): its ``report`` section (the function
that adds its numbers, claims and tables, and the LaTeX section that
``generated/study-sections.tex`` inputs, in registry order) and its figures.
After the studies' sections comes the flow-fidelity section, generated from
every study's fidelity panel (:mod:`kernbench.studies.report.fidelity_tex`).
Nothing here names a study, except the platform table's largest event
counts of the ``gemm`` and ``allreduce`` studies when they are there.

Every file is written only when its bytes change, so a rebuild with nothing
changed leaves latexmk nothing to do. The sources are only read. A build
that fails leaves no empty folder behind (:func:`no_empty_folders_on_failure`);
files it wrote, such as latexmk's log, stay for reading.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernbench.studies import results as res
from kernbench.studies.base import StudyError
from kernbench.studies.figures import figures_of, render_fidelity, render_study, render_topology
from kernbench.studies.figures.fidelity import FIGURES as FIDELITY_FIGURES
from kernbench.studies.graphs import study_graph
from kernbench.studies.registry import get_study, load_ref, study_names
from kernbench.studies.report import fidelity_tex
from kernbench.studies.report.grounding import DATA_BEGIN, DATA_END, require_grounded
from kernbench.studies.report.hardware import assumed_fields, hardware_table
from kernbench.studies.report.numbers import Numbers, tex_escape
from kernbench.studies.results import write_if_changed
from kernbench.topology.naming import PE_BLOCKS

JOBNAME = "kernbench-codesign-report"
DEFAULT_OUT = Path("out") / "report"
DEFAULT_STUDIES = Path("out") / "studies"
#: The report sources shipped in this package (``main.tex``, ``sections/``, ``reference/``).
PACKAGED_SOURCE = Path(__file__).resolve().parent / "tex"
#: What ``kernbench report --source`` defaulted to before the sources became package data: a folder named
#: ``report`` that holds no ``main.tex`` means the packaged sources (see :func:`source_dir`).
LEGACY_DEFAULT_SOURCE = Path("report")
DEFAULT_SOURCE: Path | None = None
HARDWARE_TOPOLOGY = "topology.yaml"
TEX_PACKAGES = "latexmk texlive-latex-recommended texlive-latex-extra texlive-science poppler-utils"
#: An overfull box wider (or taller) than this fails the build, pt.
OVERFULL_LIMIT_PT = 1.0
#: Resolution of the page images under ``OUT/pages``, dots per inch.
PAGE_DPI = 60
NUMBERS_CSV = "numbers.csv"
INSTALL_HINT = f"apt-get update && apt-get install -y {TEX_PACKAGES} (Debian/Ubuntu; .ci/run does this)"


@dataclass(frozen=True)
class Generated:
    """What :func:`generate` wrote: the LaTeX folder, its main file, and the report numbers."""

    tex_dir: Path
    main: Path
    numbers: Numbers


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[_\-]", name))


def _figure_caption(spec, sub: bool = False) -> str:
    extra = f" {spec.tex_caption}" if spec.tex_caption else ""  # generated macros only, never typed digits
    return tex_escape(spec.short_caption if sub and spec.short_caption else spec.caption) + extra


def _figure_macros(specs) -> str:
    """One macro per figure (``\\kbFigName``); the figures of a group (``FigureSpec.group``) also make one figure
    of sub-figures stacked on a page (``\\kbFigGroup``), each with its own caption and label."""
    lines = ["% Generated by kernbench report: one macro per figure (caption and the command regenerating it).", ""]
    groups: dict[str, list] = {}
    for spec in specs:
        caption = _figure_caption(spec) + rf" Regenerate with \texttt{{{tex_escape(spec.command)}}}."
        label = spec.name.replace("_", "-")
        if spec.group:
            groups.setdefault(spec.group, []).append(spec)
            continue
        size = f"[width={spec.width:g}\\linewidth]" if spec.width else ""  # 0: the size it was drawn at
        lines.append(rf"\newcommand{{\kbFig{_camel(spec.name)}}}{{\begin{{figure}}[htbp]\centering"
                     rf"\includegraphics{size}{{figures/{spec.name}}}"
                     rf"\caption{{{caption}}}\label{{fig:{label}}}\end{{figure}}}}")
    for group, members in groups.items():
        parts = []
        for spec in members:
            label = spec.name.replace("_", "-")
            size = f"[width={spec.width:g}\\linewidth]" if spec.width else ""  # 0: the size it was drawn at
            parts.append(rf"\begin{{subfigure}}{{\linewidth}}\centering"
                         rf"\includegraphics{size}{{figures/{spec.name}}}"
                         rf"\caption{{{_figure_caption(spec, sub=True)}}}\label{{fig:{label}}}\end{{subfigure}}")
        head = members[0]
        caption = tex_escape(head.group_caption) + rf" Regenerate with \texttt{{{tex_escape(head.command)}}}."
        lines.append(rf"\newcommand{{\kbFig{_camel(group)}}}{{\begin{{figure}}[p]\centering"
                     + r"\par\medskip".join(parts)
                     + rf"\caption{{{caption}}}\label{{fig:{group.replace('_', '-')}}}\end{{figure}}}}")
    return "\n".join(lines) + "\n"


def _claims(claims: dict[str, str]) -> str:
    lines = ["% Generated by kernbench report: statements whose wording depends on the results; do not edit.", ""]
    lines += [rf"\newcommand{{\{name}}}{{{body}}}" for name, body in claims.items()]
    return "\n".join(lines) + "\n"


def _appendix(nums: Numbers, docs: dict[str, dict]) -> str:
    """The provenance appendix: one row per study run, and how many of the report's numbers come from each source
    file. The full list of numbers is ``numbers.csv`` beside the PDF, not pages of the PDF."""
    lines = ["% Generated by kernbench report: where the report's numbers come from; do not edit.",
             r"\begin{table}[htbp]", r"\centering\footnotesize",
             r"\caption{The study runs behind this report: the command, where it ran (the commit of a clone, or the "
             r"installed version), its points, the digest of the sources it ran, and the simulation time summed over "
             r"its points.}",
             r"\label{tab:provenance}",
             r"\begin{tabularx}{\linewidth}{@{}lLLrlr@{}}", r"\toprule",
             r"Study & Command & Ran & Points & Source digest & Simulation \\", r"\midrule"]
    lines.append(DATA_BEGIN)  # one row per study run, its cells macros and study names
    for name in docs:
        tag = _camel(name)
        lines.append(rf"{tex_escape(name)} & \texttt{{\kb{tag}Command}} & \kb{tag}Origin & \kb{tag}Points & "
                     rf"\texttt{{\kb{tag}Source}} & \kb{tag}CpuSeconds \\")
    lines += [DATA_END, r"\bottomrule", r"\end{tabularx}", r"\end{table}", ""]
    counts = nums.by_source_file()
    lines += [r"\texttt{kernbench report} writes all \kbReportNumbers{} numbers of this report, with their "
              rf"units and the field and point each comes from, to \texttt{{out/report/{NUMBERS_CSV}}} (columns "
              r"macro, value, unit, source file, field, point); Table~\ref{tab:number-sources} counts them by "
              r"source.", "",
              r"\begin{table}[htbp]", r"\centering\footnotesize",
              r"\caption{The report's numbers by the file (or constant) they are read from.}",
              r"\label{tab:number-sources}",
              r"\begin{tabularx}{\linewidth}{@{}Lr@{}}", r"\toprule", r"Source & Numbers \\", r"\midrule"]
    lines += [DATA_BEGIN, *(rf"\texttt{{{tex_escape(f)}}} & {c} \\" for f, c in counts.items()), DATA_END]
    lines += [r"\bottomrule", r"\end{tabularx}", r"\end{table}", ""]
    return "\n".join(lines) + "\n"


def origin(provenance: dict) -> str:
    """Where a study's results came from, as the report says it: ``at commit <sha>`` for a run in a git clone,
    else the installed kernbench-studies version that ran it (kernbench-benches for results written before the
    studies had their own distribution; never "commit none")."""
    commit = provenance.get("git_commit")
    if commit:
        return f"at commit {commit[:12]}"
    packages = provenance.get("packages") or {}
    for name in ("kernbench-studies", "kernbench-benches"):
        version = packages.get(name)
        if version and version != "not installed":
            return f"from the installed {name} {version} (not a git clone)"
    return "from installed packages (not a git clone)"


def _provenance(nums: Numbers, docs: dict[str, dict]) -> None:
    for name, doc in docs.items():
        tag = _camel(name)
        prov = doc["provenance"]
        src = f"out/studies/{name}/results.json: provenance"
        nums.text(f"kb{tag}Command", doc["command"], f"{src} (command)")
        nums.text(f"kb{tag}Origin", origin(prov), f"{src}.git_commit, else .packages (kernbench-studies)")
        nums.text(f"kb{tag}Source", prov["source_sha256"][:12], f"{src}.source_sha256")
        nums.count(f"kb{tag}Points", len(doc["points"]), f"out/studies/{name}/results.json: points")
        nums.plain(f"kb{tag}CpuSeconds", sum(prov["run"]["point_wall_s"]),
                   f"{src}.run.point_wall_s (sum: simulation time of every point, s)", "s")
    origins = {origin(doc["provenance"]) for doc in docs.values()}
    nums.text("kbRunsOrigin", origins.pop() if len(origins) == 1 else "at several commits or versions (the provenance "
              "table names each)", "out/studies/*/results.json: provenance.git_commit of every study, when they agree")


def _platform(nums: Numbers, topology_dir: Path, docs: dict[str, dict]) -> str:
    graph = study_graph(topology_dir, HARDWARE_TOPOLOGY)
    spec = graph.spec
    src = f"topologies/{HARDWARE_TOPOLOGY}"
    nums.count("kbTopoNodes", len(graph.nodes), f"{src}: nodes of the compiled graph")
    nums.count("kbTopoEdges", len(graph.edges), f"{src}: directed edges of the compiled graph")
    nums.count("kbSips", spec.system.sips.count, f"{src}: system.sips.count")
    nums.count("kbCubesPerSip", spec.cubes_per_sip, f"{src}: cubes per SIP")
    nums.count("kbPesPerCube", spec.pes_per_cube, f"{src}: PEs per cube")
    nums.count_word("kbPeBlocks", len({n.type for n in graph.nodes.values() if n.type in PE_BLOCKS}),
                    f"{src}: kinds of PE block in the compiled graph")
    nums.plain("kbPeakTflops", spec.pe.gemm.peak_tflops, f"{src}: pe.gemm.peak_tflops", "TFLOP/s")
    nums.plain("kbChannelGbs", spec.cube.hbm.bw_gbs / spec.cube.hbm.pseudo_channels,
               f"{src}: cube.hbm.bw_gbs / cube.hbm.pseudo_channels", "GB/s")
    nums.count("kbChannelsPerPe", spec.channels_per_pe, f"{src}: pseudo-channels per PE slice")
    nums.plain("kbNocGbs", spec.cube.noc.link_bw_gbs, f"{src}: cube.noc.link_bw_gbs", "GB/s")
    nums.plain("kbSramGbs", spec.cube.sram.link_bw_gbs, f"{src}: cube.sram.link_bw_gbs", "GB/s")
    nums.plain("kbTcmGbs", spec.pe.tcm.read_bw_gbs, f"{src}: pe.tcm.read_bw_gbs", "GB/s")
    nums.count("kbMathLanes", spec.pe.math_lanes, f"{src}: pe.math_lanes")
    nums.plain("kbPeClockGhz", spec.pe.clock_ghz, f"{src}: pe.clock_ghz", "GHz")
    nums.plain("kbDispatchFixed", spec.pe.cost_model.fixed_cycles, f"{src}: pe.cost_model.fixed_cycles", "cycles")
    nums.plain("kbDispatchPerByte", spec.pe.cost_model.r_cycles_per_byte, f"{src}: pe.cost_model.r_cycles_per_byte",
               "cycles/B")
    nums.plain("kbPcieNs", spec.system.pcie.latency_ns, f"{src}: system.pcie.latency_ns", "ns")
    if "gemm" in docs:
        nums.count("kbGemmEventsMax", max(r["events"] for r in res.rows(docs["gemm"])),
                   "out/studies/gemm/results.json: largest events of a point")
    if "allreduce" in docs:
        nums.count("kbArEventsMax", max(r["events"] for r in res.rows(docs["allreduce"])),
                   "out/studies/allreduce/results.json: largest events of a point")
    return hardware_table(spec, src, assumed_fields((topology_dir / HARDWARE_TOPOLOGY).read_text(encoding="utf-8")))


def source_dir(source: str | Path | None = DEFAULT_SOURCE) -> Path:
    """The folder of report sources to build from: ``source`` when given (it must hold ``main.tex``), else the
    sources shipped in this package. ``report``, the command line's old default, means the packaged sources
    unless a ``report/main.tex`` exists where the command runs."""
    if source is None:
        return PACKAGED_SOURCE
    path = Path(source)
    if (path / "main.tex").is_file():
        return path
    if path == LEGACY_DEFAULT_SOURCE:
        return PACKAGED_SOURCE
    raise StudyError(f"{path}/main.tex does not exist; pass --source DIR naming a folder of report sources "
                     f"(main.tex, sections/), or leave it out to use the sources installed with kernbench-studies")


def _walk_folders(top: Path) -> set[Path]:
    """``top`` and every folder below it (nothing when ``top`` is not a folder)."""
    if not top.is_dir():
        return set()
    return {top} | {Path(d) / n for d, names, _ in os.walk(top) for n in names}


@contextlib.contextmanager
def no_empty_folders_on_failure(out: str | Path) -> Iterator[None]:
    """Run the body; when it raises, remove the folders it created under (and including) ``out`` that are still
    empty, deepest first, then re-raise. Folders that existed before, and any file written (a latexmk log to
    read), stay."""
    out = Path(out)
    top = out
    while not top.parent.exists() and top.parent != top:  # the highest folder this run would create
        top = top.parent
    before = _walk_folders(top)
    try:
        yield
    except BaseException:
        for folder in sorted(_walk_folders(top) - before, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only succeeds when empty
        raise


def generate(studies_dir: Path = DEFAULT_STUDIES, source: Path | None = DEFAULT_SOURCE, out: Path = DEFAULT_OUT,
             topology_dir: Path = Path("topologies")) -> Generated:
    """Write the figures, generated LaTeX and copies of the report sources (``source``, default the packaged
    ones: :func:`source_dir`) under ``out/tex``; a failure leaves no empty folder it created."""
    source, out, studies_dir = source_dir(source), Path(out), Path(studies_dir)
    with no_empty_folders_on_failure(out):
        return _generate(studies_dir, source, out, Path(topology_dir))


def _generate(studies_dir: Path, source: Path, out: Path, topology_dir: Path) -> Generated:
    docs: dict[str, dict] = {}
    for name in study_names():  # every results file is read before anything is written
        docs[name] = res.load(studies_dir / name / res.RESULTS_JSON)
        if docs[name]["study"] != name:
            raise StudyError(f"{studies_dir / name / res.RESULTS_JSON} holds study {docs[name]['study']!r}, not "
                             f"{name!r}; regenerate it with `kernbench study {name}`")
    require_grounded(source)  # no hand-typed number in the sources: checked before anything is written
    tex = out / "tex"
    try:
        (tex / "generated").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StudyError(f"cannot write the report under {out}: {exc.strerror or exc}; pass --out DIR") from None
    for doc in docs.values():
        render_study(doc, tex / "figures", ("pdf",), topology_dir)
    render_topology(topology_dir, tex / "figures", ("pdf",))
    render_fidelity(docs, tex / "figures", ("pdf",))
    nums = Numbers()
    files = {"hardware.tex": _platform(nums, topology_dir, docs)}
    claims: dict[str, str] = {}
    sections = ["% Generated by kernbench report: the section of every registered study, in registry order.", ""]
    for name, doc in docs.items():
        section = get_study(name).report
        if section is None:
            continue
        c, f = load_ref(section.generate)(doc, nums)
        claims.update(c)
        files.update(f)
        sections.append(rf"\input{{{section.tex}}}")
    c, f = fidelity_tex.generate(docs, nums)  # every study's fidelity panel, after the studies' own sections
    claims.update(c)
    files.update(f)
    sections.append(rf"\input{{{fidelity_tex.FILE}}}")
    files["study-sections.tex"] = "\n".join(sections) + "\n"
    _provenance(nums, docs)
    specs = [*(s for name in (None, *docs) for s in figures_of(name)), *FIDELITY_FIGURES]
    files["figures.tex"] = _figure_macros(specs)
    files["claims.tex"] = _claims(claims)
    nums.count("kbReportNumbers", len(nums.items) + 1, f"out/report/{NUMBERS_CSV}: rows (every number of the "
               "report, this one included)")
    files["numbers.tex"] = nums.tex_file()
    files["numbers.json"] = nums.json_file()
    files["appendix-numbers.tex"] = _appendix(nums, docs)
    for name, text in files.items():
        write_if_changed(tex / "generated" / name, text)
    write_if_changed(out / NUMBERS_CSV, nums.csv_file())
    for path in [source / "main.tex", *sorted((source / "sections").glob("*.tex")),
                 *sorted((source / "reference").glob("*.tex"))]:
        write_if_changed(tex / path.relative_to(source), path.read_text(encoding="utf-8"))
    # nor in what the generators wrote: claims, captions, table captions and headers (the files stay, to be read)
    require_grounded(generated=[tex / "generated" / name for name in files])
    return Generated(tex, tex / "main.tex", nums)


def latexmk() -> str:
    """The ``latexmk`` executable, or :class:`StudyError` saying exactly what to install."""
    exe = shutil.which("latexmk")
    if exe is None or shutil.which("pdflatex") is None:
        raise StudyError(f"latexmk/pdflatex not found: the report needs TeX; install it with {INSTALL_HINT}, or run "
                         f"with --no-pdf to stop after the generated LaTeX")
    return exe


@dataclass(frozen=True)
class PdfStats:
    """What the built PDF holds: pages, numbered figures and tables (from latexmk's log and aux files), and the
    overfull boxes above :data:`OVERFULL_LIMIT_PT` that the log reports (a built PDF has none)."""

    pages: int
    figures: int
    tables: int
    overfull: int = 0


@dataclass(frozen=True)
class Overfull:
    """One overfull box of a LaTeX log: ``hbox``, ``vbox`` or ``float`` (a float too large for its page), by how
    much (pt), and where the log says it is."""

    kind: str
    pt: float
    where: str


_OVERFULL = re.compile(r"^(?:Overfull \\(?P<kind>[hv]box) \((?P<pt>[0-9.]+)pt too (?:wide|high)\) (?P<where>.*)"
                       r"|LaTeX Warning: (?P<float>Float) too large for page by (?P<fpt>[0-9.]+)pt (?P<fwhere>.*))$",
                       re.MULTILINE)


def overfull_boxes(log: str, limit_pt: float = OVERFULL_LIMIT_PT) -> list[Overfull]:
    """The overfull boxes (and floats too large for their page) of a LaTeX log larger than ``limit_pt``, in log
    order, each with the last ``(./name.tex`` opened before it in the log (the file it is in, or the one
    before)."""
    out = []
    for m in _OVERFULL.finditer(log):
        kind, pt, where = ("float", float(m["fpt"]), m["fwhere"]) if m["float"] else (m["kind"], float(m["pt"]),
                                                                                      m["where"])
        if pt <= limit_pt:
            continue
        opened = re.findall(r"\((\./[^\s()]+\.tex)", log[:m.start()])
        out.append(Overfull(kind, pt, f"{where.strip()} (after {opened[-1] if opened else 'main.tex'} was read)"))
    return out


def pdf_stats(out: Path = DEFAULT_OUT) -> PdfStats:
    """Pages (the log's "Output written" line), the figure and table labels (the aux file; a sub-figure is not a
    figure of its own)
    and the overfull boxes above the limit (the log) of the last build."""
    build = Path(out) / "build"
    log = (build / f"{JOBNAME}.log").read_text(encoding="utf-8", errors="replace")
    aux = (build / f"{JOBNAME}.aux").read_text(encoding="utf-8", errors="replace")
    # TeX wraps its log at 79 characters, so a long output path can split "(24 pages" across lines
    pages = re.search(r"Output written on .*?\((\d+)\s+pages?", log.replace("\n", ""), re.DOTALL)
    figures = re.findall(r"\\newlabel\{fig:[^}]*\}\{\{([^}]*)\}", aux)
    return PdfStats(int(pages.group(1)) if pages else 0, sum(n.isdigit() for n in figures),  # sub-figures aside
                    len(re.findall(r"\\newlabel\{tab:", aux)), len(overfull_boxes(log)))


def check_overfull(log_path: Path, limit_pt: float = OVERFULL_LIMIT_PT) -> None:
    """:class:`StudyError` listing every overfull box above ``limit_pt`` in the LaTeX log at ``log_path``."""
    boxes = overfull_boxes(Path(log_path).read_text(encoding="utf-8", errors="replace"), limit_pt)
    if boxes:
        shown = "; ".join(f"{b.kind} {b.pt:.1f} pt at {b.where}" for b in boxes[:6])
        raise StudyError(f"the report has {len(boxes)} overfull box(es) above {limit_pt:g} pt (text or a table "
                         f"running past the margin; see {log_path}): {shown}")


def render_pages(pdf: Path, out: Path = DEFAULT_OUT, dpi: int = PAGE_DPI) -> list[Path]:
    """Every page of ``pdf`` as ``OUT/pages/page-NN.png`` (pdftoppm), for a reviewer to page through; redone only
    when the PDF's bytes changed, and page images of pages that no longer exist are removed."""
    exe = shutil.which("pdftoppm")
    if exe is None:
        raise StudyError(f"pdftoppm not found: the report renders its pages to PNG with poppler-utils; install it "
                         f"with {INSTALL_HINT}, or run with --no-pdf")
    pages = Path(out) / "pages"
    pages.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(Path(pdf).read_bytes()).hexdigest() + f" {dpi}"
    stamp = pages / ".pdf.sha256"
    existing = sorted(pages.glob("page-*.png"))
    if existing and stamp.is_file() and stamp.read_text() == digest:
        return existing
    for old in existing:
        old.unlink()
    subprocess.run([exe, "-r", str(dpi), "-png", str(pdf), str(pages / "page")], check=True, capture_output=True)
    write_if_changed(stamp, digest)
    return sorted(pages.glob("page-*.png"))


def build_pdf(gen: Generated, out: Path = DEFAULT_OUT) -> Path:
    """Run ``latexmk -pdf`` on the generated report, fail on an overfull box above :data:`OVERFULL_LIMIT_PT`, and
    render the pages to PNG under ``OUT/pages``; returns the PDF's path (``StudyError`` with the log on failure)."""
    exe = latexmk()
    build = (Path(out) / "build").resolve()
    with no_empty_folders_on_failure(build):
        build.mkdir(parents=True, exist_ok=True)
        cmd = [exe, "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
               f"-jobname={JOBNAME}", f"-outdir={build}", gen.main.name]
        proc = subprocess.run(cmd, cwd=gen.tex_dir, capture_output=True, text=True, check=False)
        pdf = build / f"{JOBNAME}.pdf"
        if proc.returncode != 0 or not pdf.is_file():
            errors = [ln for ln in proc.stdout.splitlines() if ln.startswith(("!", "./", "main.tex:"))][-5:]
            raise StudyError(f"latexmk failed (exit {proc.returncode}); see {build / (JOBNAME + '.log')}: "
                             f"{' | '.join(errors) or proc.stderr.strip()[-300:]}")
    check_overfull(build / f"{JOBNAME}.log")
    pages = render_pages(pdf, out)
    sys.stderr.write(f"report: 0 overfull boxes above {OVERFULL_LIMIT_PT:g} pt; {len(pages)} page images in "
                     f"{Path(out) / 'pages'}; all numbers in {Path(out) / NUMBERS_CSV}\n")
    return pdf
