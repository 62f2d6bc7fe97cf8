"""``kernbench study --fidelity``: one error line for a bad value (worded as ``kernbench run --fidelity`` words it),
a flow run into its own folder, and the fidelity panel's summary line after a packet run (ADR 0039)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from kernbench.cli.main import main
from kernbench.studies import registry
from kernbench.studies.base import FidelityPanel, Field, Point, Study

TOPOLOGIES = Path(__file__).resolve().parents[3] / "topologies"


@pytest.mark.parametrize("value", ["exact", "Flow", ""])
def test_a_bad_study_fidelity_is_one_line_worded_as_the_run_commands(value, capsys):
    assert main(["study", "gemm", "--fidelity", value, "--dry-run", "--topologies", str(TOPOLOGIES)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err == (f"kernbench: error: --fidelity {value!r} is invalid; use packet (every packet on every "
                            f"link) or flow (every transfer one flow sharing its links max-min fairly)\n")
    assert main(["run", "--bench", "gemm-single-pe", "--fidelity", value]) == 2
    assert capsys.readouterr().err == captured.err  # the same words as `kernbench run --fidelity`


def _point(params, ctx):
    flow = ctx.fidelity == "flow"
    time.sleep(0.01 if flow else 0.03)  # wall times the runner can tell apart (it keeps 0.1 ms)
    return {"latency_ns": 100.0 * params["x"] * (1.02 if flow else 1.0), "events": 10 if flow else 40}


_PANEL = FidelityPanel(latency=lambda params: "latency_ns", describe=lambda params: f"x={params['x']}")


def _grid():
    points = [Point({"panel": "line"}, {"x": x}) for x in (1, 2, 4)]
    return (*points, *_PANEL.twins(points[1:]))


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A made-up study with a fidelity panel (no simulation), registered in this process; the cache and the
    working folder in ``tmp_path``."""
    monkeypatch.setenv("KERNBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    study = registry.register(Study(
        name="tinycli", title="A tiny study", description="latency = 100 x", grid=_grid, point=_point,
        files=lambda params: (), overrides=lambda params: {}, modules=("kernbench.studies.base",),
        fields=(Field("panel", "", "panel"), Field("x", "1", "input"), Field("latency_ns", "ns", "latency"),
                Field("events", "1", "events")),
        fidelity=_PANEL))
    yield study
    registry.unregister("tinycli")


def _study(*args: str) -> list[str]:
    return ["study", "tinycli", "--executor", "serial", "--topologies", str(TOPOLOGIES), "--no-figures", *args]


def test_a_packet_run_prints_its_fidelity_panel_and_a_flow_run_writes_its_own_folder(tiny, capsys):
    assert main(_study()) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"tinycli: 5 points (5 run, 0 cached) -> {Path('out/studies/tinycli/results.json')}"
    panel = re.fullmatch(r"  fidelity panel: 2 points in flow beside packet fidelity: \|error\| median 2\.00 %, "
                         r"max 2\.00 % \(x=2\); speed-up \(packet / flow wall time\) median (\S+)x, (\S+)x to (\S+)x",
                         out[1])
    assert panel, out[1]
    doc = json.loads(Path("out/studies/tinycli/results.json").read_text())
    walls = doc["provenance"]["run"]["point_wall_s"]
    speedups = sorted(walls[i] / walls[i + 2] for i in (1, 2))  # x = 2 and 4, packet over flow
    assert float(panel[2]) == pytest.approx(speedups[0], abs=0.006)
    assert float(panel[3]) == pytest.approx(speedups[1], abs=0.006)

    assert main(_study("--fidelity", "flow", "--dry-run")) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "dry run [flow fidelity]: 3 points, 1 would run, 2 cached"
    assert main(_study("--fidelity", "flow")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"tinycli: 3 points (1 run, 2 cached) [flow fidelity] -> "
                      f"{Path('out/studies-flow/tinycli/results.json')}")
    assert not any("fidelity panel" in line for line in out)  # a flow run has nothing to compare
    flow = json.loads(Path("out/studies-flow/tinycli/results.json").read_text())
    assert flow["fidelity"] == flow["provenance"]["fidelity"] == "flow"
    assert flow["command"] == "kernbench study tinycli --fidelity flow"
    assert [p["values"]["latency_ns"] for p in flow["points"]] == pytest.approx([102.0, 204.0, 408.0])
    # the packet results are where they were, untouched by the flow run
    assert json.loads(Path("out/studies/tinycli/results.json").read_text()) == doc
