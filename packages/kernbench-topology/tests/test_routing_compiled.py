"""The route search's loop in C (kernbench-accel's ``settle``, ADR 0046) takes the Python loop's steps.

Two routers on the same topology answer the same shuffled queries, one with ``KERNBENCH_ACCEL=0`` (the Python
loop) and one with the compiled loop; every path and distance must be equal, and so must every search's state
afterwards: distances, predecessors, settled nodes, the heap, the sequence counter and whether it left the
source's cube or SIP (later queries resume these searches, so a difference there would surface later), and every
neighbour list made on the way (the compiled loop makes them itself, from the graph's edges less the intent's
excluded kinds). Skipped
without kernbench-accel, unless ``KERNBENCH_REQUIRE_ACCEL`` is set (CI).
"""

from __future__ import annotations

import os
import random

import pytest

from kernbench.topology import PathRouter, builtin
from kernbench.topology import naming as nm
from kernbench.topology.accel import compiled_settle

if compiled_settle() is None:
    if os.environ.get("KERNBENCH_REQUIRE_ACCEL"):
        raise RuntimeError("kernbench-accel is not importable but KERNBENCH_REQUIRE_ACCEL is set")
    pytest.skip("kernbench-accel is not installed", allow_module_level=True)


def _queries(graph, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    spec = graph.spec
    pes = [nm.pe_block(s, c, p, "pe_dma") for s in range(spec.system.sips.count) for c in range(spec.cubes_per_sip)
           for p in range(spec.pes_per_cube)]
    hbms = [n for n, node in graph.nodes.items() if node.type == "hbm_ctrl"]
    out = [("pe_dma", rng.choice(pes), rng.choice(hbms)) for _ in range(150)]
    out += [("control", nm.HOST, rng.choice(pes).replace("pe_dma", "pe_mmu")) for _ in range(30)]
    out += [("memory", nm.HOST, rng.choice(hbms)) for _ in range(20)]
    rng.shuffle(out)
    return out


def _ask(router: PathRouter, queries) -> list:
    got = []
    for kind, src, dst in queries:
        ask = {"pe_dma": router.pe_dma_path, "control": router.control_path, "memory": router.memory_path}[kind]
        got.append(ask(src, dst))
    return got


def _state(router: PathRouter) -> dict:
    return {key: (dict(s.dist), dict(s.prev), set(s.done), list(s.heap), s.seq, s.left_cube, s.left_sip)
            for key, s in router._trees.items()}


@pytest.mark.parametrize("seed", [3, 4])
def test_the_compiled_search_takes_the_python_searchs_steps(monkeypatch, seed):
    graph = builtin("6sip_2x3_torus_2d")
    queries = _queries(graph, seed)
    monkeypatch.setenv("KERNBENCH_ACCEL", "0")
    python = PathRouter(graph)
    want = _ask(python, queries)
    monkeypatch.setenv("KERNBENCH_ACCEL", "1")
    compiled = PathRouter(graph)
    got = _ask(compiled, queries)
    assert got == want
    assert compiled.searched == python.searched > 20 and compiled.reused == python.reused
    assert _state(compiled) == _state(python)
    # the neighbour lists the compiled loop made (kernbench-accel makes them in C) are __missing__'s, in order
    assert {name: list(adj.items()) for name, adj in compiled._adj.items()} == \
        {name: list(adj.items()) for name, adj in python._adj.items()}
    assert set(compiled._adj) == {"data", "data_local", "all", "memory"}
