"""The command line's own logic, in process: argument parsing, ``-p NAME=VALUE``, budget options, devices, output
paths, progress text, the probe table, and the error contract (one ``kernbench: error:`` line, exit status 2).

Benches come from a registry of fake benches defined here and topologies are compiled from tiny specs, so these
tests depend on neither the shipped benches nor the repository's topology files."""

from __future__ import annotations

import io
import os
import threading
import time
import warnings
from pathlib import Path

import pytest

from kernbench.cli import main as cli_main
from kernbench.cli import run_cmd
from kernbench.cli.main import _environment_error, _parser, main
from kernbench.cli.paths import OutputPathError, output_dir, output_file
from kernbench.cli.probe import CaseResult, ProbeResult
from kernbench.cli.probe_tables import _size, print_probe
from kernbench.cli.progress import Progress, _fmt_ns, describe
from kernbench.cli.run_cmd import _devices, limits_from, run_list, trace_path
from kernbench.cli.study_cmd import _describe, topology_dir
from kernbench.runtime import DPPolicy
from kernbench.runtime.bench import BenchError, BenchInfo, BenchRegistry
from kernbench.runtime.params import Param
from kernbench.sim import BudgetError, Limits
from kernbench.topology import compile_spec, spec_from_dict

# --------------------------------------------------------------------------------------------- fake benches

SEEN: list[dict] = []  # the parameters every fake bench run received


def _fills_one_tensor(torch, p=None):
    SEEN.append(dict(p) if p is not None else {})
    torch.zeros((4, 64), "float16", DPPolicy(num_cubes=1, num_pes=1))


def _does_nothing(torch):
    SEEN.append({})


PARAMS = (Param("M", int, 8, "rows", lo=1, hi=64, env="FAKE_M"),
          Param("MODE", str, "a", "how", choices=("a", "b")),
          Param("SCALE", float, 1.0, "factor", lo=0.5, unit="x"))
BENCHES = [BenchInfo("beta", "the second fake bench", _does_nothing, __name__),
           BenchInfo("alpha", "the first fake bench", _fills_one_tensor, __name__, PARAMS)]


@pytest.fixture(scope="module")
def two_sip_graph():
    return compile_spec(spec_from_dict({"system": {"sips": {"count": 2, "grid": [2, 1]}},
                                        "sip": {"cube_mesh": {"w": 2, "h": 2}}}))


@pytest.fixture
def cli(monkeypatch, two_sip_graph):
    """``main(argv)`` over the fake benches and the two-SIP graph; returns the exit status."""
    monkeypatch.setattr(run_cmd, "discover", lambda: BenchRegistry(list(BENCHES)))
    monkeypatch.setattr(run_cmd, "load_graph", lambda arg: two_sip_graph)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # main() replaces it; restore it after
    monkeypatch.delenv("FAKE_M", raising=False)
    SEEN.clear()
    return lambda *argv: main(list(argv))


def _one_error(capsys, status: int, want: str, code: int = 2) -> None:
    err = capsys.readouterr().err
    assert status == code
    assert err == f"kernbench: error: {want}\n", err


# --------------------------------------------------------------------------------------------- the parser


def test_run_options_and_their_defaults():
    args = _parser().parse_args(["run", "--bench", "alpha", "-p", "M=1", "--param", "MODE=b"])
    assert args.params == ["M=1", "MODE=b"]  # repeatable, in order, left as text for the bench to parse
    assert (args.device, args.data, args.json, args.trace, args.links, args.links_top) == ("0", False, False,
                                                                                           None, None, 0)
    # The budget defaults are text, parsed by limits_from exactly like a user's value.
    assert (args.max_events, args.max_sim_ns, args.timeout, args.max_records) == ("200000000", "10000000000", "600",
                                                                                  "10000000")
    assert limits_from(args.max_events, args.max_sim_ns, args.timeout, args.max_records) == \
        Limits(200_000_000, 1e10, 600.0, 10_000_000)
    assert args.debug is False
    assert _parser().parse_args(["run", "--bench", "alpha", "--debug"]).debug is True  # --debug after the command


@pytest.mark.parametrize(("argv", "params"), [(["list"], None), (["list", "--params"], ""),
                                              (["list", "--params", "alpha"], "alpha")])
