"""The docs site's validation page (docs/_ext/kernbench_validation.py): the report's comparisons turned into MyST.

The page is built from made-up study results here (the studies package's ``studies_synthetic``), with and without
the earlier team's kernels in the GQA study, so every claim branch those results reach is turned into text; a
LaTeX construct the page does not know is an error, never text on the page.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def val() -> ModuleType:
    return _load("kernbench_validation", ROOT / "docs" / "_ext" / "kernbench_validation.py")


@pytest.fixture(scope="module")
def synthetic() -> ModuleType:
    return _load("studies_synthetic", ROOT / "packages" / "kernbench-studies" / "tests" / "studies_synthetic.py")


def _no_latex(page: str) -> None:
    prose = re.sub(r"```.*?```", "", page, flags=re.S)  # figure directives hold paths, not LaTeX
    assert not re.search(r"\\[A-Za-z]|\$", prose), re.search(r".{60}(\\[A-Za-z]|\$).{60}", prose).group(0)


def test_latex_of_the_report_becomes_myst(val):
    values = {"kbX": r"5.0\,\%", "kbY": r"$-$3.2\,\textmu{}s", "seedZ": r"1.39\,$\times$", "kbClaim": r"\kbX{} or \kbY"}
    assert val.to_markdown(r"\kbClaim, against \seedZ{} (\texttt{ref\_ref})", values) == \
        "5.0 % or −3.2 µs, against 1.39 × (`ref_ref`)"
    assert val.to_markdown(r"on the same workloads (Section~\ref{sec:gqa})", values) == \
        "on the same workloads ([the GQA study](studies/gqa.md))"
    assert val.to_markdown(r"(Table~\ref{tab:gqa-ref-ops})", values, {"tab:gqa-ref-ops"}) == \
        "({ref}`the table on this page <validation-tab-gqa-ref-ops>`)"
    assert val.to_markdown(r"Figure~\ref{fig:gqa-reference}", values) == \
        "{ref}`the figure on its study page <fig-gqa-reference>`"


@pytest.mark.parametrize("latex", [r"\kbMissing", r"as in Equation~\ref{eq:dispatch}", r"\cite{earlier}",
                                   r"Section~\ref{sec:platform}"])
def test_latex_it_cannot_write_is_an_error(val, latex):
    with pytest.raises(val.UnknownLatex):
        val.to_markdown(latex, {"kbX": "1"})


def test_page_from_results_without_the_earlier_kernels(val, synthetic, monkeypatch):
    monkeypatch.delenv("KERNBENCH_EARLIER_KERNELS", raising=False)
    docs = {n: synthetic.synthetic_doc(n) for n in ("gemm", "allreduce", "gqa")}
    assert not any(p["params"].get("kernels") == "earlier" for p in docs["gqa"]["points"])
    page = val.validation_page(docs)
    _no_latex(page)
    for target in ("validation-gemm", "validation-allreduce", "validation-gqa", "validation-summary",
                   "validation-tab-gemm-model-error", "validation-tab-allreduce-fit",
                   "validation-tab-allreduce-differences", "validation-tab-gqa-ref-latency",
                   "validation-tab-gqa-ref-ops"):
        assert f"({target})=" in page, target
    assert "The earlier team's column is empty in this build" in page
    assert "KERNBENCH_EARLIER_KERNELS` was not set" in page
    for doc in docs.values():
        assert f"## {doc['title']}" in page


def test_page_from_results_with_the_earlier_kernels(val, synthetic, monkeypatch, tmp_path):
    from kernbench.studies import gqa_reference

    for w in gqa_reference.WORKLOADS:
        if w.kernel:
            (tmp_path / f"_gqa_attention_{w.kernel}.py").write_text(f"# {w.kernel}\n")
    monkeypatch.setenv("KERNBENCH_EARLIER_KERNELS", str(tmp_path))
    gqa = synthetic.synthetic_doc("gqa")
    assert any(p["params"].get("kernels") == "earlier" for p in gqa["points"])
    page = val.validation_page({"gqa": gqa})
    _no_latex(page)
    assert "column is empty" not in page
    assert "their kernels" in page
    assert "The gemm study has no results in this build" in page


def test_page_when_the_build_skips_the_studies(val):
    page = val.validation_page({}, "This docs build skipped the studies (KERNBENCH_DOCS_STUDIES=skip).")
    assert "skipped the studies" in page and "none is estimated" in page
    assert not re.search(r"\d", page.split("# Validation", 1)[1]), "a skipped page shows no number"
