"""The bad-input catalogue (issue 12, docs/reliability.md): every command line in it gives the exit status and the
one line of stderr the page shows, the page is current, and every Python-API entry names a test that asserts it.

Regenerate the page after a message changes: ``python tests/reliability/catalogue.py --write``.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("catalogue", ROOT / "tests" / "reliability" / "catalogue.py")
catalogue = importlib.util.module_from_spec(_SPEC)
sys.modules["catalogue"] = catalogue
_SPEC.loader.exec_module(catalogue)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every command line of the catalogue, run once in-process."""
    return catalogue.run_all(tmp_path_factory.mktemp("reliability"))


@pytest.mark.parametrize("case", catalogue.CLI_CASES, ids=lambda c: c.id)
def test_cli_case(outcomes, case):
    got = outcomes[case.id]
    assert got.code == case.code, got.stderr
    if case.lines >= 0:
        assert len(got.lines) == case.lines, got.stderr
    if case.code == 2:
        assert got.lines[-1].startswith("kernbench: error: "), got.stderr
    assert case.expect.replace("{tmp}", catalogue.TMP) in got.shown, got.stderr
    assert "Traceback" not in got.stderr or case.argv[0] == "--debug"


def test_debug_shows_the_traceback_of_a_failed_bench(outcomes):
    err = outcomes["run-debug-traceback"].stderr
    assert "Traceback (most recent call last)" in err and 'raise BenchError(f"BYTES={nbytes} must be even' in err
    assert err.rstrip().endswith("kernbench: error: BenchError: BYTES=3 must be even (f16 values)")


def test_trace_to_a_folder_writes_bench_trace_json(tmp_path):
    out = catalogue.run_case(catalogue.CliCase("trace-folder", "", "", ("run", "--bench", "gemm-single-pe",
                                                                        "--json", "--trace", "{tmp}"), "", 0),
                             tmp_path)
    assert out.code == 0 and (tmp_path / "trace-folder" / "gemm-single-pe.trace.json").stat().st_size > 0


def test_broken_pipe_exits_quietly():
    """``kernbench list | head -c1``: the reader goes away; kernbench says (nothing) and exits 141."""
    proc = subprocess.Popen([sys.executable, "-m", "kernbench.cli.main", "list", "--params"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # before the interpreter has even started writing
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == b""


def test_the_page_is_current(outcomes):
    page = catalogue.render(outcomes)
    assert catalogue.PAGE.read_text() == page, "docs/reliability.md is stale: python tests/reliability/catalogue.py " \
                                               "--write"


def test_the_catalogue_has_at_least_60_cases():
    assert catalogue.count() >= 60
    ids = [c.id for c in (*catalogue.CLI_CASES, *catalogue.API_CASES)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", catalogue.API_CASES, ids=lambda c: c.id)
def test_api_case_names_a_test_that_asserts_it(case):
    path, _, name = case.test.partition("::")
    source = (ROOT / path).read_text()
    function = re.sub(r"\[.*\]$", "", name)
    assert re.search(rf"^def {re.escape(function)}\(", source, re.M), f"{case.test} does not exist"
    assert case.sees in source, f"{case.test} does not assert {case.sees!r}"


def test_the_page_is_in_the_docs_toctree():
    assert re.search(r"^reliability$", (ROOT / "docs" / "index.md").read_text(), re.M)
