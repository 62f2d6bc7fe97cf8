"""Round 2 of the hostile-user findings on the command line and the Python API (``tests/reliability/round2_cli.py``
puts each in the bad-input catalogue): inputs accepted silently, tracebacks, and runs that hung or left processes
behind. Each test pins the exact message or value."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from kernbench.cli import run_cmd
from kernbench.cli.main import main
from kernbench.runtime import AllocationError, DPPolicy, session
from kernbench.sim import SimulationLimitError
from kernbench.sim.limits import DEFAULT_SESSION_TIMEOUT_S, Limits
from kernbench.sim.links import MAX_JSON_DEPTH, LinksFileError, load_json
from kernbench.studies import executors
from kernbench.studies.base import StudyError

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = ROOT / "topologies" / "topology.yaml"


def _error(capsys, *argv: str) -> str:
    """The one stderr line of a command that must exit 2."""
    assert main(list(argv)) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines[-1].startswith("kernbench: error: ") and "Traceback" not in "\n".join(lines)
    return lines[-1][len("kernbench: error: "):]


@pytest.mark.parametrize("body", [b"", b"# only a comment\n", b"~\n"], ids=["empty", "comment", "null"])
def test_a_topology_file_without_a_topology_is_refused(tmp_path, capsys, body):
    path = tmp_path / "t.yaml"
    path.write_bytes(body)
    assert _error(capsys, "topology", str(path)) == (
        f"{path}: the file holds no topology (it is empty, only comments, or null); start from a builtin "
        f"(`kernbench topology --export default PATH`), write `{{}}` for every default, or pass no topology for "
        f"the builtin default")


def test_an_empty_mapping_still_means_every_default(tmp_path, capsys):
    (tmp_path / "t.yaml").write_text("{}\n")
    assert main(["topology", str(tmp_path / "t.yaml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sips"] == 2


def test_a_ring_grid_that_does_not_hold_the_sips_is_refused(tmp_path, capsys):
    (tmp_path / "t.yaml").write_text("system:\n  sips: {count: 2, topology: ring_1d, grid: [3, 5]}\n")
    assert _error(capsys, "topology", str(tmp_path / "t.yaml")).endswith(
        "field 'system.sips.grid' = [3, 5] holds 15 SIPs but system.sips.count = 2; ring_1d does not use the grid, "
        "so leave it out or make rows*cols equal the count")
    for sips in ("{count: 3, topology: ring_1d}", "{count: 5, topology: ring_1d, grid: [1, 2]}"):
        # a grid left out, or left at the default an exported file carries, is fine with any count
        (tmp_path / "ok.yaml").write_text(f"system:\n  sips: {sips}\n")
        assert main(["topology", str(tmp_path / "ok.yaml"), "--json"]) == 0


@pytest.mark.parametrize("value", ["٦٤", "６４", "6４"])
def test_non_ascii_digits_in_a_parameter_are_refused(capsys, value):
    assert _error(capsys, "run", "--bench", "gemm-single-pe", "-p", f"M={value}") == (
        f"bench 'gemm-single-pe', -p: M={value!r} holds characters other than ASCII; write the number with the "
        f"digits 0-9 (expected an integer from 1 to 2048)")


def test_a_parameter_given_twice_is_refused_naming_both(capsys):
    assert _error(capsys, "run", "--bench", "gemm-single-pe", "-p", "M=64", "-p", "M=128") == (
        "-p 'M=128': parameter M is already set by -p 'M=64'; give each parameter once")


def test_a_bench_or_parameter_of_thousands_of_digits_is_one_line(capsys):
    digits = "9" * 5000
    assert _error(capsys, "run", "--bench", digits) == (
        f"--bench {digits[:40]!r}... (5,000 characters) is not a bench name or index; `kernbench list` shows them")
    assert _error(capsys, "run", "--bench", "gemm-single-pe", "-p", f"M={digits}") == (
        f"bench 'gemm-single-pe', -p: M={digits[:40]!r}... (5,000 characters) is not an integer; expected an "
        f"integer from 1 to 2048")


def test_topology_list_and_export_refuse_what_they_would_ignore(tmp_path, capsys):
    assert _error(capsys, "topology", "nosuch", "--list") == (
        "--list only lists the builtin topologies, so the topology 'nosuch' would be ignored; run `kernbench "
        "topology` again for it")
    assert _error(capsys, "topology", "--export", "default", str(tmp_path / "x.yaml"), "--diagrams", "/proc/x") == (
        "--export only writes a builtin topology, so --diagrams /proc/x would be ignored; run `kernbench topology` "
        "again for it")
    assert not (tmp_path / "x.yaml").exists()


def _links_record(**over) -> dict:
    rec = {"src": "a", "dst": "b", "kind": "k", "bw_gbs": 1, "latency_ns": 1, "bytes": 10, "packets": 1,
           "messages": 1, "busy_ns": 750, "utilisation": 7.5, "max_wait_ns": 0}
    return {**rec, **over}


def test_a_utilisation_above_one_is_refused_not_shown_as_750_percent(tmp_path, capsys):
    doc = {"schema": "kernbench.links/2", "window_ns": 100, "run": {}, "fabric": {}, "links": [_links_record()],
           "edges": 1}
    (tmp_path / "l.json").write_text(json.dumps(doc))
    assert _error(capsys, "links", str(tmp_path / "l.json")) == (
        f"links file {tmp_path / 'l.json'}: links[0].utilisation is 7.5 (a → b); expected a fraction from 0 to 1 "
        f"(busy_ns / window_ns: a link is busy at most the whole run); regenerate it with `kernbench run --bench "
        f"NAME --links FILE`")


def test_a_run_file_with_a_negative_latency_is_refused(tmp_path):
    from kernbench.cli.web.model import ViewerInputError, read_run

    (tmp_path / "r.json").write_text('{"bench": "x", "latency_ns": -5}')
    with pytest.raises(ViewerInputError) as info:
        read_run(tmp_path / "r.json")
    assert str(info.value) == (f"run file {tmp_path / 'r.json'}: latency_ns is -5, expected a non-negative number "
                               f"of ns; write it with `kernbench run --bench NAME --json > RUN.json`")


@pytest.mark.parametrize("text,what", [
    ("[" * 100_000 + "]" * 100_000, f"nests lists or objects more than {MAX_JSON_DEPTH} levels deep"),
    ("[" * 65 + "]" * 65, f"nests lists or objects more than {MAX_JSON_DEPTH} levels deep"),
    ('{"a": ' + "9" * 5000 + "}", "holds an integer of 5,000 digits (at most 40 are read)"),
], ids=["deep", "just-too-deep", "huge-int"])
def test_results_json_is_read_with_bounded_depth_and_digits(text, what):
    with pytest.raises(LinksFileError) as info:
        load_json(text, "links file f.json", LinksFileError, "regenerate it")
    assert str(info.value) == f"links file f.json {what}; regenerate it"
    assert load_json("[" * 64 + "]" * 64, "f", LinksFileError, "") is not None


def test_deep_and_huge_json_through_links_and_web(tmp_path, capsys):
    (tmp_path / "d.json").write_text("[" * 100_000 + "]" * 100_000)
    assert _error(capsys, "links", str(tmp_path / "d.json")) == (
        f"links file {tmp_path / 'd.json'} nests lists or objects more than 64 levels deep; regenerate it with "
        f"`kernbench run --bench NAME --links FILE`")
    assert _error(capsys, "web", "--run", str(tmp_path / "d.json"), "--export", str(tmp_path / "w")) == (
        f"run file {tmp_path / 'd.json'} nests lists or objects more than 64 levels deep; write it with "
        f"`kernbench run --bench NAME --json > RUN.json`")


@pytest.mark.parametrize("value", ["1e-300", "1e300", "0.0009", "1e8"])
def test_a_timeout_outside_its_range_is_refused(capsys, value):
    assert _error(capsys, "run", "--bench", "gemm-single-pe", "--timeout", value) == (
        f"--timeout {value!r} is invalid; expected from 0.001 to 31,536,000 seconds (a year), or no limit")


def test_limits_refuse_a_timeout_the_alarm_cannot_take():
    from kernbench.sim import BudgetError

    for value in (1e-300, 1e300):
        with pytest.raises(BudgetError, match=r"timeout_s = .* is invalid; expected from 0.001 to 31,536,000"):
            Limits(timeout_s=value)


def test_a_huge_capacity_is_refused_not_an_overflow(tmp_path, capsys):
    (tmp_path / "t.yaml").write_text("cube:\n  hbm: {capacity_gib: 1e300}\n")
    assert _error(capsys, "topology", str(tmp_path / "t.yaml")) == (
        f"{tmp_path / 't.yaml'}: cube.hbm.capacity_gib gives over 1e308 HBM bytes per cube, more than the "
        f"physical address layout can name (549755813888); reduce it (see adr/0003)")


@pytest.mark.parametrize("binding,message", [
    ("pe_gemm: pe_math", "components.pe_gemm = 'pe_math' is an implementation for pe_math nodes, not pe_gemm "
                         "nodes; implementations for pe_gemm: pe_gemm"),
    ("router: sram", "components.router = 'sram' is an implementation for sram nodes, not router nodes; "
                     "implementations for router: forwarding"),
])
def test_a_component_bound_to_the_wrong_node_type_is_refused(tmp_path, capsys, binding, message):
    (tmp_path / "t.yaml").write_text(f"components:\n  {binding}\n")
    for argv in (("topology", str(tmp_path / "t.yaml")),
                 ("run", "--bench", "gemm-single-pe", "--topology", str(tmp_path / "t.yaml"))):
        assert _error(capsys, *argv) == f"{tmp_path / 't.yaml'}: {message}"


def test_a_plugin_without_node_types_may_serve_any_node_type():
    from kernbench.components import default_registry
    from kernbench.topology import spec_from_dict

    class Custom:
        pass

    registry = default_registry(plugins=False).replace("custom_router", Custom)
    factories = registry.check(spec_from_dict({"components": {"router": "custom_router"}}))
    assert factories["router"] is Custom


def test_a_lone_surrogate_in_a_name_is_refused(tmp_path, capsys):
    (tmp_path / "t.yaml").write_text('name: "a\\udc80b"\n')
    assert _error(capsys, "topology", str(tmp_path / "t.yaml"), "--diagrams", str(tmp_path / "d")) == (
        f"{tmp_path / 't.yaml'}: field 'name' holds the lone surrogate U+DC80 (in 'a\\udc80b'), which is not a "
        f"character; write the character itself, or remove the escape")


def test_an_unknown_home_folder_is_one_line(capsys):
    for argv in (("topology", "~nosuchuser9/x.yaml"), ("run", "--bench", "1", "--topology", "~nosuchuser9/x.yaml")):
        assert _error(capsys, *argv) == ("topology path '~nosuchuser9/x.yaml': ~nosuchuser9 names no user with a "
                                         "home folder on this machine; spell the path out")


@pytest.mark.parametrize("address,message", [
    ("tcp://[::1", "--scheduler 'tcp://[::1' is not a scheduler address; give tcp://HOST:PORT (what `dask "
                   "scheduler` prints)"),
    ("tcp://h:99999", "--scheduler 'tcp://h:99999' has an invalid port; give tcp://HOST:PORT with a port from 1 "
                      "to 65535"),
    ("tcp://a\x00b:1", "--scheduler 'tcp://a\\x00b:1' is not a scheduler address; give tcp://HOST:PORT (what "
                       "`dask scheduler` prints)"),
])
def test_a_malformed_scheduler_address_is_one_line(tmp_path, capsys, address, message):
    assert _error(capsys, "study", "gemm", "--scheduler", address, "--out", str(tmp_path / "s")) == message


def test_a_missing_dask_extra_is_one_line_even_when_every_point_is_cached(monkeypatch):
    """``connect`` runs when every point is cached, to check the address; without ``distributed`` it said
    ``ModuleNotFoundError: distributed``."""
    monkeypatch.setattr(executors, "check_scheduler", lambda scheduler: None)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(StudyError) as info:
        executors.connect("tcp://127.0.0.1:8786")
    assert str(info.value) == "--executor dask needs the dask extra: pip install 'kernbench-studies[dask]'"


def test_from_numpy_checks_the_device_before_making_a_view_contiguous(monkeypatch):
    """A 128 GiB broadcast view takes 2 bytes until it is made contiguous: the device refuses its size first
    (the copy is never attempted, so the test spends no memory)."""
    big = np.broadcast_to(np.zeros(1, np.float16), (1 << 16, 1 << 20))
    copies = []
    real = np.ascontiguousarray
    monkeypatch.setattr(np, "ascontiguousarray", lambda a, *args, **kw: copies.append(a.shape) or real(a, *args,
                                                                                                      **kw))
    for data in (False, True):
        with pytest.raises(AllocationError, match=r"cannot allocate 137438953472 bytes aligned to 256 bytes in HBM "
                                                  r"slice of sip0\.cube0\.pe0"), session(data=data) as torch:
            torch.from_numpy(big)
    assert copies == []


def test_from_numpy_still_writes_strided_views_in_data_mode():
    src = np.arange(8 * 128, dtype=np.float16).reshape(8, 128)[:, ::2]
    with session(data=True) as torch:
        t = torch.from_numpy(src, DPPolicy(pe="column_wise", num_cubes=1, num_pes=2))
        np.testing.assert_array_equal(torch.to_numpy(t), src)


def test_session_has_a_default_wall_clock_limit(monkeypatch):
    """``while True: pass`` in a kernel under ``session()`` ran forever; the block now has a default limit (an
    hour; made 0.3 s here by changing the default itself)."""
    import inspect

    from kernbench.runtime import context

    original = context.session.__wrapped__
    assert inspect.signature(original).parameters["timeout_s"].default == DEFAULT_SESSION_TIMEOUT_S == 3600.0
    monkeypatch.setitem(original.__kwdefaults__, "timeout_s", 0.3)

    def spin(tl, x):
        while True:
            pass

    t0 = time.monotonic()
    with pytest.raises(SimulationLimitError, match=r"the run took more than the wall-clock timeout of 0\.3 s"), \
            session() as torch:
        x = torch.zeros((4, 64), "float16", DPPolicy(num_cubes=1, num_pes=1))
        torch.wait(torch.launch("spin", spin, x))
    assert time.monotonic() - t0 < 30


def test_the_cli_timeout_covers_compiling_the_topology(monkeypatch, capsys):
    """``--timeout 2`` took 78 s on the largest topology: the clock now starts before compilation (a compile
    that sleeps stands in for the slow one)."""
    def slow_compile(topology):
        time.sleep(30)

    monkeypatch.setattr(run_cmd, "load_graph", slow_compile)
    t0 = time.monotonic()
    assert _error(capsys, "run", "--bench", "gemm-single-pe", "--timeout", "0.3") == (
        "compiling the topology took more than the wall-clock timeout of 0.3 s (--timeout covers compilation and "
        "the run); raise --timeout, or use a smaller topology")
    assert time.monotonic() - t0 < 10
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None) or callable(signal.getsignal(signal.SIGALRM))
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_run_gets_what_compilation_left_of_the_timeout():
    """The watchdog counts from the clock's start, not from the run's, and still names the timeout given."""
    from kernbench.sim.limits import watchdog

    class Engine:
        deadline = timeout_s = halted = None
        limits = Limits(timeout_s=10.0, started=time.monotonic() - 4.0)

    engine = Engine()
    with watchdog(engine, 10.0):
        assert 5.5 < engine.deadline - time.monotonic() <= 6.0 and engine.timeout_s == 10.0
        assert 5.5 < signal.getitimer(signal.ITIMER_REAL)[0] <= 6.0
    assert 5.5 < Engine.limits.deadline() - time.monotonic() <= 6.0  # what a GraphEngine built with them gets
    assert abs(run_cmd.limits_from("1", "1", "10").started - time.monotonic()) < 1.0  # the CLI's clock: at parse


_ORPHANS = textwrap.dedent("""
    import os, sys, time
    from kernbench.studies import executors
    executors.PARENT_CHECK_S = 0.1
    if sys.argv[1] == "process":
        it = executors._process([(os.getpid, ())] * 8 + [(time.sleep, (120,))] * 2, 2)
    else:  # no sleeping tasks: Dask may start them first; the cluster lives while the generator is suspended
        it = executors._dask([(os.getpid, ())] * 10, 2, None)
    pids = {next(it)[1] for _ in range(8)}
    print(" ".join(map(str, sorted(pids))), flush=True)
    time.sleep(120)
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize(("executor", "sig"), [("process", signal.SIGKILL), ("process", signal.SIGTERM),
                                               ("dask", signal.SIGKILL)])
