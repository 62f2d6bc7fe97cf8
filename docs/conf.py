"""Sphinx configuration for the KernBench documentation site.

Build it with ``nox -s docs`` or, from the repository root::

    sphinx-build -W --keep-going -b html docs docs/_build/html

Pages under ``adr/generated/`` and ``reference/`` are written at build time by
``_ext/kernbench_docs.py`` (ADR copies, the topology spec field table and
sample CLI output), and ``studies/{gemm,allreduce,gqa}.md``, their figures,
``validation.md`` (through ``_ext/kernbench_validation.py``) and
``adr/records.md`` (the ADR index) by ``_ext/kernbench_studies.py``, and the
links page's run, heatmaps and viewer screenshot (``links/_generated/``) by
``_ext/kernbench_links.py``, the machine diagrams and the landing page's
fragments (``_generated/``) by ``_ext/kernbench_docs.py``, and the gallery
(``gallery/``) by sphinx-gallery from the scripts in the repository's
``examples/``; they are not committed and must not be edited by hand.

Three environment variables make a build faster by leaving parts out (each
page then says what was not built): ``KERNBENCH_DOCS_STUDIES=skip`` (no study
runs), ``KERNBENCH_DOCS_VIEWER=skip`` (no links-page run or viewer screenshot)
and ``KERNBENCH_DOCS_GALLERY=skip`` (gallery scripts shown, not run); ``nox -s
docs_check`` (CI) sets all three. See ADR 0036.
"""

from __future__ import annotations

import os
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
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "_generated", "Thumbs.db", ".DS_Store"]
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

# Furo: light and dark mode (follows the system, with a toggle), a collapsible navigation drawer on narrow
# screens and an in-page contents sidebar on every long page (ADR 0036).
html_theme = "furo"
html_title = "KernBench"
html_short_title = "KernBench"
html_static_path = ["_static"]
html_css_files = ["kernbench.css"]
html_favicon = "_static/kernbench-icon.svg"
html_theme_options = {
    "navigation_with_keys": True,
    "top_of_page_buttons": ["view"],
}
pygments_style = "sphinx"
pygments_dark_style = "monokai"

# sphinx-copybutton: a copy button on every code block; prompts ("$ ", ">>> ") are not copied.
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
copybutton_exclude = ".linenos, .gp, .go"

# sphinx-gallery: every examples/plot_*.py runs at build time and its figure and printed output land on its page.
# Its cache is docs/gallery/ itself: a script whose text is unchanged since the last build (same MD5) is not run
# again. Delete docs/gallery/ to run them all (after a model change, for example).
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "gallery",
    "filename_pattern": r"/plot_",
    "plot_gallery": os.environ.get("KERNBENCH_DOCS_GALLERY") != "skip",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "within_subsection_order": "FileNameSortKey",
    "backreferences_dir": None,
    "doc_module": (),
    "show_memory": False,
    "min_reported_time": 1,
    "write_computation_times": False,
}
