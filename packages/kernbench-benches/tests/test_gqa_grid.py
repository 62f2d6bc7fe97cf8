"""The numerics grid (slow): every partition and mode against numpy over C x S x G x d, with several PE and cube
counts, KV heads and loop variants; timing mode gives the same window and op counts as data mode in every case.

Run with ``nox -s slow`` or ``python -m pytest packages/kernbench-benches/tests/test_gqa_grid.py -m slow``.
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from kernbench.layers.attention import PARTITIONS, VARIANTS, attention_reference, gqa_decode, gqa_prefill
from kernbench.layers.attention.benchkit import TOLERANCE, inputs
from kernbench.runtime import RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict

pytestmark = pytest.mark.slow

USERS, KEYS, GROUPS, DIMS = (1, 2, 4), (64, 1000, 4096), (1, 8), (64, 128)
PLACES = ((1, 1), (3, 2), (8, 1), (2, 4), (8, 2), (5, 4))  # (pes, cubes), cycled over the cases


def _decode_cases():
    out = []
    for i, (c, s, g, d, partition) in enumerate(itertools.product(USERS, KEYS, GROUPS, DIMS, PARTITIONS)):
        pes, cubes = PLACES[i % len(PLACES)]
        hkv = 1 + i % 2
        if partition == "single_pe":
            cubes = 1
        if partition == "short":
            cubes = min(cubes, hkv)
        cubes = min(cubes, 16 // c)
        out.append((c, s, g, d, hkv, partition, pes, cubes, VARIANTS[i % 3]))
    return out


def _prefill_cases():
    out = []
    for i, (c, s, g, d, mode) in enumerate(itertools.product(USERS, KEYS, GROUPS, DIMS, ("short", "ring"))):
        pes, cubes = PLACES[(i + 1) % len(PLACES)]
        hkv = 1 + (i // 2) % 2
        tq = s if s == 64 else 40 + i % 7  # the full triangle at S = 64, a ragged chunk of rows otherwise
        cubes = min(cubes, hkv, 16 // c) if mode == "short" else min(cubes, 16 // c)
        while g * hkv * tq < pes * cubes:
            pes -= 1
        out.append((c, s, g, d, hkv, tq, mode, pes, cubes))
    return out


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _same_timing(a, b) -> None:
    assert a.latency_ns == b.latency_ns and a.op_counts == b.op_counts and a.engines == b.engines
    assert a.ipcq_messages == b.ipcq_messages


DECODE = _decode_cases()
PREFILL = _prefill_cases()


@pytest.mark.parametrize("case", DECODE, ids=["C{}-S{}-G{}-d{}-Hkv{}-{}-p{}-c{}-{}".format(*c) for c in DECODE])
def test_decode_grid(graph, case):
    c, s, g, d, hkv, partition, pes, cubes, variant = case
    q, k, v = inputs(c, g * hkv, hkv, 1, s, d, seed=zlib.crc32(repr(case).encode()) % 1000)
    kwargs = {"partition": partition, "pes": pes, "cubes": cubes, "variant": variant}
    data = gqa_decode(RuntimeContext(graph, data=True), q, k, v, **kwargs)
    assert np.abs(data.out - attention_reference(q, k, v)).max() < TOLERANCE
    _same_timing(gqa_decode(RuntimeContext(graph), q, k, v, **kwargs), data)


@pytest.mark.parametrize("case", PREFILL, ids=["C{}-S{}-G{}-d{}-Hkv{}-Tq{}-{}-p{}-c{}".format(*c) for c in PREFILL])
def test_prefill_grid(graph, case):
    c, s, g, d, hkv, tq, mode, pes, cubes = case
    q, k, v = inputs(c, g * hkv, hkv, tq, s, d, seed=zlib.crc32(repr(case).encode()) % 1000)
    data = gqa_prefill(RuntimeContext(graph, data=True), q, k, v, mode=mode, pes=pes, cubes=cubes)
    assert np.abs(data.out - attention_reference(q, k, v, causal=True)).max() < TOLERANCE
    _same_timing(gqa_prefill(RuntimeContext(graph), q, k, v, mode=mode, pes=pes, cubes=cubes), data)


def test_long_context_decode_beats_one_pe_and_keeps_scratch_bounded():
    """cube_sp_pe_sp at S = 128K over 8 cubes x 8 PEs in timing mode, in a 256 KiB scratch, finishes far
    sooner in simulated time than single_pe at the same S."""
    graph = compile_spec(spec_from_dict({"pe": {"tcm": {"scratch_mib": 0.25}}}))
    q, k, v = inputs(1, 8, 1, 1, 131072, 64, seed=40)
    wide = gqa_decode(RuntimeContext(graph), q, k, v, partition="cube_sp_pe_sp", pes=8, cubes=8)
    one = gqa_decode(RuntimeContext(graph), q, k, v, partition="single_pe")
    assert wide.pes_active == 64 and wide.latency_ns * 20 < one.latency_ns
