"""What a newcomer reads: plugin warnings of ``kernbench list``, the labels and tables of ``kernbench run``, empty
parameter defaults, every probe case selectable by its printed name, and progress lines off a terminal (timed by a
fake clock, so the rate is checked exactly and nothing sleeps)."""

from __future__ import annotations

import io
import textwrap
import threading
import time
import types
import uuid
import warnings
from importlib import metadata
from pathlib import Path

import pytest

from kernbench.cli import run_cmd, study_cmd
from kernbench.cli.main import main
from kernbench.cli.probe import ProbeError, case_names, run_probe
from kernbench.cli.probe_tables import print_probe
from kernbench.cli.progress import LineTicker, Progress, announce, describe
from kernbench.runtime import DPPolicy
from kernbench.runtime import bench as bench_mod
from kernbench.runtime.bench import ENTRY_POINT_GROUP, BenchInfo, BenchRegistry, BenchResult
from kernbench.runtime.params import Param
from kernbench.topology import compile_spec, spec_from_dict


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_showwarning(monkeypatch):
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # main() replaces it


# --------------------------------------------------------------------------------------------- plugins


def test_kernbench_list_reports_an_entry_point_that_registers_nothing(tmp_path, monkeypatch, capsys):
    names = {}
    for key, init in (("empty", "def run(torch):\n    pass\n"),
                      ("good", """
                          from kernbench.runtime.bench import bench

                          @bench(name="fine", description="a bench in a package's __init__")
                          def run(torch):
                              pass
                      """)):
        names[key] = f"clipkg_{uuid.uuid4().hex[:8]}"
        (tmp_path / names[key]).mkdir()
        (tmp_path / names[key] / "__init__.py").write_text(textwrap.dedent(init))
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [metadata.EntryPoint(k, v, ENTRY_POINT_GROUP) for k, v in names.items()]
    monkeypatch.setattr(bench_mod, "metadata", types.SimpleNamespace(entry_points=lambda group: eps))
    assert main(["list"]) == 0
    out, err = capsys.readouterr()
    assert out == "  1  fine                     a bench in a package's __init__\n"
    empty = names["empty"]
    assert err == (f"kernbench: warning: bench plugin 'empty' (entry point empty = {empty} in group kernbench.benches) "
                   f"registers no bench and was skipped; decorate a run(torch) in {empty}'s __init__.py or one of "
                   f"its modules with @bench from kernbench.runtime.bench\n")


# --------------------------------------------------------------------------------------------- run output


def _result(metrics: dict, params: dict | None = None) -> BenchResult:
    return BenchResult("demo", True, None, 0, 4245.0, {"gemm": 1}, {}, {}, {}, metrics=metrics, params=params or {})


def test_the_header_latency_and_a_bench_metric_say_which_window_they_are(capsys):
    info = BenchInfo("demo", "d", lambda torch: None, __name__,
                     metric_notes=(("latency_ns", "the bench's own window: first PE start to last PE end"),))
    run_cmd._print(_result({"latency_ns": 1521.25, "pes_active": 8.0, "occupancy_ns.pe_math": 632.0}), info)
    assert capsys.readouterr().out.splitlines() == [
        "bench demo on device 0: latency 4,245.0 ns (op-log window of the whole run: first op start to last op end, "
        "deployment included)",
        "  ops: gemm 1",
        "  occupancy = time an engine was busy, summed over its PEs; wall = first start to last end",
        "  metrics (measured by the bench itself):",
        "    latency_ns                   1,521.2  (the bench's own window: first PE start to last PE end)",
        "    pes_active                   8",
        "    occupancy_ns.pe_math         632.0",
    ]


