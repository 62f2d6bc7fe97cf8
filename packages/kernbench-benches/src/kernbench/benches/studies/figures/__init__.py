"""Study figures (matplotlib, Agg, deterministic SVG for the docs and PDF for the report).

:func:`render_study` draws a study's figures from its ``results.json``
document (the all-reduce heatmaps also from the compiled topologies the
results were recorded on); :func:`render_topology` draws the topology
figures from the topology files. Neither ever runs a simulation.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import matplotlib

from kernbench.benches.studies.cache import canonical, file_digest, source_digest
from kernbench.benches.studies.figures import allreduce, allreduce_links, gemm, gqa, topology
from kernbench.benches.studies.figures.common import FORMATS, FigureSpec, save
from kernbench.benches.studies.results import strip_run, validate, write_if_changed

#: Figures per study name (``None``: the topology figures).
BY_STUDY: dict[str | None, tuple[FigureSpec, ...]] = {
    "gemm": gemm.FIGURES,
    "allreduce": allreduce.FIGURES + allreduce_links.FIGURES,
    "gqa": gqa.FIGURES,
    None: topology.FIGURES,
}


def figures_of(study: str | None) -> tuple[FigureSpec, ...]:
    """The figure specs of a study (``None``: the topology figures); empty for a study without figures."""
    return BY_STUDY.get(study, ())


def _stamp(inputs: object, formats: tuple[str, ...]) -> str:
    """What a set of figures is drawn from: the inputs, the figure code (and what it imports), matplotlib."""
    text = canonical({"inputs": inputs, "code": source_digest((__name__,)), "matplotlib": matplotlib.__version__,
                      "formats": list(formats)})
    return hashlib.sha256(text.encode()).hexdigest()


def _render(specs: tuple[FigureSpec, ...], draw, out_dir: Path, formats: tuple[str, ...], stamp: str,
            tag: str) -> list[Path]:
    out_dir = Path(out_dir)
    paths = [out_dir / f"{s.name}.{fmt}" for s in specs for fmt in formats]
    stamp_file = out_dir / f".{tag}.figures.sha256"
    if all(p.is_file() for p in paths) and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return paths  # drawn from exactly these inputs by exactly this code: nothing to redo
    for spec in specs:
        save(draw(spec), out_dir, spec.name, formats)
    write_if_changed(stamp_file, stamp)
    return paths


def render_study(doc: dict, out_dir: Path, formats: tuple[str, ...] = FORMATS,
                 topology_dir: Path = Path("topologies")) -> list[Path]:
    """Draw every figure of ``doc``'s study into ``out_dir`` (one file per format); returns the paths. Figures
    already drawn from the same results (run records aside), the same topology files (for the figures that read
    them from ``topology_dir``) and the same code are kept as they are."""
    validate(doc)
    specs = figures_of(doc["study"])
    inputs: object = strip_run(doc)
    if any(s.topologies for s in specs):
        files = sorted(doc["provenance"].get("topology_files", {}))
        inputs = {"results": inputs, "topology_files": {f: file_digest(Path(topology_dir) / f) for f in files}}

    def draw(spec: FigureSpec):
        return spec.draw(doc, topology_dir) if spec.topologies else spec.draw(doc)

    return _render(specs, draw, out_dir, formats, _stamp(inputs, formats), doc["study"])


def render_topology(topology_dir: Path, out_dir: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Draw the topology figures from the files in ``topology_dir`` into ``out_dir``."""
    files = [topology.DEFAULT, *(f for _, f in topology.SIP_FILES)]
    inputs = {f: file_digest(Path(topology_dir) / f) for f in files}
    return _render(topology.FIGURES, lambda spec: spec.draw(Path(topology_dir)), out_dir, formats,
                   _stamp(inputs, formats), "topology")