def test_list_params_is_optional_with_an_optional_value(argv, params):
    assert _parser().parse_args(argv).params == params


def test_a_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(["run"])  # --bench is required
    assert info.value.code == 2 and "the following arguments are required: --bench" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- budgets


def test_limits_from_parses_numbers_and_none():
    assert limits_from("1e3", "2.5", "none", "100") == Limits(1000, 2.5, None, 100)
    assert limits_from("1", "1e-9", "0.25", "1") == Limits(1, 1e-9, 0.25, 1)  # the smallest values allowed
    assert limits_from("NONE", " None ", "none", "none") == Limits(None, None, None, None)
    limits = limits_from("7.0", "3", "4", "5.0")
    assert type(limits.max_events) is int and type(limits.max_records) is int and type(limits.max_sim_ns) is float


@pytest.mark.parametrize(("args", "option", "text", "kind"), [
    (("0", "1", "1"), "--max-events", "0", "a positive integer"),
    (("1.5", "1", "1"), "--max-events", "1.5", "a positive integer"),
    (("-3", "1", "1"), "--max-events", "-3", "a positive integer"),
    (("lots", "1", "1"), "--max-events", "lots", "a positive integer"),
    (("inf", "1", "1"), "--max-events", "inf", "a positive integer"),
    (("1", "0", "1"), "--max-sim-ns", "0", "a positive number"),
    (("1", "nan", "1"), "--max-sim-ns", "nan", "a positive number"),
    (("1", "inf", "1"), "--max-sim-ns", "inf", "a positive number"),
    (("1", "1", "-0.5"), "--timeout", "-0.5", "a positive number"),
    (("1", "1", "1", "2.5"), "--max-records", "2.5", "a positive integer"),
    (("1", "1", "1", ""), "--max-records", "", "a positive integer"),
])
def test_limits_from_refuses_bad_values_naming_the_option(args, option, text, kind):
    with pytest.raises(BudgetError) as info:
        limits_from(*args)
    assert str(info.value) == f"{option} {text!r} is invalid; expected {kind}, or 'none' for no limit"


def test_a_huge_bad_budget_is_quoted_to_80_characters():
    with pytest.raises(BudgetError) as info:
        limits_from("9" * 200 + "x", "1", "1")
    assert str(info.value) == (f"--max-events {'9' * 80!r} is invalid; expected a positive integer, or 'none' for "
                               f"no limit")


# --------------------------------------------------------------------------------------------- devices


def test_devices():
    assert _devices("all", 3) == [0, 1, 2]
    assert _devices("0", 3) == [0] and _devices("2", 3) == [2] and _devices("007", 8) == [7]


@pytest.mark.parametrize("arg", ["3", "-1", "1.0", " 1", "", "ALL", "\u0661"])  # U+0661: an Arabic-Indic one
def test_bad_devices(arg):
    with pytest.raises(BenchError) as info:
        _devices(arg, 3)
    assert str(info.value) == f"--device {arg!r} is invalid; use a SIP index 0..2 or 'all'"


# --------------------------------------------------------------------------------------------- output paths


def test_output_file_in_an_existing_folder_is_checked_without_leaving_a_file(tmp_path):
    assert output_file(tmp_path / "a.json", "--links") == tmp_path / "a.json"
    assert list(tmp_path.iterdir()) == []  # the writability probe removed what it created


def test_output_file_keeps_an_existing_file(tmp_path):
    p = tmp_path / "keep.json"
    p.write_bytes(b"old content")
    assert output_file(str(p), "--links") == p and p.read_bytes() == b"old content"


def test_output_file_errors(tmp_path):
    (tmp_path / "f").write_text("x")
    cases = [
        (tmp_path, f"--links {tmp_path}: is a folder; give a file name inside it"),
        (tmp_path / "f" / "x.json", f"--links {tmp_path / 'f' / 'x.json'}: {tmp_path / 'f'} is a file, not a folder; "
                                    f"choose another path"),
        (tmp_path / "no" / "x.json", f"--links {tmp_path / 'no' / 'x.json'}: folder {tmp_path / 'no'} does not exist; "
                                     f"create it or choose another path"),
    ]
    if Path("/proc").is_dir():  # a folder no one, not even root, can create a file in (permission bits say yes)
        cases.append(("/proc/kernbench-unit.json", "--links /proc/kernbench-unit.json: cannot be written ("))
    for path, want in cases:
        with pytest.raises(OutputPathError) as info:
            output_file(path, "--links")
        assert str(info.value).startswith(want), str(info.value)
    assert not (tmp_path / "no").exists()  # without parents=True nothing is created


