"""Sphinx configuration for the KernBench documentation site.

Build it with ``nox -s docs`` or, from the repository root::

    sphinx-build -W --keep-going -b html docs docs/_build/html

Pages under ``adr/generated/`` and ``reference/`` are written at build time by
``_ext/kernbench_docs.py`` (ADR copies, the topology spec field table and
sample CLI output), and ``studies/{gemm,allreduce,gqa}.md``, their figures and
``adr/records.md`` (the ADR index) by ``_ext/kernbench_studies.py``, and the
links page's run, heatmaps and viewer screenshot (``links/_generated/``) by
``_ext/kernbench_links.py``; they are not committed and must not be edited by
hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "KernBench"
author = "the KernBench developers"
copyright = "the KernBench developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "kernbench_docs",
    "kernbench_studies",
    "kernbench_links",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# MyST: ":::" fences, and {{ name }} substitutions for numbers measured at build time
# (kernbench_docs fills myst_substitutions from real CLI runs).
myst_enable_extensions = ["colon_fence", "substitution"]
myst_heading_anchors = 3

# autodoc: document each public module once, in source order, with signatures as written.
autodoc_default_options = {"member-order": "bysource"}  # each directive lists :members: itself
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_class_signature = "mixed"
add_module_names = False

nitpicky = False

html_theme = "alabaster"
html_title = "KernBench"
html_theme_options = {
    "description": "A discrete-event simulator of AI-accelerator chiplet hardware",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "240px",
}
html_static_path: list[str] = []
