"""`kernbench list` and `kernbench run` end to end: JSON contract, trace export, errors."""

from __future__ import annotations

import json
from pathlib import Path

ENGINE_KEYS = {"pe_dma", "pe_fetch_store", "pe_gemm", "pe_math", "pe_cpu"}
STAGE_KEYS = {"DMA_READ", "FETCH", "GEMM", "MATH", "STORE", "DMA_WRITE"}


def test_list_shows_indexed_benches(cli):
    proc = cli("list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["1", "all-gather"]
    assert any(line.split()[:2] == ["10", "matmul-composite"] for line in lines)


def test_run_json_contract_and_trace(cli, tmp_path: Path):
    trace = tmp_path / "trace.json"
    proc = cli("run", "--bench", "qkv-gemm", "--json", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["bench"] == "qkv-gemm" and data["ok"] is True and data["error_code"] is None
    assert data["device"] == 0 and data["latency_ns"] > 0
    assert set(data["op_counts"]) == {"gemm", "math", "dma_read", "dma_write", "ipcq_copy"}
    assert set(data["engines"]) == ENGINE_KEYS and set(data["stages"]) == STAGE_KEYS
    for usage in [*data["engines"].values(), *data["stages"].values()]:
        assert set(usage) == {"occupancy_ns", "wall_ns", "count"}
    assert list(data["pe_exec_start_ns"]) == ["sip0.cube0.pe0"]
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "sip0.cube0.pe0" in names
    gemm = [e for e in events if e["ph"] == "X" and e["name"] == "gemm"]
    assert len(gemm) == data["op_counts"]["gemm"] and all(e["dur"] > 0 for e in gemm)


def test_run_on_every_device(cli):
    proc = cli("run", "--bench", "5", "--device", "all", "--json")  # gemm-single-pe, by index
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [d["device"] for d in data] == [0, 1]
    assert list(data[1]["pe_exec_start_ns"]) == ["sip1.cube0.pe0"]


def test_unknown_bench_lists_valid_ones(cli):
    proc = cli("run", "--bench", "no-such-bench")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "valid benches: 1:all-gather, 2:all-to-all, 3:ccl-allreduce, 4:ffn, 5:gemm-single-pe" in proc.stderr


def test_bad_device(cli):
    proc = cli("run", "--bench", "1", "--device", "5")
    assert proc.returncode == 2 and "use a SIP index 0..1 or 'all'" in proc.stderr


def test_the_demo_fits_one_screen(cli, tmp_path):
    """`nox -s demo` runs these three commands (nox adds 9 lines of its own: the screen is 60)."""
    outs = [cli("topology", "--diagrams", str(tmp_path / "d"), cwd=tmp_path),
            cli("probe", "--strict", cwd=tmp_path),
            cli("run", "--bench", "matmul-composite", "--trace", f"{tmp_path}/", cwd=tmp_path)]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    lines = sum(len(p.stdout.splitlines()) for p in outs)
    assert lines <= 51, f"the demo prints {lines} lines"
    assert (tmp_path / "matmul-composite.trace.json").is_file()
