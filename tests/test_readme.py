"""The README stays true: its quickstart is the two commands CI and a new user run, its command-line synopsis
names every option the ``kernbench`` command has, it lists every shipped bench, and its Python example prints
what its comment says."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from kernbench.cli.main import main
from kernbench.runtime.bench import discover

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SUBCOMMANDS = ["topology", "probe", "list", "run", "study", "report", "links", "web"]


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def _blocks(text: str, lang: str) -> list[str]:
    return [b.strip() for b in re.findall(rf"```{lang}\n(.*?)```", text, re.S)]


def _help(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


def test_quickstart_is_two_commands_and_the_second_is_what_ci_runs():
    commands = _blocks(_section("Quickstart"), "bash")
    assert commands[0] == "python3 -m pip install nox && python3 -m nox -s demo"
    assert len(commands) == 2, commands
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m pip")]
    assert len(ci) == 1, ci
    pip_flags = {"--quiet", "--disable-pip-version-check"}
    assert [w for w in shlex.split(ci[0]) if w not in pip_flags] == shlex.split(commands[1])


def test_the_quickstart_sessions_exist_and_the_test_command_runs_the_default_sessions():
    noxfile = (ROOT / "noxfile.py").read_text()
    assert re.search(r"^def demo\(", noxfile, re.M) and re.search(r"^def report\(", noxfile, re.M)
    default = ["tests", "integration", "lint", "packaging", "docs_check"]
    assert f"nox.options.sessions = {default}".replace("'", '"') in noxfile
    testing = " ".join(_section("Testing").split())
    assert all(f"`{name}`" in testing for name in default), "the README's Testing section names every default session"
    report = ["python3 -m pip install nox && python3 -m nox -s report"]
    assert _blocks(_section("The codesign report"), "bash") == report


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_the_synopsis_names_every_option(command):
    synopsis = _blocks(_section("The command line"), "text")[0]
    lines = [line for line in synopsis.splitlines() if line.startswith(f"kernbench {command} ")]
    assert lines, f"no synopsis line for kernbench {command}"
    options = set(re.findall(r"(--[a-z][a-z-]*)", _help([command]))) - {"--help"}
    assert options, command
    missing = sorted(o for o in options if not re.search(rf"{o}(?![a-z-])", synopsis))
    assert not missing, f"README synopsis of kernbench {command} lacks {missing}"


def test_the_synopsis_names_the_global_options():
    options = set(re.findall(r"(--[a-z][a-z-]*)", _help([]).split("positional arguments")[0])) - {"--help"}
    assert options == {"--debug", "--version"}
    assert all(o in _section("The command line") for o in options)


def test_every_shipped_bench_is_listed():
    table = _section("What is here")
    missing = [b.name for b in discover().benches if f"`{b.name}`" not in table]
    assert not missing, f"README package table lacks {missing}"


def test_every_benchmark_command_in_the_speed_table_exists():
    commands = re.findall(r"`python3 (benchmarks/\S+\.py)", _section("Speed"))
    assert len(set(commands)) >= 6
    assert all((ROOT / c).is_file() for c in commands), commands


def test_the_python_example_prints_what_it_says(capsys):
    example = _blocks(_section("From Python"), "python")[0]
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    pe_ns, value = capsys.readouterr().out.strip().rsplit(" ", 1)
    assert float(value) == 256.0  # K = 256 ones times ones
    assert "sip0.cube0.pe0" in pe_ns
