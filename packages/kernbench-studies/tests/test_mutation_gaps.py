"""Behaviour the mutation run (tests/mutation/mutate.py) found untested in the studies, pinned with values
computed here independently of the code under test."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

import pytest

from kernbench.studies import cache
from kernbench.studies.gemm_model import GemmCase, predict
from kernbench.studies.registry import get_study
from kernbench.studies.runner import RunOptions, out_dir
from kernbench.topology import compile_spec, spec_from_dict
from kernbench.topology import naming as nm


def _fresh_digest(modules: tuple[str, ...]) -> str:
    cache.source_files.cache_clear()
    cache.source_digest.cache_clear()
    return cache.source_digest(modules)


def test_the_source_digest_follows_the_bytes_of_every_file_it_covers(tmp_path, monkeypatch):
    """A study point reruns when the code it imports changes: the digest hashes each file's name *and* bytes.

    A stand-alone module (it imports no kernbench module) is its own closure, so its digest is
    ``sha256(name + NUL + sha256(bytes))``; editing one byte of it must change the digest."""
    name = "kernbench_mutation_gap_probe"
    module = tmp_path / f"{name}.py"
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module.write_bytes(b"VALUE = 1\n")
        importlib.invalidate_caches()
        first = _fresh_digest((name,))
        assert first == hashlib.sha256(name.encode() + b"\0" + hashlib.sha256(b"VALUE = 1\n").digest()).hexdigest()

        module.write_bytes(b"VALUE = 2\n")  # same name, same size, other bytes
        second = _fresh_digest((name,))
        assert second == hashlib.sha256(name.encode() + b"\0" + hashlib.sha256(b"VALUE = 2\n").digest()).hexdigest()
        assert second != first
    finally:
        cache.source_files.cache_clear()
        cache.source_digest.cache_clear()


# --------------------------------------------------------------------------- the GEMM pipeline model


@pytest.fixture(scope="module")
def default_graph():
    return compile_spec(spec_from_dict({}))


def test_one_tile_passes_every_stage_once(default_graph):
    """A single 32 x 64 x 32 tile: T = d + R + F + G + S + W, nothing paced by the bottleneck (n - 1 = 0).

    From the default constants: F = (32·64 + 64·32)·2 B / 512 GB/s = 16 ns, G = 2·32·32·64 / 8e3 = 16.384 ns,
    S = 32·32·2 B / 512 GB/s = 4 ns; d is the scheduler-to-DMA link's latency."""
    st = predict(default_graph, GemmCase(32, 64, 32, "ref_ref", 0, 1 << 20, 2 << 20))
    assert (st.fetch_ns, st.gemm_ns, st.store_ns) == (pytest.approx(16.0), pytest.approx(16.384), pytest.approx(4.0))
    d = default_graph.edge(nm.pe_block(0, 0, 0, "pe_scheduler"), nm.pe_block(0, 0, 0, "pe_dma")).latency_ns
    assert st.read_ns > 0 and st.write_ns > 0
    assert st.total_ns == pytest.approx(d + st.read_ns + 16.0 + 16.384 + 4.0 + st.write_ns)


def test_the_bottleneck_paces_the_tiles_after_the_first(default_graph):
    """Four K steps of one 32 x 32 output block with both operands in TCM (no reads, d = 0): every tile fetches
    16 ns and multiplies 16.384 ns; the one store (4 ns) and write-back (W) spread over the 4 tiles, so the
    per-tile means are S = 1 ns and W / 4. T = F + G + 3 · max(G, W / 4) + 4 + W."""
    st = predict(default_graph, GemmCase(32, 256, 32, "load_load", 0, 1 << 20, 2 << 20))
    assert (st.read_ns, st.fetch_ns, st.gemm_ns, st.store_ns) == \
        (0.0, pytest.approx(16.0), pytest.approx(16.384), pytest.approx(1.0))
    w = 4 * st.write_ns
    assert st.total_ns == pytest.approx(16.0 + 16.384 + 3 * max(16.384, w / 4) + 4.0 + w)
    assert st.compute_bound_ns == pytest.approx(16.0 + 4 * 16.384 + 4.0)


# --------------------------------------------------------------------------- where results go


def test_out_is_the_folder_of_one_study_and_holds_a_folder_per_study_for_several():
    study = get_study("gemm")
    assert out_dir(study, RunOptions(out=Path("some/where")), several=False) == Path("some/where")
    assert out_dir(study, RunOptions(out=Path("some/where")), several=True) == Path("some/where/gemm")
    assert out_dir(study, RunOptions(), several=False) == Path("out/studies/gemm")
    assert out_dir(study, RunOptions(), several=True) == Path("out/studies/gemm")
