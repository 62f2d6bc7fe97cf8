"""Benchmark scripts write their results under out/benchmarks/ unless asked to update the committed
benchmarks/results/ (which the README and docs quote and some tests read)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
#: Every script that writes a JSON result, and the file name it writes.
RESULTS = {"bench_ab.py": "ab.json", "bench_allreduce.py": "allreduce.json", "bench_attention.py": "attention.json",
           "bench_budgets.py": "budgets.json", "bench_fabric.py": "fabric.json", "bench_fidelity.py": "fidelity.json",
           "bench_kernels.py": "kernels.json",
           "bench_oplog.py": "oplog.json", "bench_studies.py": "studies.json", "bench_web.py": "web.json"}


@pytest.fixture
def bench(monkeypatch, tmp_path):
    """Load a benchmark script by file name as a module, with ``_output``'s folders pointed into ``tmp_path``."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("_output", "bench_fabric"):  # fresh copies, so the patched folders are the ones the script sees
        monkeypatch.delitem(sys.modules, name, raising=False)
    import _output

    monkeypatch.setattr(_output, "SCRATCH", tmp_path / "scratch")
    monkeypatch.setattr(_output, "COMMITTED", tmp_path / "committed")

    def load(script: str):
        spec = importlib.util.spec_from_file_location(f"kb_bench_{script[:-3]}", BENCHMARKS / script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def test_the_list_names_every_script_that_writes_a_result():
    writers = {p.name for p in BENCHMARKS.glob("*.py") if "write_result(" in p.read_text()} - {"_output.py"}
    assert writers == set(RESULTS)
    for name in RESULTS:
        assert '/ "results"' not in (BENCHMARKS / name).read_text(), f"{name} builds a benchmarks/results path itself"


@pytest.mark.parametrize("script", sorted(RESULTS))
def test_every_script_offers_out_and_update_committed(bench, script):
    module = bench(script)
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        module.main(["--help"])
    help_text = " ".join(text.getvalue().split())
    assert "--out FILE" in help_text and f"default: out/benchmarks/{RESULTS[script]}" in help_text
    assert f"--update-committed write benchmarks/results/{RESULTS[script]}" in help_text


def test_a_run_writes_under_out_and_only_updates_the_committed_file_when_asked(bench, tmp_path, monkeypatch):
    oplog = bench("bench_oplog.py")
    # a made-up record mix instead of two bench runs: what is measured here is where the result goes
    monkeypatch.setattr(oplog, "sample_records", lambda: [(0.0, 1.0, "sip0.cube0.pe0.pe_dma", "dma", "read",
                                                          (("nbytes", 4096),))])
    committed = tmp_path / "committed" / "oplog.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert oplog.main(["--records", "50", "--no-baseline"]) == 0
    assert json.loads((tmp_path / "scratch" / "oplog.json").read_text())["columnar"]["records"] == 50
    assert not committed.exists()
    with contextlib.redirect_stdout(io.StringIO()):
        assert oplog.main(["--records", "60", "--no-baseline", "--update-committed"]) == 0
    assert json.loads(committed.read_text())["columnar"]["records"] == 60
    elsewhere = tmp_path / "elsewhere" / "x.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert oplog.main(["--records", "70", "--no-baseline", "--out", str(elsewhere)]) == 0
    assert json.loads(elsewhere.read_text())["columnar"]["records"] == 70
    assert json.loads(committed.read_text())["columnar"]["records"] == 60