def test_study_pool_workers_exit_when_the_parent_dies(executor, sig):
    """The process pool's workers watch their parent (``_exit_with_parent``); a ``LocalCluster``'s worker
    processes are ended by their nannies' own parent check, which this pins down."""
    if executor == "dask":
        pytest.importorskip("distributed")
    proc = subprocess.Popen([sys.executable, "-c", _ORPHANS, executor], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
    finally:
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_a_scaled_mesh_cache_entry_never_reaches_a_latency(tmp_path):
    """The cube-mesh cache entry of a topology edited to 1.2x its coordinates (the wires 20 % longer) used to give
    gemm-single-pe a latency of 3821.14 ns instead of the clean 3645.86 ns (3659.86 ns since HBM read replies are
    paced causally, ADR 0005); the entry is regenerated with a warning and the run's latency is the clean one,
    exactly."""
    env = {**os.environ, "KERNBENCH_CACHE_DIR": str(tmp_path / "cache")}
    topo = tmp_path / "topology.yaml"
    topo.write_text(DEFAULT_TOPOLOGY.read_text())

    def latency() -> tuple[float, str]:
        proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "run", "--bench", "gemm-single-pe",
                               "--topology", str(topo), "--json"], capture_output=True, text=True, env=env,
                              timeout=300, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["latency_ns"], proc.stderr

    clean, _ = latency()
    assert round(clean, 2) == 3659.86
    (entry,) = (tmp_path / "cache").rglob("*.yaml")
    data = yaml.safe_load(entry.read_text())
    data["col_xs"] = [x * 1.2 for x in data["col_xs"]]
    data["row_ys"] = [y * 1.2 for y in data["row_ys"]]
    entry.write_text(yaml.safe_dump(data, sort_keys=False))
    again, err = latency()
    assert "is unusable (ValueError: the layout does not match its content_sha256" in err and "regenerating it" in err
    assert again == clean
