"""A newcomer's first commands, end to end: every probe case name is selectable, `kernbench run` labels its two
latencies and tables gqa-headline's panels, a study run logs progress lines when stderr is not a terminal, and
`nox -s demo` says what it is doing before each step."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_probe_accepts_every_case_it_prints(cli):
    listed = cli("probe", "--case", "nosuch")
    names = listed.stderr.strip().split("valid cases: ")[1].split(", ")
    assert "contention-1flow" in names
    table = cli("probe")
    assert table.returncode == 0, table.stderr
    printed = [line.split()[0] for line in table.stdout.split("\ninvariants:")[0].splitlines()[2:]]
    assert printed == names  # the table prints every valid name, in the same order
    lone = cli("probe", "--case", "contention-1flow", "--json", "--strict")
    assert lone.returncode == 0, lone.stderr
    assert [c["name"] for c in json.loads(lone.stdout)["cases"]] == ["contention-1flow"]


def test_gqa_headline_prints_one_table_row_per_panel(cli):
    proc = cli("run", "--bench", "gqa-headline")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith(" ns (op-log window of the whole run: first op start to last op end, deployment "
                             "included)")
    start = lines.index("  metrics (measured by the bench itself, one row per panel):")
    block = lines[start + 1:start + 16]
    assert [line.split()[0] for line in block] == ["panel", *PANELS, "op.*", *PANELS, "occupancy_ns.*", *PANELS]
    assert block[0].split() == ["panel", "latency_ns", "pes_active", "ipcq_intra_cube", "ipcq_inter_cube", "kv_bytes"]
    assert block[5].split() == ["op.*", "gemm", "math", "dma_read", "dma_write", "ipcq_copy"]
    assert lines[start + 16] == ("    latency_ns: each panel's own window: first PE start to last PE end of the "
                                 "panel's launches")
    assert len(lines) < 40  # it printed about 80 lines before


PANELS = ["prefill_c1", "prefill_c4_ring", "decode_c1_p8", "decode_c4_p8"]


def test_a_study_run_logs_progress_lines_off_a_terminal(tmp_path):
    env = {**os.environ, "KERNBENCH_CACHE_DIR": str(tmp_path / "cache")}
    where = ("--where", "series=tiles", "--where", "variant=load_load", "--where", "k_tiles=1,2")
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "study", "gemm", *where, "--jobs", "1",
                           "--executor", "serial", "--out", str(tmp_path / "gemm")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    first, *middle, last = proc.stderr.splitlines()
    assert first == "gemm: 2 points to run"
    assert all(re.fullmatch(r"gemm: 1/2 points \(50%\), \d+\.\d s", line) for line in middle), middle  # a slow point
    assert re.fullmatch(r"gemm: all points done in \d+\.\d s", last), last


def _noxfile(monkeypatch):
    """noxfile.py imported over a stub ``nox`` (its decorators return the functions as they are)."""
    stub = types.ModuleType("nox")
    stub.options = types.SimpleNamespace()
    stub.session = lambda fn=None, **kw: fn if fn is not None else (lambda f: f)
    stub.parametrize = lambda *a, **kw: (lambda f: f)
    stub.Session = object
    monkeypatch.setitem(sys.modules, "nox", stub)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Session:
    """Records what a nox session does, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def log(self, text: str) -> None:
        self.calls.append(("log", text))

    def install(self, *args: str, **kwargs) -> None:
        self.calls.append(("install", kwargs.get("silent")))

    def run(self, *args: str, **kwargs) -> str | None:
        self.calls.append(("run", " ".join(args)))
        return "True" if "find_spec" in " ".join(args) else None  # the compiled add-on imports

    def warn(self, text: str) -> None:
        self.calls.append(("warn", text))

    def error(self, text: str) -> None:
        raise RuntimeError(text)


def test_the_demo_says_what_it_does_before_each_step(monkeypatch):
    monkeypatch.delenv("KERNBENCH_REQUIRE_ACCEL", raising=False)
    session = _Session()
    _noxfile(monkeypatch).demo(session)
    assert session.calls == [
        ("log", "demo 1/4: installing the 8 kernbench packages and their dependencies (numpy, simpy, matplotlib, ...) "
                "into this session's virtual environment, and the compiled event calendar where a C compiler is "
                "found; the first time this can take a few minutes and prints nothing until it is done"),
        ("install", True),  # the install itself stays quiet
        ("install", True),  # and so does the compiled calendar's
        ("run", "python -c import importlib.util as u; print(u.find_spec('kernbench.accel._calendar') is not None)"),
        ("log", "demo 2/4: compiling the default topology and writing its four diagrams to out/diagrams/"),
        ("run", "kernbench topology --diagrams out/diagrams"),
        ("log", "demo 3/4: running the probe (host and PE-DMA transfers against their formula, then its invariants)"),
        ("run", "kernbench probe --strict"),
        ("log", "demo 4/4: running the matmul-composite bench (a 512x512x512 GEMM on one PE) and writing its trace "
                "to out/matmul-composite.trace.json"),
        ("run", "kernbench run --bench matmul-composite --trace out/"),
        ("log", "next: kernbench list --params | kernbench run --bench gqa-headline | nox -s report"),
    ]


class _NoCompilerSession(_Session):
    """A machine where the compiled add-on does not build: its import check prints False."""

    def run(self, *args: str, **kwargs) -> str | None:
        super().run(*args, **kwargs)
        return "False" if "find_spec" in " ".join(args) else None


def test_the_demo_goes_on_with_a_warning_where_the_compiled_calendar_does_not_build(monkeypatch):
    monkeypatch.delenv("KERNBENCH_REQUIRE_ACCEL", raising=False)
    session = _NoCompilerSession()
    _noxfile(monkeypatch).demo(session)
    warnings = [text for kind, text in session.calls if kind == "warn"]
    assert len(warnings) == 1 and "kernbench-accel did not build" in warnings[0] and "same results" in warnings[0]
    assert ("run", "kernbench probe --strict") in session.calls  # the demo went on


def test_ci_fails_where_the_compiled_calendar_does_not_build(monkeypatch):
    monkeypatch.setenv("KERNBENCH_REQUIRE_ACCEL", "1")
    with pytest.raises(RuntimeError, match="kernbench-accel did not build or import"):
        _noxfile(monkeypatch).demo(_NoCompilerSession())