def test_metrics_per_part_are_one_table_row_per_part():
    metrics = {}
    for panel, (lat, pes, gemm, dma, cpu) in {"prefill_c1": (1256.9, 1, 3, 287.2, 1256.9),
                                              "decode_c4_p8": (1846.3, 64, 192, 12966.9, 55764.9)}.items():
        metrics.update({f"{panel}.latency_ns": lat, f"{panel}.pes_active": float(pes), f"{panel}.op.gemm": float(gemm),
                        f"{panel}.occupancy_ns.pe_dma": dma, f"{panel}.occupancy_ns.pe_cpu": cpu})
    notes = {"latency_ns": "each panel's own window"}
    assert run_cmd.metric_lines(metrics, notes, "panel") == [
        "  metrics (measured by the bench itself, one row per panel):",
        "    panel           latency_ns  pes_active",  # the label column: the longest label + 2
        "    prefill_c1         1,256.9           1",
        "    decode_c4_p8       1,846.3          64",
        "    op.*            gemm",
        "    prefill_c1         3",
        "    decode_c4_p8     192",
        "    occupancy_ns.*    pe_dma    pe_cpu",
        "    prefill_c1         287.2   1,256.9",
        "    decode_c4_p8    12,966.9  55,764.9",
        "    latency_ns: each panel's own window",
    ]
    # without a declared row word the same metrics stay one per line
    assert run_cmd.metric_lines({"prefill_c1.op.gemm": 3.0})[1] == "    prefill_c1.op.gemm           3"


def test_gqa_headline_declares_its_panel_table_and_gqa_decode_its_window():
    from kernbench.benches import gqa_decode, gqa_headline

    (decode,) = bench_mod._benches_of(gqa_decode)
    (headline,) = bench_mod._benches_of(gqa_headline)
    assert dict(decode.metric_notes) == {
        "latency_ns": "the bench's own window: first PE start to last PE end of the attention launches"}
    assert headline.metric_rows == "panel" and dict(headline.metric_notes) == {
        "latency_ns": "each panel's own window: first PE start to last PE end of the panel's launches"}


EMPTY = Param("ALGORITHM", str, "", "an algorithm entry of ccl.yaml (empty: its defaults.algorithm)",
              env="CCL_ALGORITHM")


def test_an_empty_text_default_is_shown_as_empty_quotes(capsys):
    assert EMPTY.describe() == ('ALGORITHM      a text; default "" (empty). an algorithm entry of ccl.yaml (empty: its '
                                'defaults.algorithm)  [env CCL_ALGORITHM]')
    run_cmd._print(_result({}, {"BYTES": 65536, "ALGORITHM": ""}))
    assert capsys.readouterr().out.splitlines()[1] == '  parameters: BYTES=65536, ALGORITHM=""'
    assert run_cmd.shown_value("ring") == "ring" and run_cmd.shown_value(0) == "0"


def _noted(torch, p):
    torch.zeros((4, 64), "float16", DPPolicy(num_cubes=1, num_pes=1))
    torch.report_metric("latency_ns", 12.5)


