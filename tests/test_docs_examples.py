"""The docs' scripts are executed and their printed output compared with the pages, so the docs cannot rot."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_kernels_tutorial_prints_what_the_page_shows(tmp_path):
    blocks = _blocks((ROOT / "docs" / "kernels.md").read_text())
    script = next(body for lang, body in blocks if lang == "python" and "session(" in body)
    shown = next(body for lang, body in blocks if lang == "text" and body.startswith("deployed:"))
    path = tmp_path / "mm_example.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, "docs/kernels.md shows stale output: rerun the script and paste what it prints"


def test_the_bench_list_on_the_page_is_what_kernbench_list_prints():
    blocks = _blocks((ROOT / "docs" / "kernels.md").read_text())
    shown = next(body for lang, body in blocks if lang == "text" and body.startswith("$ kernbench list\n"))
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "$ kernbench list\n" + proc.stdout == shown, "docs/kernels.md lists stale benches: paste `kernbench list`"


# ---------------------------------------------------------------- docs/collectives.md
COLLECTIVES = ROOT / "docs" / "collectives.md"

#: The page's runnable scripts: (file name the page gives it, a line only that script has). Each script's
#: printed output is the text block right after it on the page.
COLLECTIVE_SCRIPTS = [
    ("ring_shift.py", 'torch.launch("ring_shift", ring_shift, x, y)'),
    ("when_it_goes_wrong.py", "def both_recv_first(tl, x):"),
    ("install_by_hand.py", 'ring = torch.install_ipcq(table, "sram")'),
    ("allreduce_example.py", "torch.multiprocessing.spawn(worker, nprocs=world)"),
    ("run_my_ring.py", 'config="my_ccl.yaml"'),
    ("tp_example.py", "mlp = ParallelMLP(torch, w1, w2"),
    ("all_to_all_example.py", 'algorithms={"all_to_all": algorithm}'),
]


def _env() -> dict[str, str]:
    """This environment without bench parameters, with PYTHONPATH made absolute (scripts run elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCL_", "TP_"))}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep)
                                            if p)
    return env


def _kernbench(line: str) -> tuple[list[str], dict[str, str]]:
    """A `VAR=value ... kernbench ...` command line of the page as an argv (shell redirections dropped) and env."""
    words, env = shlex.split(line), _env()
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0] == "kernbench", line
    args = [w for w in words[1:] if w not in ("2>&1", ">/dev/null")]
    return [sys.executable, "-m", "kernbench.cli.main", *args], env


@pytest.mark.parametrize(("name", "marker"), COLLECTIVE_SCRIPTS, ids=[n for n, _ in COLLECTIVE_SCRIPTS])
def test_collectives_scripts_print_what_the_page_shows(tmp_path, name, marker):
    text = COLLECTIVES.read_text()
    assert f"`{name}`" in text, f"docs/collectives.md no longer names {name}"
    blocks = _blocks(text)
    i = next(i for i, (lang, body) in enumerate(blocks) if lang == "python" and marker in body)
    script = blocks[i][1]
    lang, shown = blocks[i + 1]
    assert lang == "text", f"the block after {name} on the page should be its printed output"
    if "my_ccl.yaml" in script:  # the algorithm module and config the page defines just before
        (tmp_path / "my_ring_allreduce.py").write_text(
            next(body for lang, body in blocks if lang == "python" and "kernel = ring_allreduce" in body))
        (tmp_path / "my_ccl.yaml").write_text(
            next(body for lang, body in blocks if lang == "yaml" and "my_ring_allreduce" in body))
    (tmp_path / "topologies").symlink_to(ROOT / "topologies", target_is_directory=True)
    (tmp_path / name).write_text(script)
    proc = subprocess.run([sys.executable, name], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, f"docs/collectives.md shows stale output of {name}: rerun it and paste what it prints"


def test_collectives_bench_figures_are_what_kernbench_run_reports():
    rows = re.findall(r"^\| `((?:\w+=\S+ )*kernbench run [^`]*)` \| ([\d.]+) \|$", COLLECTIVES.read_text(), re.M)
    assert len(rows) == 3, rows
    for line, shown in rows:
        argv, env = _kernbench(line)
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)["metrics"]["allreduce_ns"]
        assert f"{got:.1f}" == shown, f"docs/collectives.md: `{line}` now reports {got:.1f}, the page {shown}"


