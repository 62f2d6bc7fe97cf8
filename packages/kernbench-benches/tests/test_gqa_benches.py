"""The attention benches through the bench runner: they verify their numbers in data mode and report metrics."""

from __future__ import annotations

import pytest

from kernbench.layers.attention import PARTITIONS
from kernbench.runtime.bench import discover, run_bench
from kernbench.topology import compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _run(graph, name, data=True):
    r = run_bench(discover().resolve(name), graph, data=data)
    assert r.ok, r.error
    return r


@pytest.mark.parametrize("partition", PARTITIONS)
def test_gqa_decode_bench_checks_every_partition(graph, monkeypatch, partition):
    monkeypatch.setenv("GQA_PARTITION", partition)
    monkeypatch.setenv("GQA_SKV", "200")
    r = _run(graph, "gqa-decode")
    m = r.metrics
    assert 0 < m["latency_ns"] < r.latency_ns  # the window excludes deployment
    assert m["op.gemm"] > 0 and m["occupancy_ns.pe_gemm"] > 0
    assert (m["ipcq_intra_cube"] + m["ipcq_inter_cube"] == 0) == (partition in ("single_pe", "cube_repl_pe_tp"))


@pytest.mark.parametrize("mode", ["short", "ring"])
def test_gqa_prefill_bench_checks_both_modes(graph, monkeypatch, mode):
    monkeypatch.setenv("GQA_MODE", mode)
    monkeypatch.setenv("GQA_PES", "2")
    r = _run(graph, "gqa-prefill")
    assert r.metrics["latency_ns"] > 0 and r.metrics["pes_active"] == (2 if mode == "short" else 8)


def test_gqa_headline_reports_four_panels(graph):
    r = _run(graph, "gqa-headline")
    panels = ("prefill_c1", "prefill_c4_ring", "decode_c1_p8", "decode_c4_p8")
    for p in panels:
        assert r.metrics[f"{p}.latency_ns"] > 0
        for e in ("pe_dma", "pe_gemm", "pe_math", "pe_cpu"):
            assert r.metrics[f"{p}.occupancy_ns.{e}"] > 0
    m = r.metrics
    assert m["prefill_c1.ipcq_intra_cube"] + m["prefill_c1.ipcq_inter_cube"] == 0  # one PE, no messages
    assert m["decode_c1_p8.ipcq_intra_cube"] == 7 * 3  # a chain over 8 PEs, (m, l, O) per link
    # four users, each: 2 cubes x 7 PE-tree edges inside cubes and 1 edge between them
    assert (m["decode_c4_p8.ipcq_intra_cube"], m["decode_c4_p8.ipcq_inter_cube"]) == (4 * 2 * 7 * 3, 4 * 3)
    # four users, each a ring of 4 cubes holding 4 keys each: K and V of each block travel 3 steps
    assert m["prefill_c4_ring.ipcq_inter_cube"] == 4 * 4 * 2 * 3


def test_gqa_headline_runs_a_chosen_panel_and_refuses_unknown_ones(graph, monkeypatch):
    monkeypatch.setenv("GQA_PANELS", "decode_c1_p8")
    r = _run(graph, "gqa-headline", data=False)
    assert set(k.split(".")[0] for k in r.metrics) == {"decode_c1_p8"}
    monkeypatch.setenv("GQA_PANELS", "decode_c9")
    r = run_bench(discover().resolve("gqa-headline"), graph)
    assert not r.ok and "unknown panel(s) decode_c9" in r.error


def test_bench_parameters_are_checked(graph, monkeypatch):
    from kernbench.runtime.params import ParamError

    monkeypatch.setenv("GQA_PARTITION", "cube")
    with pytest.raises(ParamError, match="GQA_PARTITION: PARTITION='cube' is invalid"):
        run_bench(discover().resolve("gqa-decode"), graph)
    monkeypatch.setenv("GQA_PARTITION", "short")
    monkeypatch.setenv("GQA_HKV", "3")
    monkeypatch.setenv("GQA_CUBES", "2")
    r = run_bench(discover().resolve("gqa-decode"), graph)
    assert not r.ok and r.error_code == "AttentionConfigError" and "Hkv=3" in r.error
