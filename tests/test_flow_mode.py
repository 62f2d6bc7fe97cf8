"""Flow fidelity with the real components: ``session(fidelity=...)``, ``kernbench run --fidelity``, shared HBM,
data-mode numerics and the flow-fidelity golden digests (``kernbench.sim.flow``, ADR 0039)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import numpy as np
import pytest

from kernbench.cli.main import main
from kernbench.components import default_registry
from kernbench.runtime import session
from kernbench.runtime.bench import discover, run_bench
from kernbench.sim import GraphEngine, PeDmaWriteMsg
from kernbench.topology import AddressResolver, PhysAddr, load_topology

ROOT = Path(__file__).resolve().parents[1]

if "oplog_digest" in sys.modules:  # loaded by test_golden.py: share it, so its worker functions pickle by name
    golden = sys.modules["oplog_digest"]
else:
    _SPEC = importlib.util.spec_from_file_location("oplog_digest", ROOT / "tests" / "golden" / "oplog_digest.py")
    golden = importlib.util.module_from_spec(_SPEC)
    sys.modules["oplog_digest"] = golden
    _SPEC.loader.exec_module(golden)


@pytest.fixture(scope="module")
def graph():
    return load_topology(ROOT / "topologies" / "topology.yaml")


def _writes_into_one_hbm(graph, fidelity: str, n: int, nbytes: int):
    addr = AddressResolver(graph).hbm_addr(0, 0, 0)
    eng = GraphEngine(graph, default_registry(), fidelity=fidelity)
    reqs = [eng.submit(PeDmaWriteMsg(0, c, 0, PhysAddr(addr.sip, addr.cube, addr.kind, addr.offset + i * nbytes),
                                     nbytes)) for i, c in enumerate(range(1, n + 1))]
    eng.run()
    return reqs


@pytest.mark.parametrize("n", [2, 4])
def test_n_flows_into_one_hbm_controller_finish_at_n_drain_times(graph, n):
    """PE DMA writes of 64 KiB from PEs of ``n`` other cubes into one HBM slice: the HBM controller (8 channels
    of 16 GB/s = 128 GB/s) is the bottleneck, so the last write lands ``n - 1`` drains (64 KiB / 128 GB/s) after a
    lone write: N times a lone write's drain time after the fixed pipeline latency.

    Within 3 %: flows that share their last wire reach the HBM controller in pieces of one packet (4 KiB) of
    the slowest flow, and pieces handed over in the same window queue behind each other for up to one piece's
    time (about 40 ns of 2,100 here at n = 4). Packet fidelity gets the same last finish; which flow finishes
    first differs (its packets take turns in arrival order, the flows share fairly).
    """
    nbytes = 65536
    drain = nbytes / 128.0
    lone = _writes_into_one_hbm(graph, "flow", 1, nbytes)[0].latency_ns
    assert lone == pytest.approx(_writes_into_one_hbm(graph, "packet", 1, nbytes)[0].latency_ns, rel=1e-12)
    last = max(r.latency_ns for r in _writes_into_one_hbm(graph, "flow", n, nbytes))
    assert last == pytest.approx(lone + (n - 1) * drain, rel=0.03)
    packet_last = max(r.latency_ns for r in _writes_into_one_hbm(graph, "packet", n, nbytes))
    assert last == pytest.approx(packet_last, rel=0.03)


def test_session_takes_a_fidelity_and_flow_gives_the_same_numerics(graph):
    """The same host program in data mode: every tensor read back is identical in both fidelities (data move
    when requests complete; only the times differ)."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    out = {}
    for fid in ("packet", "flow"):
        with session(graph, data=True, fidelity=fid) as torch:
            assert torch.engine.fidelity == fid
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            out[fid] = (torch.to_numpy(ta), torch.to_numpy(tb), torch.now_ns)
    for x, y in zip(out["packet"][:2], out["flow"][:2], strict=True):
        np.testing.assert_array_equal(x, y)
    assert out["flow"][2] == pytest.approx(out["packet"][2], rel=0.05)


@pytest.mark.parametrize("bench,params", [("gemm-single-pe", {}), ("tp-mlp", {})])
def test_a_bench_in_data_mode_computes_the_same_values_in_flow_fidelity(graph, bench, params):
    info = discover().resolve(bench)
    pages = {}
    for fid in ("packet", "flow"):
        r = run_bench(info, graph, 0, data=True, params=params, fidelity=fid)
        assert r.ok, r.error
        assert r.engine.fidelity == fid
        mem = r.engine.memory
        pages[fid] = {base: bytes(mem.read(base, len(page))) for base, page in mem.pages()}
    assert pages["flow"].keys() == pages["packet"].keys()
    assert pages["flow"] == pages["packet"]


def test_session_refuses_a_bad_fidelity_before_compiling():
    with pytest.raises(ValueError, match="packet, flow"), session("no-such-topology", fidelity="exact"):
        pass


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("value", ["exact", "", "FLOW", "x" * 500])
def test_cli_prints_one_line_for_a_bad_fidelity(value):
    code, out, err = _cli(["run", "--bench", "gemm-single-pe", "--fidelity", value])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("kernbench: error: --fidelity ")
    assert "use packet" in err and len(err) < 300


def test_cli_runs_in_flow_fidelity_and_says_so(tmp_path):
    code, out, _ = _cli(["run", "--bench", "gemm-single-pe", "--fidelity", "flow", "--links",
                         str(tmp_path / "l.json"), "--links-top", "2"])
    assert code == 0 and "[flow fidelity]" in out.splitlines()[0]
    from kernbench.sim.links import read_links

    assert read_links(tmp_path / "l.json").traffic()
    code, out, _ = _cli(["run", "--bench", "gemm-single-pe"])
    assert code == 0 and "fidelity" not in out


def test_flow_golden_digests_match():
    """The flow-fidelity digest set (``oplog_digest.py --fidelity flow``, ``digests_flow.json``)."""
    want = golden.load(golden.DIGESTS_FLOW)
    assert set(want) == {c.id for c in golden.FLOW_CASES}, "run oplog_digest.py --fidelity flow --update"
    got = golden.compute(list(golden.FLOW_CASES), jobs=2)
    diff = golden.differences(want, got)
    assert not diff, "flow-fidelity digests moved; name the flow-model change and regenerate with " \
                     "`python tests/golden/oplog_digest.py --fidelity flow --update`:\n" + "\n".join(diff)
    assert all(c.id.endswith("/flow") for c in golden.FLOW_CASES)
    assert not set(want) & set(golden.load())  # the packet set is a different file with different keys
