"""Bench discovery, audit, resolution and the NO_REQUESTS rule, on throwaway bench packages."""

from __future__ import annotations

import textwrap
import uuid

import pytest

from kernbench.runtime.bench import BenchError, bench, discover, run_bench
from kernbench.topology import compile_spec, spec_from_dict


def _package(tmp_path, monkeypatch, modules: dict[str, str]) -> str:
    name = f"benchpkg_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    for mod, body in modules.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


GOOD = """
    '''Env: NONE.'''
    from kernbench.runtime.bench import bench

    @bench(name="{name}", description="does {name}")
    def run(torch):
        torch.zeros((4, 4))
"""


def test_discovery_sorts_indexes_and_skips_helpers(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"zeta": GOOD.format(name="zeta-bench"),
                                           "alpha": GOOD.format(name="alpha-bench"),
                                           "_helper": "X = 1\n"})
    lib = tmp_path / pkg / "library"  # a sub-package is a library benches import, not a bench
    lib.mkdir()
    (lib / "__init__.py").write_text("def helper():\n    return 1\n")
    reg = discover(pkg)
    assert [b.name for b in reg.benches] == ["alpha-bench", "zeta-bench"]
    assert reg.resolve(1).name == "alpha-bench" and reg.resolve("2").name == "zeta-bench"
    assert reg.resolve("zeta-bench").doc == "Env: NONE."
    with pytest.raises(BenchError, match="unknown bench 'nope'; valid benches: 1:alpha-bench, 2:zeta-bench"):
        reg.resolve("nope")
    with pytest.raises(BenchError, match="unknown bench 3"):
        reg.resolve(3)


def test_a_module_without_a_bench_fails_the_audit(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"ok": GOOD.format(name="ok"), "forgot": "def run(torch):\n    pass\n"})
    with pytest.raises(BenchError, match=r"forgot registers no bench"):
        discover(pkg)


def test_duplicate_names_are_rejected(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"a": GOOD.format(name="same"), "b": GOOD.format(name="same")})
    with pytest.raises(BenchError, match="registered twice: same"):
        discover(pkg)


@pytest.mark.parametrize("name", ["CamelCase", "snake_case", "-lead", "trail-", ""])
def test_names_must_be_kebab_case(name):
    with pytest.raises(BenchError, match="kebab-case"):
        bench(name=name, description="x")


def test_description_is_required():
    with pytest.raises(BenchError, match="description"):
        bench(name="fine", description="  ")


def test_no_requests_is_an_error(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"idle": """
        from kernbench.runtime.bench import bench

        @bench(name="idle", description="submits nothing")
        def run(torch):
            pass
    """})
    graph = compile_spec(spec_from_dict({}))
    result = run_bench(discover(pkg).resolve("idle"), graph)
    assert not result.ok and result.error_code == "NO_REQUESTS"


def test_a_failing_bench_reports_its_error(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"boom": """
        from kernbench.runtime import DPPolicy
        from kernbench.runtime.bench import bench

        def kernel(tl, a):
            raise ValueError("bad tile")

        @bench(name="boom", description="a kernel that raises")
        def run(torch):
            a = torch.zeros((4, 4), policy=DPPolicy(num_cubes=1, num_pes=1))
            torch.launch("boom", kernel, a)
    """})
    graph = compile_spec(spec_from_dict({}))
    result = run_bench(discover(pkg).resolve("boom"), graph)
    assert not result.ok and result.error_code == "KernelError"
    assert "kernel 'boom' failed on sip0.cube0.pe0: ValueError: bad tile" in result.error


def test_summary_counts_and_latency(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch, {"mm": """
        from kernbench.runtime import DPPolicy
        from kernbench.runtime.bench import bench

        def kernel(tl, a, b, c):
            tl.wait(tl.composite(a, b, c))

        @bench(name="mm", description="one composite")
        def run(torch):
            one = DPPolicy(num_cubes=1, num_pes=1)
            a = torch.zeros((64, 96), policy=one)
            b = torch.zeros((96, 128), policy=one)
            c = torch.empty((64, 128), "float32", one)
            torch.launch("mm", kernel, a, b, c)
    """})
    graph = compile_spec(spec_from_dict({}))
    r = run_bench(discover(pkg).resolve("mm"), graph)
    tiles = 2 * 4 * 2  # tile tm 32 x tn 32 x tk 64: ceil(64/32) * ceil(128/32) * ceil(96/64)
    assert r.ok and r.op_counts["gemm"] == tiles and r.stages["GEMM"]["count"] == tiles
    assert r.op_counts["dma_read"] == 2 * tiles and r.op_counts["dma_write"] == 2 * 4
    assert r.stages["GEMM"]["occupancy_ns"] == pytest.approx(tiles * 2 * 32 * 32 * 64 / 8e3)
    records = r.records
    assert r.latency_ns == pytest.approx(max(x.t_end for x in records) - min(x.t_start for x in records))
    assert list(r.pe_exec_start_ns) == ["sip0.cube0.pe0"]
