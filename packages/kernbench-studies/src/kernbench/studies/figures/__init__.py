"""Study figures (matplotlib, Agg, deterministic SVG for the docs and PDF for the report).

:func:`render_study` draws a study's figures from its ``results.json``
document (the all-reduce heatmaps also from the compiled topologies the
results were recorded on); :func:`render_topology` draws the topology
figures from the topology files; :func:`render_fidelity` draws the fidelity
figure from the results of every study at once. None ever runs a simulation.
Which figures a study has is part of its registration (``Study.figures``,
:mod:`kernbench.studies.registry`); nothing here names a study.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import matplotlib

from kernbench.studies.cache import canonical, file_digest, source_digest
from kernbench.studies.figures import fidelity, topology
from kernbench.studies.figures.common import FORMATS, FigureSpec, save, styled
from kernbench.studies.registry import get_study, is_registered, load_ref
from kernbench.studies.results import strip_run, validate, write_if_changed


def _figure_modules(study: str | None) -> tuple[str, ...]:
    """The modules holding a study's figure specs (``None``: the topology figures)."""
    if study is None:
        return (topology.__name__,)
    if not is_registered(study):
        return ()
    return tuple(dict.fromkeys(ref.partition(":")[0] for ref in get_study(study).figures))


def figures_of(study: str | None) -> tuple[FigureSpec, ...]:
    """The figure specs of a registered study, from its registration (``None``: the topology figures); empty
    for a study without figures or one not registered."""
    if study is None:
        return topology.FIGURES
    if not is_registered(study):
        return ()
    return tuple(spec for ref in get_study(study).figures for spec in load_ref(ref))


def _stamp(inputs: object, formats: tuple[str, ...], modules: tuple[str, ...]) -> str:
    """What a set of figures is drawn from: the inputs, the figure code (this package, the figure modules and what
    they import), matplotlib."""
    text = canonical({"inputs": inputs, "code": source_digest((__name__, *modules)),
                      "matplotlib": matplotlib.__version__, "formats": list(formats)})
    return hashlib.sha256(text.encode()).hexdigest()


def _render(specs: tuple[FigureSpec, ...], draw, out_dir: Path, formats: tuple[str, ...], stamp: str,
            tag: str) -> list[Path]:
    out_dir = Path(out_dir)
    paths = [out_dir / f"{s.name}.{fmt}" for s in specs for fmt in formats]
    stamp_file = out_dir / f".{tag}.figures.sha256"
    if all(p.is_file() for p in paths) and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return paths  # drawn from exactly these inputs by exactly this code: nothing to redo
    for spec in specs:
        save(styled(draw, spec), out_dir, spec.name, formats)
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

    return _render(specs, draw, out_dir, formats, _stamp(inputs, formats, _figure_modules(doc["study"])),
                   doc["study"])


def render_topology(topology_dir: Path, out_dir: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Draw the topology figures from the files in ``topology_dir`` into ``out_dir``."""
    files = [topology.DEFAULT, *(f for _, f in topology.SIP_FILES)]
    inputs = {f: file_digest(Path(topology_dir) / f) for f in files}
    return _render(topology.FIGURES, lambda spec: spec.draw(Path(topology_dir)), out_dir, formats,
                   _stamp(inputs, formats, _figure_modules(None)), "topology")


def render_fidelity(docs: dict[str, dict], out_dir: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Draw the fidelity figure (:mod:`kernbench.studies.figures.fidelity`) from every study's results ``docs``
    (study name -> validated results document) into ``out_dir``; returns the paths. It is redrawn only when the
    fidelity panels' rows (latencies and wall times) or the figure code change."""
    from kernbench.studies.fidelity import all_rows

    inputs = [dataclasses.asdict(r) for r in all_rows(docs)]
    return _render(fidelity.FIGURES, lambda spec: spec.draw(docs), out_dir, formats,
                   _stamp(inputs, formats, (fidelity.__name__,)), "fidelity")