def test_kernbench_run_prints_the_notes_the_bench_declared(monkeypatch, capsys):
    info = BenchInfo("noted", "a bench with a note", _noted, __name__, (EMPTY,),
                     metric_notes=(("latency_ns", "its own window"),))
    graph = compile_spec(spec_from_dict({"system": {"sips": {"count": 1, "grid": [1, 1]}},
                                         "sip": {"cube_mesh": {"w": 2, "h": 2}}}))
    monkeypatch.setattr(run_cmd, "discover", lambda: BenchRegistry([info]))
    monkeypatch.setattr(run_cmd, "load_graph", lambda arg: graph)
    monkeypatch.delenv("CCL_ALGORITHM", raising=False)
    assert main(["run", "--bench", "noted"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bench noted on device 0: latency ")
    assert out[0].endswith(" ns (op-log window of the whole run: first op start to last op end, deployment included)")
    assert out[1] == '  parameters: ALGORITHM=""'
    assert out[-2:] == ["  metrics (measured by the bench itself):",
                        "    latency_ns                   12.5  (its own window)"]
    assert main(["list", "--params"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "       -p " + EMPTY.describe()


# --------------------------------------------------------------------------------------------- probe cases


@pytest.fixture(scope="module")
def small_graph():
    return compile_spec(spec_from_dict({"system": {"sips": {"count": 1, "grid": [1, 1]}},
                                        "sip": {"cube_mesh": {"w": 2, "h": 2}}}))


def test_every_case_name_the_probe_prints_is_a_valid_case(small_graph, capsys):
    print_probe(run_probe(small_graph, sweep=False))
    table = capsys.readouterr().out.split("\ninvariants:")[0].splitlines()[2:]  # after the title and the header
    printed = [line.split()[0] for line in table]
    assert "contention-1flow" in printed and printed == case_names(small_graph)
    for name in printed:
        assert name in [c.name for c in run_probe(small_graph, name, sweep=False).cases], name


def test_the_lone_contention_flow_alone(small_graph):
    result = run_probe(small_graph, "contention-1flow", sweep=False)
    (lone,) = result.cases
    assert (lone.name, lone.category, lone.flows) == ("contention-1flow", "contention", [])
    assert [i["name"] for i in result.invariants] == ["single-flow cases within 2% of the formula"]
    assert result.all_pass
    both = run_probe(small_graph, "contention-2flows", sweep=False)
    assert [c.name for c in both.cases] == ["contention-1flow", "contention-2flows"]
    assert both.cases[0] == lone  # the same lone flow, whichever case asked for it


def test_kernbench_probe_case_contention_1flow(small_graph, monkeypatch, capsys):
    monkeypatch.setattr("kernbench.cli.topology_loader.load_graph", lambda arg: small_graph)
    assert main(["probe", "--case", "contention-1flow", "--strict"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("contention-1flow ") and out[3] == "invariants:"
    with pytest.raises(ProbeError, match=r"valid cases: .*, pe-cross-cube-hbm-worst, contention-1flow, "
                                         r"contention-2flows, contention-4flows$"):
        run_probe(small_graph, "contention-3flows", sweep=False)


# --------------------------------------------------------------------------------------------- progress lines


class _Engine:
    def __init__(self, now: float, events: int) -> None:
        self.now, self.events = now, events


def test_run_progress_off_a_terminal_writes_lines_at_most_every_five_seconds():
    clock, out = FakeClock(), io.StringIO()
    p = Progress("gemm on device 0", stream=out, clock=clock)
    assert not p.enabled  # not a terminal: no live line
    p.start()
    p.watch(_Engine(1.5e6, 10_000))
    wrote = []
    for t in (0.0, 1.0, 4.9, 5.0, 5.1, 9.9, 10.0, 10.5, 14.99, 16.0):
        clock.t = 100.0 + t
        if p.poll():
            wrote.append(t)
    assert wrote == [5.0, 10.0, 16.0]
    clock.t = 117.0
    p.finish()
    assert out.getvalue().splitlines() == [
        describe("gemm on device 0", 1.5e6, 10_000, 5.0),
        describe("gemm on device 0", 1.5e6, 10_000, 10.0),
        describe("gemm on device 0", 1.5e6, 10_000, 16.0),
        describe("gemm on device 0", 1.5e6, 10_000, 17.0) + "; ended after 17.0 s",
    ]
    assert out.getvalue().splitlines()[0] == "gemm on device 0: simulated 1.50 ms, 10,000 events, 2,000 events/s"


def test_a_run_that_printed_no_line_ends_silently_and_a_terminal_gets_no_plain_lines():
    clock, out = FakeClock(), io.StringIO()
    p = Progress("quick", stream=out, clock=clock)
    p.start()
    p.watch(_Engine(10.0, 3))
    clock.t += 4.0
    assert not p.poll()
    p.finish()
    assert out.getvalue() == ""
    tty = _Tty()
    live = Progress("live", stream=tty, clock=clock)
    live.start()
    live.watch(_Engine(10.0, 3))
    clock.t += 60.0
    assert live.enabled and live.lines is None and not live.poll() and tty.getvalue() == ""


def test_the_progress_thread_writes_lines_off_a_terminal():
    out = io.StringIO()
    with Progress("threaded", stream=out, every_s=0.05, period_s=0.01) as p:
        p.watch(_Engine(1.0, 1))
        deadline = time.monotonic() + 5
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("threaded: simulated 1.0 ns, 1 events, ") for line in lines)
    assert lines[-1].split("; ")[-1].startswith("ended after ")
    assert not any(t.name == "kernbench-progress" for t in threading.enumerate())


def test_line_ticker_rate_and_stage_lines():
    clock, out = FakeClock(0.0), io.StringIO()
    ticker = LineTicker(out, every_s=3.0, clock=clock)
    for t, text in ((1.0, "a"), (3.0, "b"), (4.0, "c"), (5.0, "stage")):
        clock.t = t
        ticker.stage(text) if text == "stage" else ticker.tick(text)
    for t in (7.9, 8.0):
        clock.t = t
        ticker.tick(lambda t=t: f"at {t}")  # computed only when due
    assert out.getvalue().splitlines() == ["b", "stage", "at 8.0"] and ticker.lines == 3
    err = io.StringIO()
    announce("drawing", err)
    assert err.getvalue() == "drawing\n"


def test_study_figures_are_announced_with_their_time(tmp_path, monkeypatch):
    from kernbench.studies import figures, results

    clock = FakeClock(0.0)

    def render(doc, folder, topology_dir):
        clock.t += 7.25
        return [folder / f"{doc}.{ext}" for ext in ("pdf", "svg")]

    monkeypatch.setattr(figures, "render_study", render)
    monkeypatch.setattr(results, "load", lambda path: Path(path).parent.name)
    runs = [types.SimpleNamespace(study=s, results=tmp_path / s / "results.json") for s in ("gemm", "gqa")]
    err = io.StringIO()
    assert study_cmd.draw_figures(runs, tmp_path, err, clock) == 4
    assert err.getvalue().splitlines() == [
        f"gemm: drawing figures into {tmp_path / 'gemm' / 'figures'}",
        "gemm: 2 figure files in 7.2 s",
        f"gqa: drawing figures into {tmp_path / 'gqa' / 'figures'}",
        "gqa: 2 figure files in 7.2 s",
    ]


def test_the_report_command_announces_its_long_stages(tmp_path, monkeypatch, capsys):
    from kernbench.studies import results
    from kernbench.studies.report import build

    loaded = []
    gen = types.SimpleNamespace(main=tmp_path / "r" / "tex" / "main.tex", numbers=types.SimpleNamespace(items=[1, 2]))
    monkeypatch.setattr(results, "load", loaded.append)
    monkeypatch.setattr(build, "generate", lambda *a, **kw: gen)
    monkeypatch.setattr(build, "latexmk", lambda *a, **kw: "latexmk")
    monkeypatch.setattr(build, "build_pdf", lambda g, out, *a, **kw: Path(out) / "build" / "report.pdf")
    monkeypatch.setattr(build, "pdf_stats", lambda *a, **kw: build.PdfStats(27, 18, 10))
    out = tmp_path / "r"
    assert main(["report", "--studies", str(tmp_path / "s"), "--out", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    assert stderr.splitlines() == [f"report: drawing figures and writing the generated LaTeX into {out / 'tex'}",
                                   f"report: running latexmk into {out / 'build'}"]
    assert stdout.startswith(f"report: {out / 'build' / 'report.pdf'} (27 pages, 18 figures, 10 tables, 2 numbers)")
    assert loaded == [tmp_path / "s" / name / "results.json" for name in ("gemm", "allreduce", "gqa", "moe")]
