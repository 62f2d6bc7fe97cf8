"""`kernbench probe` and `kernbench topology` end to end: JSON contracts, invariants, determinism."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT_TOPOLOGY = Path(__file__).resolve().parents[1] / "topologies" / "topology.yaml"

CASE_KEYS = {"name", "category", "actual_ns", "overhead_ns", "wire_ns", "drain_ns", "formula_ns",
             "bottleneck_bw_gbs", "eff_bw_gbs", "util_pct", "hops", "path"}


@pytest.fixture(scope="module")
def probe_json(cli) -> tuple[dict, str]:
    proc = cli("probe", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stdout


def test_probe_json_contract(cli, probe_json) -> None:
    data, _ = probe_json
    assert data["nbytes"] == 32768
    cats = {c["category"] for c in data["cases"]}
    assert cats == {"h2d", "d2h", "pe_dma", "contention"}
    for c in data["cases"]:
        assert set(c) >= CASE_KEYS, c["name"]
        assert c["actual_ns"] > 0 and c["path"] and c["hops"] == len(c["path"]) - 1
    assert {"name", "nbytes", "actual_ns", "util_pct"} <= set(data["sweep"][0])
    assert sorted({r["nbytes"] for r in data["sweep"]}) == [4096, 16384, 65536, 262144, 1048576]
    assert all({"name", "pass", "detail"} <= set(i) for i in data["invariants"])


def test_every_invariant_passes_and_formula_agrees(cli, probe_json) -> None:
    data, _ = probe_json
    failed = [i for i in data["invariants"] if not i["pass"]]
    assert not failed, failed
    for c in data["cases"]:
        if "flows" in c:
            continue
        assert abs(c["actual_ns"] - c["formula_ns"]) <= 0.02 * c["formula_ns"], c["name"]
        parts = c["overhead_ns"] + c["wire_ns"] + c["fill_ns"] + c["drain_ns"]
        assert parts == pytest.approx(c["formula_ns"])


def test_probe_catalog_shape(cli, probe_json) -> None:
    data, _ = probe_json
    names = [c["name"] for c in data["cases"]]
    assert [n for n in names if n.startswith("h2d")] == [f"h2d-{k}hop" for k in (1, 2, 3, 4)]
    assert [n for n in names if n.startswith("d2h")] == [f"d2h-{k}hop" for k in (1, 2, 3, 4)]
    assert {"pe-local-hbm", "pe-same-half-hbm", "pe-cross-half-hbm", "pe-cross-cube-hbm-best",
            "pe-cross-cube-hbm-worst", "pe-cross-sip-hbm", "contention-2flows", "contention-4flows"} <= set(names)
    cross_sip = next(c for c in data["cases"] if c["name"] == "pe-cross-sip-hbm")
    assert "fabric.switch0" in cross_sip["path"] and cross_sip["path"][-1].startswith("sip1.")
    four = next(c for c in data["cases"] if c["name"] == "contention-4flows")
    assert len(four["flows"]) == 4


def test_probe_is_deterministic(cli, probe_json) -> None:
    _, text = probe_json
    again = cli("probe", "--json")
    assert again.stdout == text


def test_probe_human_output_and_strict_exit(cli) -> None:
    proc = cli("probe", "--case", "pe-local-hbm", "--strict")
    assert proc.returncode == 0, proc.stderr
    assert "[v] PASS" in proc.stdout and "[x] FAIL" not in proc.stdout
    assert "pe-local-hbm" in proc.stdout and "<BN:" not in proc.stdout  # route detail only with --verbose
    assert "actual ns" in proc.stdout and "BN GB/s" in proc.stdout  # units in the headers
    verbose = cli("probe", "--case", "pe-local-hbm", "--verbose")
    assert verbose.returncode == 0 and "<BN:" in verbose.stdout


def test_strict_exits_1_only_when_an_invariant_fails(cli, monkeypatch) -> None:
    from kernbench.cli import main as cli_main
    from kernbench.cli import probe as probe_mod

    def fake(verdict: bool):
        def run(topology, case=None):
            return probe_mod.ProbeResult(32768, [], [], [{"name": "x", "pass": verdict, "detail": ""}])
        return run

    monkeypatch.setattr(probe_mod, "run_probe", fake(False))
    assert cli_main.main(["probe", "--strict", "--json"]) == 1
    assert cli_main.main(["probe", "--json"]) == 0
    monkeypatch.setattr(probe_mod, "run_probe", fake(True))
    assert cli_main.main(["probe", "--strict", "--json"]) == 0


def test_topology_json_contract_and_diagrams(cli, tmp_path: Path) -> None:
    out = tmp_path / "diagrams"
    proc = cli("topology", str(ROOT_TOPOLOGY), "--json", "--diagrams", str(out))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["sips"] == 2 and info["cubes_per_sip"] == 16 and info["pes_per_cube"] == 8
    assert info["edges"] == sum(info["edge_kinds"].values())
    mesh = Path(info["mesh_file"])
    assert mesh.parent.name == "cube-mesh" and mesh.is_file()  # the user cache, never beside the topology
    for view in ("system", "sip", "cube", "pe"):
        ET.parse(out / f"{view}.svg")
