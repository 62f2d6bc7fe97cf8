"""The study runner: executors agree byte for byte, the cache keys and recovers, bad options fail clearly."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from kernbench.studies import results as res
from kernbench.studies.base import SchedulerError, StudyError
from kernbench.studies.cache import ResultCache, key_parts, source_files
from kernbench.studies.progress import Progress
from kernbench.studies.registry import get_study, resolve
from kernbench.studies.runner import RunOptions, parse_where, plan, run, run_studies

ROOT = Path(__file__).resolve().parents[3]
TOPOLOGIES = ROOT / "topologies"
SMALL = parse_where(["series=tiles", "variant=load_ref,load_load", "k_tiles=1,2,3"])


def _options(tmp_path: Path, name: str, **kw) -> RunOptions:
    return RunOptions(out=tmp_path / name / "out", cache_root=tmp_path / name / "cache", topology_dir=TOPOLOGIES,
                      where=SMALL, argv=("test", name), progress=False, **kw)


def _body(path: Path) -> str:
    return res.dumps(res.strip_run(res.load(path)))


def test_serial_process_and_dask_runs_write_the_same_results(tmp_path):
    pytest.importorskip("distributed")
    studies = resolve("gemm")
    paths = {}
    for executor in ("serial", "process", "dask"):
        (r,) = run_studies(studies, _options(tmp_path, executor, executor=executor, jobs=2))
        assert (r.points, r.ran, r.cached) == (6, 6, 0)
        paths[executor] = r.results
    bodies = {e: _body(p) for e, p in paths.items()}
    assert bodies["serial"] == bodies["process"] == bodies["dask"]
    # everything but the run record is identical on disk too: the files differ only inside provenance.run
    docs = {e: res.load(p) for e, p in paths.items()}
    assert {d["provenance"]["run"]["executor"] for d in docs.values()} == {"serial", "process", "dask"}
    points = docs["serial"]["points"]
    assert [(p["params"]["variant"], p["params"]["k_tiles"]) for p in points] == [
        (v, t) for v in ("load_ref", "load_load") for t in (1, 2, 3)]  # grid order, whatever finished first


def test_a_links_record_passes_through_every_executor_and_the_cache_unchanged(tmp_path):
    """The all-reduce links panel's long ``links`` text is one string value: serial, process-pool and Dask runs
    write the same bytes, a second run reads it back from the cache, and the CSV leaves it out."""
    pytest.importorskip("distributed")
    where = parse_where(["panel=links", "topology=6sip_2x3_torus_2d.yaml"])
    studies = resolve("allreduce")
    paths = {}
    for executor in ("serial", "process", "dask"):
        opts = _options(tmp_path, executor, executor=executor, jobs=2)
        opts = RunOptions(**{**opts.__dict__, "where": where})
        (r,) = run_studies(studies, opts)
        assert (r.points, r.ran) == (1, 1)
        paths[executor] = r.results
    bodies = {e: _body(p) for e, p in paths.items()}
    assert bodies["serial"] == bodies["process"] == bodies["dask"]
    (point,) = res.load(paths["serial"])["points"]
    assert point["labels"] == {"panel": "links"} and len(point["values"]["links"]) > 10_000
    again = run_studies(studies, RunOptions(**{**_options(tmp_path, "serial", executor="serial").__dict__,
                                                "where": where}))[0]
    assert (again.ran, again.cached) == (0, 1)
    assert res.load(again.results)["points"] == res.load(paths["serial"])["points"]  # the cache sorts value keys
    header, row = (paths["serial"].parent / res.RESULTS_CSV).read_text().splitlines()
    assert "links" not in header.split(",") and {"window_ns", "busiest_link", "link_stats"} <= set(header.split(","))
    assert len(row) < 1000


def test_second_run_is_cached_and_dry_run_says_why(tmp_path):
    opts = _options(tmp_path, "c", executor="serial")
    (study,) = resolve("gemm")
    first = plan([study], opts)[0]
    assert [pp.reason for pp in first.points] == ["it has not run before"] * 6
    run([first], opts)
    second = plan([study], opts)[0]
    assert all(pp.cached and pp.reason == "cached" for pp in second.points)
    (r,) = run([second], opts)
    assert (r.ran, r.cached) == (0, 6)
    forced = plan([study], RunOptions(**{**opts.__dict__, "force": True}))[0]
    assert all(not pp.cached and pp.reason == "--force" for pp in forced.points)


def test_a_corrupt_entry_is_recomputed_not_trusted(tmp_path):
    opts = _options(tmp_path, "x", executor="serial")
    (study,) = resolve("gemm")
    run(plan([study], opts), opts)
    p = plan([study], opts)[0].points[0]
    entry = opts.cache_root / "studies" / p.key[:2] / f"{p.key}.json"
    good = json.loads(entry.read_text())
    entry.write_text('{"truncated": ')
    again = plan([study], opts)[0].points[0]
    assert not again.cached and again.reason == "its cache entry is corrupt"
    run(plan([study], opts), opts)
    assert json.loads(entry.read_text())["values"] == good["values"]
    entry.write_text(json.dumps(dict(good, values={"composite_ns": "x", "tiles": [1]})))  # a list is no scalar
    assert ResultCache(opts.cache_root).get(p.key)[0] == "corrupt"
    assert not list(entry.parent.glob("*.tmp"))  # atomic writes leave no temporary files


def test_key_covers_params_topology_bytes_overrides_and_source(tmp_path):
    study = get_study("allreduce")
    topo = tmp_path / "topos"
    topo.mkdir()
    for name in ("6sip_2x3_torus_2d.yaml", "ccl.yaml"):
        shutil.copy(TOPOLOGIES / name, topo / name)
    params = {"topology": "6sip_2x3_torus_2d.yaml", "bytes_per_pe": 64, "buffer_kind": "tcm", "hbm_channel_gbs": None}
    base = key_parts(study, params, topo)
    assert key_parts(study, {**params, "bytes_per_pe": 128}, topo).key() != base.key()
    assert key_parts(study, {**params, "hbm_channel_gbs": 32.0}, topo).overrides == {"cube.hbm.channel_bw_gbs": 32.0}
    assert key_parts(study, {**params, "hbm_channel_gbs": 32.0}, topo).key() != base.key()
    (topo / "ccl.yaml").write_text((topo / "ccl.yaml").read_text() + "\n# edited\n")
    changed = key_parts(study, params, topo)
    assert changed.key() != base.key()
    cache = ResultCache(tmp_path / "cache")
    cache.put(base, {"allreduce_ns": 1.0}, 0.1)
    assert cache.why(changed) == "topology file ccl.yaml changed"
    assert cache.why(type(base)(**{**base.__dict__, "source": "other"})) == "kernbench source changed"
    # the key depends on the files' bytes, not on the folder they are read from
    assert base.key() == key_parts(study, params, TOPOLOGIES).key()


def test_source_closure_covers_the_simulator_but_not_the_figures():
    names = [n for n, _ in source_files(("kernbench.studies.gemm",))]
    packages = {n.split("/")[0] for n in names if "/" in n}
    assert {"kernbench.sim", "kernbench.components", "kernbench.tl", "kernbench.runtime",
            "kernbench.topology"} <= packages
    assert "kernbench.benches.matmul_composite" in names  # the kernel the points launch
    assert not any("figures" in n or "report" in n or "runner" in n for n in names)


@pytest.mark.parametrize(("kw", "match"), [
    ({"jobs": 0}, "--jobs must be a positive integer, got 0"),
    ({"executor": "threads"}, "--executor 'threads'"),
    ({"scheduler": "tcp://127.0.0.1:1", "executor": "process"}, "--scheduler needs --executor dask"),
])
def test_bad_options(tmp_path, kw, match):
    with pytest.raises(StudyError, match=match):
        plan(resolve("gemm"), RunOptions(topology_dir=TOPOLOGIES, **kw))


def test_unknown_study_lists_the_known_names():
    with pytest.raises(StudyError, match=r"unknown study 'nope'; known studies: gemm, allreduce, gqa"):
        resolve("nope")


def test_unwritable_out_is_a_study_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    opts = RunOptions(out=blocker / "sub", cache_root=tmp_path / "cache", topology_dir=TOPOLOGIES, where=SMALL)
    with pytest.raises(StudyError, match=r"cannot write results to .*Not a directory"):
        run_studies(resolve("gemm"), opts)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_fails_fast(tmp_path):
    opts = _options(tmp_path, "s", executor="dask", scheduler=f"tcp://127.0.0.1:{_closed_port()}")
    t0 = time.perf_counter()
    with pytest.raises(SchedulerError, match="cannot reach the Dask scheduler"):
        run_studies(resolve("gemm"), opts)
    assert time.perf_counter() - t0 < 10


def test_a_silent_peer_is_not_a_scheduler_and_does_not_hang(tmp_path):
    """A listener that accepts and never answers: the client's handshake times out within 10 s."""
    pytest.importorskip("distributed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    conns = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conns.append(server.accept()[0])

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    opts = _options(tmp_path, "silent", executor="dask", scheduler=f"tcp://127.0.0.1:{server.getsockname()[1]}")
    t0 = time.perf_counter()
    try:
        with pytest.raises(SchedulerError, match=r"not a working Dask scheduler|sent no handshake"):
            run_studies(resolve("gemm"), opts)
    finally:
        stop.set()
        t.join()
        for c in conns:
            c.close()
        server.close()
    assert time.perf_counter() - t0 < 10


def test_progress_bar_only_when_enabled():
    class Tty:
        def __init__(self):
            self.text = ""

        def isatty(self):
            return False

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    quiet = Tty()
    p = Progress(3, "gemm", False, quiet)  # off a terminal with None: plain lines (test_studies_progress.py)
    p.step()
    p.close()
    assert quiet.text == ""
    loud = Tty()
    p = Progress(2, "gemm", True, loud)
    p.step()
    p.step()
    p.close()
    assert "2/2 points" in loud.text and loud.text.endswith("\n")
