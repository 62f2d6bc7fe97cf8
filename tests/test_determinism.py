"""Determinism (docs/design.md invariant I2, issue 12): one bench of each family, run 20 times, prints the same
``kernbench run --json`` byte for byte, whatever the hash seed.

The slow session runs every family 20 times through the real command, each run with its own
``PYTHONHASHSEED``; the default session runs the two cheapest families 20 times in-process (the same JSON
the command prints) and one family through the command under two hash seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import builtin

ROOT = Path(__file__).resolve().parents[1]
#: One bench per family (the name before the first '-'), at its default parameters.
FAMILIES = {"all": "all-gather", "ccl": "ccl-allreduce", "ffn": "ffn", "gemm": "gemm-single-pe",
            "gqa": "gqa-decode-single-pe", "matmul": "matmul-composite", "moe": "moe", "qkv": "qkv-gemm",
            "reduce": "reduce-scatter", "tp": "tp-mlp", "va": "va-offset-verify"}
RUNS = 20


def test_every_bench_family_is_covered():
    families = {b.name.split("-")[0] for b in discover().benches}
    assert families == set(FAMILIES), f"add a bench of each new family to FAMILIES: {sorted(families)}"


@pytest.fixture(scope="module")
def setup():
    return discover(), builtin()


def _json_in_process(setup, name: str) -> str:
    registry, graph = setup
    result = run_bench(registry.resolve(name), graph, 0)
    return json.dumps(result.to_json(), indent=2)  # what `kernbench run --json` prints for one device


def _json_cli(name: str, seed: int) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCL_", "GQA_", "MATMUL_", "QKV_", "TP_",
                                                                        "VA_", "GEMM_"))}
    env["PYTHONHASHSEED"] = str(seed)
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "run", "--bench", name, "--json"], cwd=ROOT,
                          capture_output=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


@pytest.mark.parametrize("family", ["gemm", "va"])
def test_cheap_families_repeat_byte_for_byte_in_process(setup, family):
    runs = {_json_in_process(setup, FAMILIES[family]) for _ in range(RUNS)}
    assert len(runs) == 1 and json.loads(runs.pop())["ok"]


def test_the_command_is_independent_of_the_hash_seed():
    assert _json_cli("tp-mlp", 0) == _json_cli("tp-mlp", 12345)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_repeats_byte_for_byte_through_the_command(family):
    outputs = [_json_cli(FAMILIES[family], seed) for seed in range(RUNS)]
    assert all(out == outputs[0] for out in outputs), f"{FAMILIES[family]}: --json differs between runs"
    assert json.loads(outputs[0])["ok"]
