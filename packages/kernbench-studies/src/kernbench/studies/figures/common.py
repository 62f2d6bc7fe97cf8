"""Shared figure machinery: the Agg backend, deterministic SVG/PDF output, the figure record.

Figures are rendered from ``results.json`` documents only (the topology
figures from the topology files): changing a colour never reruns a
simulation. Output is deterministic: the SVG id salt is fixed and no date
goes into SVG or PDF metadata, so the same results give the same bytes, and
files are rewritten only when their bytes change (so LaTeX and Sphinx see
no change on a warm rebuild).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from kernbench.topology.sip_topologies import MESH_2D_NO_WRAP, RING_1D, SHIPPED, TORUS_2D

FORMATS = ("svg", "pdf")
#: One colour per series name, fixed so a variant keeps its colour in every figure.
COLORS = {
    "ref_ref": "#d95f02", "load_ref": "#7570b3", "load_load": "#1b9e77",
    RING_1D.name: "#e7298a", TORUS_2D.name: "#1b9e77", MESH_2D_NO_WRAP.name: "#7570b3",
    "tcm": "#1b9e77", "sram": "#d95f02", "hbm": "#7570b3",
    "DMA_READ": "#66a61e", "FETCH": "#e6ab02", "GEMM": "#1f78b4", "STORE": "#a6761d", "DMA_WRITE": "#666666",
}
#: The colour of a SIP topology family no entry of COLORS names (a registered family beyond the shipped ones).
OTHER_TOPOLOGY_COLOR = "#666666"
#: The shipped SIP topology families, in the order figures and tables show them.
TOPOLOGY_ORDER = tuple(t.name for t in SHIPPED)


def topology_color(name: str) -> str:
    """The colour of SIP topology family ``name`` (a fixed grey for families without one)."""
    return COLORS.get(name, OTHER_TOPOLOGY_COLOR)


STYLE = {
    "svg.hashsalt": "kernbench",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "font.size": 8.5,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "legend.fontsize": 7.5,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "axes.grid": True,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.5,
    "figure.dpi": 100,
}
METADATA = {
    "svg": {"Date": None, "Creator": "kernbench"},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": "kernbench"},
}


@dataclass(frozen=True)
class FigureSpec:
    """One figure: file stem, the study whose results it draws (None: drawn from topology files), a caption
    (plain text), the command that regenerates it, the function drawing it on a fresh matplotlib figure from the
    results document (or the topology folder), and its width in the report as a share of the text width.

    ``topologies`` True: ``draw(doc, topology_dir)`` also reads the compiled topologies the results were recorded
    on (a heatmap draws on the graph). ``tex_caption`` is LaTeX the report adds to the caption; it states numbers
    only through the report's generated macros (``\\kb…``), never typed digits. Figures with the same ``group``
    share one figure of the report as sub-figures (macro ``\\kbFig`` + the group in CamelCase), under the
    ``group_caption`` of the group's first member; each member's ``short_caption`` (and ``tex_caption``) becomes
    its sub-caption."""

    name: str
    study: str | None
    caption: str
    command: str
    draw: Callable[..., plt.Figure]
    width: float = 1.0  # share of the text width the figure takes in the report (0: its own size, as drawn)
    topologies: bool = False
    tex_caption: str = ""
    group: str = ""
    group_caption: str = ""
    short_caption: str = ""


def new_figure(width_in: float = 6.4, height_in: float = 3.0, **kw) -> tuple[plt.Figure, object]:
    """A figure and its axes with the project style."""
    with plt.rc_context(STYLE):
        return plt.subplots(figsize=(width_in, height_in), **kw)


def styled(draw: Callable[..., plt.Figure], *args, **kw) -> plt.Figure:
    """``draw(*args, **kw)`` with the project style in force for the whole drawing, so that legends, titles and
    texts added after the axes were made get the style's sizes too (not matplotlib's larger defaults)."""
    with plt.rc_context(STYLE):
        return draw(*args, **kw)


def encode(fig: plt.Figure, fmt: str) -> bytes:
    """The figure's bytes in ``fmt`` (svg or pdf), deterministic."""
    buf = io.BytesIO()
    with plt.rc_context(STYLE):
        fig.savefig(buf, format=fmt, metadata=METADATA[fmt], bbox_inches="tight", pad_inches=0.03)
    return buf.getvalue()


def save(fig: plt.Figure, out_dir: Path, name: str, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write ``name.<fmt>`` for each format into ``out_dir`` (only when the bytes change); closes the figure."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    try:
        for fmt in formats:
            data = encode(fig, fmt)
            path = out_dir / f"{name}.{fmt}"
            if not path.is_file() or path.read_bytes() != data:
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_bytes(data)
                tmp.replace(path)
            paths.append(path)
    finally:
        plt.close(fig)
    return paths


def log_ticks(axis) -> None:
    """Label a log axis at 1, 2 and 5 of every decade (plain numbers), so that even a range of less than a decade
    shows several labelled ticks."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    axis.set_minor_formatter(NullFormatter())


def label_shape(m: int, k: int, n: int) -> str:
    """A shape label ``M×K×N``."""
    return f"{m}×{k}×{n}"


def kib(nbytes: float) -> str:
    """A byte count as a short tick label (16 B, 4 KiB, 96 KiB)."""
    if nbytes >= 1024 and nbytes % 1024 == 0:
        return f"{int(nbytes // 1024)} KiB"
    return f"{int(nbytes)} B"