def test_collectives_oversized_shard_fails_as_the_page_shows():
    shown = next(body for lang, body in _blocks(COLLECTIVES.read_text())
                 if lang == "text" and body.startswith("$ CCL_BYTES=262144 "))
    command, _, error = shown.partition("\n")
    argv, env = _kernbench(command[2:])
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr == error, "docs/collectives.md shows a stale error for an oversized shard"


def test_collectives_sweep_tables_match_the_benchmark_results():
    """The page's all-reduce tables are benchmarks/results/allreduce.json (python3 benchmarks/bench_allreduce.py)."""
    text = COLLECTIVES.read_text()
    results = json.loads((ROOT / "benchmarks" / "results" / "allreduce.json").read_text())
    sweep = re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    want = [(str(n), *(f"{results['latency_ns'][t][str(n)]:.1f}" for t in ("ring_1d", "torus_2d", "mesh_2d_no_wrap")))
            for n in results["bytes_per_pe"]]
    assert sweep == want, "docs/collectives.md: the latency sweep differs from benchmarks/results/allreduce.json"
    kinds = re.findall(r"^\| `(tcm|sram|hbm)` \| ([\d.]+) \|$", text, re.M)
    want = [(k, f"{v:.1f}") for k, v in results["torus_64k_by_buffer_kind_ns"].items()]
    assert kinds == want, "docs/collectives.md: the buffer-kind table differs from benchmarks/results/allreduce.json"


def test_collectives_other_collectives_script_prints_what_the_page_shows(tmp_path):
    """The broadcast / all-gather / reduce-scatter / barrier script of docs/collectives.md."""
    text = COLLECTIVES.read_text()
    assert "`collectives_example.py`" in text, "docs/collectives.md no longer names collectives_example.py"
    blocks = _blocks(text)
    i = next(i for i, (lang, body) in enumerate(blocks) if lang == "python" and "dist.reduce_scatter_tensor(" in body)
    lang, shown = blocks[i + 1]
    assert lang == "text", "the block after collectives_example.py on the page should be its printed output"
    (tmp_path / "topologies").symlink_to(ROOT / "topologies", target_is_directory=True)
    (tmp_path / "collectives_example.py").write_text(blocks[i][1])
    proc = subprocess.run([sys.executable, "collectives_example.py"], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown, "docs/collectives.md shows stale output of collectives_example.py: rerun it"


def _bench_rows(metrics: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """The page's `| `command` | `metric` | ns |` rows whose metric is one of ``metrics``."""
    rows = re.findall(r"^\| `((?:\w+=\S+ )*kernbench run [^`]*)` \| `(\w+)` \| ([\d.]+) \|$", COLLECTIVES.read_text(),
                      re.M)
    return [row for row in rows if row[1] in metrics]


def _check_bench_rows(rows: list[tuple[str, str, str]]) -> None:
    for line, metric, shown in rows:
        argv, env = _kernbench(line)
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)["metrics"][metric]
        assert f"{got:.1f}" == shown, f"docs/collectives.md: `{line}` now reports {got:.1f} {metric}, the page {shown}"


def test_collectives_gather_scatter_figures_are_what_kernbench_run_reports():
    rows = _bench_rows(("allgather_ns", "reducescatter_ns"))
    assert len(rows) == 5, rows
    _check_bench_rows(rows)


def test_collectives_all_to_all_figures_are_what_kernbench_run_reports():
    rows = _bench_rows(("alltoall_ns",))
    assert len(rows) == 6, rows
    _check_bench_rows(rows)
