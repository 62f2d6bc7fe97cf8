"""Chrome Trace Event export of the op log: layout, units, stable ids, JSON safety, file round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernbench.sim import OpRecord
from kernbench.sim.chrome_trace import json_safe, split_component, to_chrome_trace, write_chrome_trace


def records() -> list[OpRecord]:
    """Five ops on two PEs and one cube HBM controller, deliberately out of time order."""
    return [
        OpRecord(2000.0, 2016.384, "sip0.cube0.pe0.pe_gemm", "gemm", "gemm_tile",
                 {"m": 32, "n": 64, "k": 32, "a": np.zeros((32, 32), dtype=np.float16)}),
        OpRecord(1000.0, 1500.0, "sip0.cube0.pe0.pe_dma", "memory", "dma_read",
                 {"src": (0, 0, "hbm", 4096), "nbytes": np.int64(2048)}),
        OpRecord(1000.0, 1250.0, "sip0.cube0.hbm_ctrl.pe0", "memory", "hbm_read", {"nbytes": 2048}),
        OpRecord(1500.0, 1600.0, "sip0.cube0.pe1.pe_dma", "memory", "dma_read", {"nbytes": 512}),
        OpRecord(1500.0, 1700.0, "sip0.cube0.pe0.pe_dma", "memory", "dma_write", {"obj": object.__new__(object)}),
    ]


def split(trace):
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    return meta, ops


@pytest.mark.parametrize(("node", "expected"), [
    ("sip0.cube0.pe0.pe_gemm", ("sip0.cube0.pe0", "pe_gemm")),
    ("sip1.cube3.pe2.pe_fetch_store", ("sip1.cube3.pe2", "pe_fetch_store")),
    ("sip0.cube1.hbm_ctrl.pe2", ("sip0.cube1", "hbm_ctrl.pe2")),
    ("sip0.cube1.noc.r0c1", ("sip0.cube1", "noc.r0c1")),
    ("sip0.io0.pcie_ep", ("sip0.io0", "pcie_ep")),
    ("host", ("host", "host")),
])
def test_split_component(node, expected):
    assert split_component(node) == expected


def test_layout_units_and_names():
    trace = to_chrome_trace(records())
    assert trace["displayTimeUnit"] == "ns"
    meta, ops = split(trace)
    assert len(ops) == 5
    # 3 processes (pe0, cube0, pe1) + threads: pe0 has pe_dma and pe_gemm, cube0 hbm_ctrl.pe0, pe1 pe_dma.
    assert len(meta) == 3 + 4
    # Sorted by (t_start, component_id): hbm_read (cube) < dma_read (pe0) at t=1000, then pe0.dma_write < pe1 at 1500.
    assert [(e["name"], e["ts"]) for e in ops] == [
        ("hbm_read", 1.0), ("dma_read", 1.0), ("dma_write", 1.5), ("dma_read", 1.5), ("gemm_tile", 2.0)]
    gemm = ops[-1]
    assert gemm["cat"] == "gemm" and gemm["ph"] == "X"
    assert gemm["dur"] == pytest.approx(0.016384)  # 16.384 ns in µs
    assert isinstance(gemm["ts"], float) and isinstance(gemm["dur"], float)
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert procs == {1: "sip0.cube0", 2: "sip0.cube0.pe0", 3: "sip0.cube0.pe1"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads == {(1, 1): "hbm_ctrl.pe0", (2, 1): "pe_dma", (2, 2): "pe_gemm", (3, 1): "pe_dma"}
    assert (gemm["pid"], gemm["tid"]) == (2, 2)


def test_params_are_json_safe():
    trace = to_chrome_trace(records())
    _, ops = split(trace)
    by_name = {(e["name"], e["pid"]): e["args"] for e in ops}
    assert by_name[("gemm_tile", 2)]["a"] == {"shape": [32, 32], "dtype": "float16"}
    assert by_name[("dma_read", 2)] == {"src": [0, 0, "hbm", 4096], "nbytes": 2048}
    assert type(by_name[("dma_read", 2)]["nbytes"]) is int
    assert by_name[("dma_write", 2)]["obj"].startswith("<object object")
    json.dumps(trace, allow_nan=False)


def test_json_safe_values():
    assert json_safe({1: (np.float32(0.5), [np.bool_(True)]), "x": float("inf")}) == {"1": [0.5, [True]], "x": "inf"}
    assert json_safe(np.arange(6).reshape(2, 3)) == {"shape": [2, 3], "dtype": str(np.arange(1).dtype)}
    assert json_safe(b"abc") == "<3 bytes>"
    assert json_safe(None) is None


def test_deterministic_and_independent_of_input_order():
    recs = records()
    first = json.dumps(to_chrome_trace(recs))
    assert json.dumps(to_chrome_trace(list(reversed(recs)))) == first
    assert json.dumps(to_chrome_trace(iter(recs))) == first


def test_empty_log():
    assert to_chrome_trace([]) == {"traceEvents": [], "displayTimeUnit": "ns"}


def test_write_round_trip(tmp_path):
    out = write_chrome_trace(records(), tmp_path / "traces" / "run.json")
    assert out == tmp_path / "traces" / "run.json"
    with out.open(encoding="utf-8") as fh:
        loaded = json.load(fh)
    assert loaded == json.loads(json.dumps(to_chrome_trace(records())))
    assert len(loaded["traceEvents"]) == 12