def test_output_file_with_parents_creates_the_folders_only(tmp_path):
    target = tmp_path / "a" / "b" / "links.json"
    assert output_file(target, "--links", parents=True) == target
    assert target.parent.is_dir() and not target.exists()


def test_output_file_with_parents_under_a_file_names_the_file_option(tmp_path):
    (tmp_path / "f").write_text("x")
    target = tmp_path / "f" / "sub" / "h.svg"
    with pytest.raises(OutputPathError) as info:
        output_file(target, "--heatmap", parents=True)
    assert str(info.value) == f"--heatmap {target}: {tmp_path / 'f'} is a file, so the folder cannot be created there"


def test_output_dir(tmp_path):
    deep = tmp_path / "x" / "y" / "z"
    assert output_dir(deep, "--out") == deep and deep.is_dir() and list(deep.iterdir()) == []
    assert output_dir(str(deep), "--out") == deep  # an existing folder is fine
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputPathError) as info:
        output_dir(tmp_path / "f", "--out")
    assert str(info.value) == f"--out {tmp_path / 'f'}: is a file, not a folder; give a folder (it is created if " \
                              f"missing)"
    with pytest.raises(OutputPathError) as info:
        output_dir(tmp_path / "f" / "g", "--diagrams")
    assert str(info.value) == (f"--diagrams {tmp_path / 'f' / 'g'}: {tmp_path / 'f'} is a file, so the folder cannot "
                               f"be created there")


def test_trace_path(tmp_path):
    assert trace_path(str(tmp_path), "alpha") == tmp_path / "alpha.trace.json"  # a folder: <bench>.trace.json
    assert trace_path(str(tmp_path / "t.json"), "alpha") == tmp_path / "t.json"  # a file: itself
    sub = tmp_path / "sub"
    sub.mkdir()
    assert trace_path(f"{sub}{os.sep}", "beta") == sub / "beta.trace.json"
    assert list(sub.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["sub"]
    # Missing folders are created, as for every output (a trailing separator names a folder).
    assert trace_path(f"{tmp_path / 'new'}{os.sep}", "alpha") == tmp_path / "new" / "alpha.trace.json"
    assert trace_path(str(tmp_path / "new2" / "t.json"), "alpha") == tmp_path / "new2" / "t.json"
    assert (tmp_path / "new").is_dir() and (tmp_path / "new2").is_dir() and list((tmp_path / "new").iterdir()) == []


# --------------------------------------------------------------------------------------------- progress


@pytest.mark.parametrize(("ns", "text"), [(0.0, "0.0 ns"), (999.94, "999.9 ns"), (1000.0, "1.00 µs"),
                                          (999_994.0, "999.99 µs"), (1e6, "1.00 ms"), (2.5e8, "250.00 ms"),
                                          (1e9, "1.00 s"), (7.25e10, "72.50 s")])
def test_simulated_time_units(ns, text):
    assert _fmt_ns(ns) == text


def test_progress_text():
    assert describe("gemm on device 0", 1.5e6, 12_346, 2.0) == \
        "gemm on device 0: simulated 1.50 ms, 12,346 events, 6,173 events/s"
    assert describe("x", 12.0, 5, 0.0) == "x: simulated 12.0 ns, 5 events, 0 events/s"  # no division by zero


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_line_only_on_a_terminal_and_a_short_run_is_silent_elsewhere():
    quiet = io.StringIO()
    with Progress("run", after_s=0.0, stream=quiet) as p:  # plain lines instead, none due within 5 s
        time.sleep(0.05)
    assert not p.enabled and not p.shown and p.lines is not None and quiet.getvalue() == ""
    assert Progress("run", stream=_Tty()).enabled and Progress("run", stream=io.StringIO(), force=True).enabled


def test_progress_waits_before_showing_and_clears_its_line():
    short = _Tty()
    with Progress("run", after_s=60.0, stream=short) as p:
        pass  # a run shorter than after_s shows nothing at all
    assert not p.shown and short.getvalue() == ""
    long = io.StringIO()
    with Progress("run", after_s=0.0, period_s=0.01, stream=long, force=True) as p:
        p.watch(type("Engine", (), {"now": 5.0, "events": 3})())
        deadline = time.monotonic() + 5
        while not p.shown and time.monotonic() < deadline:
            time.sleep(0.01)
    assert p.shown and long.getvalue().endswith("\r\x1b[K")  # the line is erased when the run ends
    assert not any(t.name == "kernbench-progress" for t in threading.enumerate())


# --------------------------------------------------------------------------------------------- probe table


def test_payload_sizes():
    assert [_size(n) for n in (1024, 65536, 1048575, 1048576, 3 * 1048576)] == ["1KiB", "64KiB", "1023KiB", "1MiB",
                                                                                "3MiB"]


def test_probe_table(capsys):
    case = CaseResult("h2d-1hop", "h2d", 123.4, 14.0, 1.2, 2.0, 106.2, 123.4, 64.0, 33.3, 52.1, 3, ["a", "b"])
    result = ProbeResult(32768, [case], [], [{"name": "monotone", "pass": True, "detail": "ok"},
                                             {"name": "bounded", "pass": False, "detail": "2 > 1"}])
    print_probe(result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "kernbench probe: 32768 bytes per case; formula = overhead + wire + fill + drain (ns)"
    assert lines[1] == ("case" + " " * 20 + "  actual ns formula ns  ovhd ns  wire ns  fill ns  drain ns  BN GB/s "
                        "eff GB/s util % hops")
    assert lines[2] == ("h2d-1hop" + " " * 16 + "      123.4      123.4     14.0      1.2      2.0     106.2       64 "
                        "    33.3   52.1    3")
    assert lines[3:] == ["invariants:", "  [v] PASS  monotone: ok", "  [x] FAIL  bounded: 2 > 1",
                         "(utilisation sweep and route detail: kernbench probe --verbose; machine-readable: --json)"]


# --------------------------------------------------------------------------------------------- list and run


def test_list_prints_index_name_and_description(cli, capsys):
    assert cli("list") == 0
    assert capsys.readouterr().out.splitlines() == ["  1  alpha" + " " * 20 + "the first fake bench",
                                                    "  2  beta" + " " * 21 + "the second fake bench"]


def test_list_params_of_one_bench_keeps_its_index(cli, capsys):
    assert cli("list", "--params", "beta") == 0
    assert capsys.readouterr().out.splitlines() == ["  2  beta" + " " * 21 + "the second fake bench",
                                                    "       (no parameters)"]
    assert run_list("1") == 0  # by index; the fixture's registry is still in place
    assert capsys.readouterr().out.splitlines() == [
        "  1  alpha" + " " * 20 + "the first fake bench",
        "       -p M" + " " * 14 + "an integer from 1 to 64; default 8. rows  [env FAKE_M]",
        "       -p MODE" + " " * 11 + "one of a, b; default a. how",
        "       -p SCALE" + " " * 10 + "a number >= 0.5 x; default 1.0. factor",
    ]


def test_run_passes_p_values_parsed_and_typed(cli, capsys):
    assert cli("run", "--bench", "alpha", "-p", " M = 5 ", "-p", "MODE=b", "-p", "SCALE=2.0e0") == 0
    assert SEEN == [{"M": 5, "MODE": "b", "SCALE": 2.0}]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bench alpha on device 0: latency ") and out[1] == "  parameters: M=5, MODE=b, SCALE=2.0"


def test_p_wins_over_the_environment_and_the_environment_over_the_default(cli, monkeypatch):
    monkeypatch.setenv("FAKE_M", "3")
    assert cli("run", "--bench", "alpha") == 0
    assert cli("run", "--bench", "alpha", "-p", "M=9") == 0
    assert cli("run", "--bench", "1", "-p", "M=4.0") == 0  # an integral float is an integer
    monkeypatch.delenv("FAKE_M")
    assert cli("run", "--bench", "alpha") == 0
    assert [s["M"] for s in SEEN] == [3, 9, 4, 8]


def test_run_on_every_device(cli, capsys):
    assert cli("run", "--bench", "alpha", "--device", "all") == 0
    out = capsys.readouterr().out
    assert len(SEEN) == 2 and "bench alpha on device 0:" in out and "bench alpha on device 1:" in out


@pytest.mark.parametrize(("argv", "message"), [
    (("-p", "M"), "-p 'M': expected NAME=VALUE, e.g. -p M=512"),
    (("-p", "=5"), "-p '=5': expected NAME=VALUE, e.g. -p M=512"),
    (("-p", " =5"), "-p ' =5': expected NAME=VALUE, e.g. -p M=512"),
    (("-p", "X=1"), "bench 'alpha' has no parameter 'X'; its parameters: M, MODE, SCALE "
                    "(`kernbench list --params alpha`)"),
    (("-p", "M=0"), "bench 'alpha', -p: M=0 is out of bounds; expected an integer from 1 to 64"),
    (("-p", "M=65"), "bench 'alpha', -p: M=65 is out of bounds; expected an integer from 1 to 64"),
    (("-p", "M=1.5"), "bench 'alpha', -p: M='1.5' is not an integer; expected an integer from 1 to 64"),
    (("-p", "MODE=c"), "bench 'alpha', -p: MODE='c' is invalid; expected one of a, b"),
    (("-p", "SCALE=0.49"), "bench 'alpha', -p: SCALE=0.49 is out of bounds; expected a number >= 0.5"),
    (("-p", "SCALE=half"), "bench 'alpha', -p: SCALE='half' is not a number; expected a number >= 0.5"),
    (("--max-events", "0"), "--max-events '0' is invalid; expected a positive integer, or 'none' for no limit"),
    (("--timeout", "soon"), "--timeout 'soon' is invalid; expected a positive number, or 'none' for no limit"),
    (("--links-top", "-1"), "--links-top -1 must be 0 or more"),
    (("--device", "2"), "--device '2' is invalid; use a SIP index 0..1 or 'all'"),
    (("--device", "all", "--links-top", "3"), "--links/--links-top describe one simulation, but --device all runs "
                                              "2; pass one --device (0..1)"),
])
def test_bad_run_input_is_one_line_and_exit_2_before_anything_runs(cli, capsys, argv, message):
    _one_error(capsys, cli("run", "--bench", "alpha", *argv), message)
    assert SEEN == []


def test_bad_environment_value_names_the_variable(cli, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_M", "many")
    _one_error(capsys, cli("run", "--bench", "alpha"),
               "bench 'alpha', environment variable FAKE_M: M='many' is not an integer; expected an integer from 1 "
               "to 64")


def test_unknown_bench(cli, capsys):
    _one_error(capsys, cli("run", "--bench", "gamma"), "unknown bench 'gamma'; valid benches: 1:alpha, 2:beta")
    _one_error(capsys, cli("run", "--bench", "3"), "unknown bench '3'; valid benches: 1:alpha, 2:beta")


def test_output_paths_are_checked_before_the_run(cli, capsys, tmp_path):
    (tmp_path / "f").write_text("x")
    below_a_file = tmp_path / "f" / "t.json"
    _one_error(capsys, cli("run", "--bench", "alpha", "--trace", str(below_a_file)),
               f"--trace {below_a_file}: {tmp_path / 'f'} is a file, not a folder; choose another path")
    _one_error(capsys, cli("run", "--bench", "alpha", "--links", str(tmp_path / "f" / "l.json")),
               f"--links {tmp_path / 'f' / 'l.json'}: {tmp_path / 'f'} is a file, not a folder; choose another path")
    assert SEEN == []


def test_a_failed_bench_is_exit_2_with_its_error_code(cli, capsys):
    status = cli("run", "--bench", "beta")  # submits nothing
    out, err = capsys.readouterr()
    assert status == 2 and SEEN == [{}] and out.startswith("bench beta on device 0: latency ")
    assert err == "kernbench: error: NO_REQUESTS: bench 'beta' submitted no request to the device\n"


@pytest.mark.parametrize(("argv", "message"), [
    (("web", "--view", "rack"), "unknown view 'rack' for --view; use one of system, sip, cube, pe"),
    (("web", "--port", "65536"), "--port 65536 is not a port number; use 0..65535 (0 picks a free one)"),
    (("web", "--port", "-1"), "--port -1 is not a port number; use 0..65535 (0 picks a free one)"),
    (("links", "/nonexistent/kernbench-links.json"),
     "links file /nonexistent/kernbench-links.json does not exist; regenerate it with `kernbench run --bench NAME "
     "--links FILE`"),
])
def test_other_commands_bad_input(cli, capsys, argv, message):
    _one_error(capsys, cli(*argv), message)


# --------------------------------------------------------------------------------------------- the error contract


def _raising(exc: BaseException):
    def dispatch(args):
        raise exc

    return dispatch


@pytest.mark.parametrize(("exc", "status", "line"), [
    (BenchError("no such thing"), 2, "kernbench: error: no such thing"),
    (OSError(28, "No space left on device", "/out/t.json"),
     2, "kernbench: error: /out/t.json: No space left on device; check the path, its permissions and the free disk "
        "space"),
    (MemoryError(), 2, "kernbench: error: out of memory; reduce the problem size (bench parameters, topology) or free "
                       "memory"),
    (KeyboardInterrupt(), 130, "kernbench: interrupted"),
    (ValueError("bad\n   thing"), 1, "kernbench: internal error: ValueError: bad thing; this is a bug in kernbench, "
                                    "please report it with the output of the same command with --debug"),
])
def test_every_failure_is_one_line_with_its_status(cli, capsys, monkeypatch, exc, status, line):
    monkeypatch.setattr(cli_main, "_dispatch", _raising(exc))
    assert cli("list") == status
    out, err = capsys.readouterr()
    assert err == line + "\n" and out == ""


def test_an_internal_error_message_is_cut_to_160_characters(cli, capsys, monkeypatch):
    monkeypatch.setattr(cli_main, "_dispatch", _raising(RuntimeError("x" * 500)))
    assert cli("list") == 1
    assert capsys.readouterr().err == (f"kernbench: internal error: RuntimeError: {'x' * 160}; this is a bug in "
                                       f"kernbench, please report it with the output of the same command with "
                                       f"--debug\n")


def test_debug_adds_the_traceback_before_the_line(cli, capsys, monkeypatch):
    monkeypatch.setattr(cli_main, "_dispatch", _raising(BenchError("no such thing")))
    assert cli("--debug", "list") == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and err.endswith("kernbench: error: no such thing\n")


def test_environment_error_text():
    assert _environment_error(PermissionError(13, "Permission denied", "/x/y")) == \
        "/x/y: Permission denied; check the path, its permissions and the free disk space"
    assert _environment_error(OSError("plain")) == "OSError; check the path, its permissions and the free disk space"


def test_warnings_are_one_line(cli, capsys, monkeypatch):
    monkeypatch.setattr(cli_main, "_dispatch", lambda args: warnings.warn("careful", UserWarning, stacklevel=1) or 0)
    assert cli("list") == 0
    assert capsys.readouterr().err == "kernbench: warning: careful\n"


def test_version_lists_installed_distributions(capsys, monkeypatch):
    import kernbench.cli.versions as versions

    monkeypatch.setattr(versions, "installed", lambda: {"kernbench": "0.2.0", "kernbench-sim": None,
                                                        "kernbench-topology": "0.2.1"})
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == "kernbench 0.2.0\nkernbench-topology 0.2.1\n"
    monkeypatch.setattr(versions, "installed", lambda: {"kernbench": None})
    assert versions.version_text() == "kernbench (not installed)"


# --------------------------------------------------------------------------------------------- study helpers


def test_study_point_description():
    assert _describe({"M": 512, "mode": "ring", "f": 0.5}) == "M=512 mode=ring f=0.5" and _describe({}) == ""


def test_topology_folder_choice(tmp_path, monkeypatch):
    assert topology_dir("some/where") == Path("some/where")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topologies").mkdir()
    assert topology_dir(None) == Path("topologies")
