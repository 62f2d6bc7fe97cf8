"""`kernbench web` without a browser: what the server answers, to whom, on which address, and its errors.

Security: only the viewer's fixed paths are served (traversal, encoded traversal and absolute paths are 404),
the server listens on loopback unless --host names another address (with a warning), requests must name a
loopback host, runs can only be started with the viewer's header, and bad files give one-line errors.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernbench.cli.web.server as web_server
from kernbench.cli.web import PortInUseError, ViewerInputError, ViewerServer, ViewerState, is_loopback
from kernbench.runtime.bench import discover, run_bench
from kernbench.sim.links import LinksFileError, link_report, write_links
from kernbench.topology import load_topology

from .conftest import DEFAULT_TOPOLOGY, ROOT


@pytest.fixture(scope="module")
def graph():
    return load_topology(DEFAULT_TOPOLOGY)


@pytest.fixture(scope="module")
def files(graph, tmp_path_factory):
    """A run summary and a links file of gemm-single-pe on the default topology."""
    out = tmp_path_factory.mktemp("web")
    result = run_bench(discover().resolve("gemm-single-pe"), graph, 0)
    run = out / "run.json"
    run.write_text(json.dumps(result.to_json()))
    links = write_links(link_report(result.engine, {"bench": result.bench, "device": 0,
                                                    "topology_file": str(DEFAULT_TOPOLOGY)}), out / "links.json")
    return run, links


def serve(graph, files, folder):
    """A server on a free loopback port over private copies of the run and links files."""
    run, links = folder / "run.json", folder / "links.json"
    run.write_bytes(files[0].read_bytes())
    links.write_bytes(files[1].read_bytes())
    return ViewerServer(ViewerState(graph, str(run), str(links)), "127.0.0.1", 0).start(), run, links


@pytest.fixture(scope="module")
def served(graph, files, tmp_path_factory):
    server, run, links = serve(graph, files, tmp_path_factory.mktemp("served"))
    yield server, run, links
    server.stop()


def request(server, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    hdrs = {"Host": f"127.0.0.1:{server.port}", **(headers or {})}
    if body is not None:
        hdrs["Content-Length"] = str(len(body))
    for k, v in hdrs.items():
        conn.putheader(k, v)
    conn.endheaders(body)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


TRAVERSALS = ["/../", "/../../../../etc/passwd", "/..%2f..%2f..%2fetc%2fpasswd", "/%2e%2e/%2e%2e/etc/passwd",
              "/%252e%252e/etc/passwd", "/..\\..\\etc\\passwd", "//etc/passwd", "/etc/passwd",
              "/app.js/../server.py", "/./index.html", "/assets/app.js", "/server.py", "/web/server.py",
              "/__init__.py", "/data/../server.py", "/data/graph.json/..", "/%2fetc%2fpasswd", "/data",
              f"{Path(__file__).resolve()}", "http://127.0.0.1/index.html", "file:///etc/passwd"]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_anything_but_the_viewer_paths_is_404(served, path):
    status, _, body = request(served[0], "GET", path)
    assert status == 404, path
    assert b"root:" not in body and b"import " not in body and b"Traceback" not in body


# Paths that name files which EXIST outside the viewer's assets folder (``kernbench/cli/web/assets``), whichever way
# a request might be resolved against that folder: relative to it, after dropping an ``/assets/`` prefix, after
# URL-decoding (once or twice), or as an absolute path. A server that ever looks a request up on disk serves one.
WEB_DIR = Path(web_server.__file__).parent
NOT_FOUND_PAGE = b"<!DOCTYPE html><title>404</title><h1>404: not found</h1><p>The viewer serves / only.</p>\n"
UP = "../" * 24  # more than enough to climb from any install location to /
ESCAPES = [
    ("/../server.py", WEB_DIR / "server.py"),
    ("/assets/../server.py", WEB_DIR / "server.py"),
    ("/./../server.py", WEB_DIR / "server.py"),
    ("/../__init__.py", WEB_DIR / "__init__.py"),
    ("/../../main.py", WEB_DIR.parent / "main.py"),
    ("/assets/../../main.py", WEB_DIR.parent / "main.py"),
    ("/..%2fserver.py", WEB_DIR / "server.py"),
    ("/%2e%2e/server.py", WEB_DIR / "server.py"),
    ("/%2E%2E%2Fserver.py", WEB_DIR / "server.py"),
    ("/.%2e/server.py", WEB_DIR / "server.py"),
    ("/%252e%252e%252fserver.py", WEB_DIR / "server.py"),
    ("/..%2f..%2fweb/server.py", WEB_DIR / "server.py"),
    ("/assets/..%2f..%2fweb/server.py", WEB_DIR / "server.py"),
    ("/assets/%2e%2e/%2e%2e/main.py", WEB_DIR.parent / "main.py"),
    (f"/{UP}etc/passwd", Path("/etc/passwd")),
    (f"/assets/{UP}etc/passwd", Path("/etc/passwd")),
    ("/assets/../../../../../../etc/passwd", Path("/etc/passwd")),
    (f"/{UP.replace('/', '%2f')}etc%2fpasswd", Path("/etc/passwd")),
    (f"/{UP.replace('..', '%2e%2e')}etc/passwd", Path("/etc/passwd")),
    ("/assets//etc/passwd", Path("/etc/passwd")),
    ("/assets/%2fetc%2fpasswd", Path("/etc/passwd")),
    ("/%2Fetc/passwd", Path("/etc/passwd")),
    (f"/{WEB_DIR / 'server.py'}", WEB_DIR / "server.py"),
    (f"{WEB_DIR / 'server.py'}", WEB_DIR / "server.py"),
    (f"/assets/{WEB_DIR / 'server.py'}", WEB_DIR / "server.py"),
    (f"/assets{WEB_DIR / 'server.py'}", WEB_DIR / "server.py"),
    (f"/{str(WEB_DIR / 'server.py').replace('/', '%2f')}", WEB_DIR / "server.py"),
    (f"/{UP}{str(WEB_DIR / 'server.py').lstrip('/')}", WEB_DIR / "server.py"),
]


@pytest.mark.parametrize(("path", "target"), ESCAPES, ids=[p for p, _ in ESCAPES])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_paths_onto_existing_files_outside_the_assets_are_refused(served, path, target, method):
    assert target.is_file() or not Path("/etc/passwd").exists(), target  # the escape would land on a real file
    status, headers, body = request(served[0], method, path)
    assert status in (400, 404), (path, status)
    if method == "GET" and status == 404:
        assert body == NOT_FOUND_PAGE
    if target.is_file():
        content = target.read_bytes()
        assert content[:200] not in body and int(headers["Content-Length"]) != len(content)


def test_viewer_paths_are_served_with_a_strict_policy(served):
    server = served[0]
    status, headers, body = request(server, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html") and b'src="app.js"' in body
    assert "script-src 'self'" in headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"
    for path, ctype in (("/app.js", "text/javascript"), ("/graph.js", "text/javascript"), ("/app.css", "text/css"),
                        ("/index.html?x=1", "text/html")):
        status, headers, _ = request(server, "GET", path)
        assert status == 200 and headers["Content-Type"].startswith(ctype), path
    status, _, body = request(server, "GET", "/data/graph.json")
    data = json.loads(body)
    assert status == 200 and data["schema"] == "kernbench.web/1" and data["topology"]["nodes"] == 3276
    assert json.loads(request(server, "GET", "/data/run.json")[2])["bench"] == "gemm-single-pe"
    links = json.loads(request(server, "GET", "/data/links.json")[2])
    assert links["run"]["bench"] == "gemm-single-pe" and all(r["bytes"] or r["messages"] for r in links["links"])


def test_requests_must_name_a_loopback_host(served):
    server = served[0]
    status, _, _ = request(server, "GET", "/", headers={"Host": f"evil.example:{server.port}"})
    assert status == 421
    assert request(server, "GET", "/", headers={"Host": f"localhost:{server.port}"})[0] == 200


# A loopback name followed by more text is another host: only an exact match of NAME:PORT may pass.
LOOKALIKE_HOSTS = ["127.0.0.1.evil.example", "127.0.0.1.evil.example:{port}", "localhost.evil.example",
                   "localhost.evil.example:{port}", "127.0.0.1:{port}.evil", "127.0.0.1:{port}0",
                   "localhost:{port}.evil.example", "127.0.0.1:{port}@evil.example", "[::1]:{port}.evil",
                   "localhost:{port} evil", "evil.example:{port}", "evil.127.0.0.1:{port}", "xlocalhost:{port}",
                   "127.0.0.2:{port}", "0.0.0.0:{port}", "127.0.0.1:{other}", "localhost:{other}", "", ":{port}"]


def _host_status(server, host: str | None, method: str = "GET", path: str = "/") -> int:
    """The status of one request whose Host header is exactly ``host`` (None: no Host header at all)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status == 421:
        assert body == b"this viewer answers loopback host names only\n"
    return resp.status


@pytest.mark.parametrize("host", LOOKALIKE_HOSTS)
def test_a_host_that_only_starts_like_loopback_is_refused(served, host):
    server = served[0]
    name = host.format(port=server.port, other=server.port + 1)
    assert _host_status(server, name) == 421, name
    # The run API is behind the same check: a refused host never reaches the header or body checks (403/400).
    assert _host_status(server, name, "POST", "/api/run") == 421, name


def test_exact_loopback_hosts_with_the_port_are_accepted_and_nothing_else(served):
    server = served[0]
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", f"LocalHost:{server.port}",
                 f"[::1]:{server.port}"):
        assert _host_status(server, host) == 200, host
    # ADR 0025: the Host must name a loopback address *with its port*; a bare name means port 80, not this server.
    for host in ("127.0.0.1", "localhost", "[::1]", None):
        assert _host_status(server, host) == 421, host


def test_runs_need_the_viewer_header_and_valid_json(served):
    server = served[0]
    body = json.dumps({"bench": "gemm-single-pe", "device": 0}).encode()
    assert request(server, "POST", "/api/run", body, {"Content-Type": "application/json"})[0] == 403
    assert request(server, "POST", "/api/run", body, {"X-Kernbench": "run", "Content-Type": "text/plain"})[0] == 403
    hdr = {"X-Kernbench": "run", "Content-Type": "application/json"}
    assert request(server, "POST", "/api/run", b"{oops", hdr)[0] == 400
    assert request(server, "POST", "/api/run", b"x" * 5000, hdr)[0] == 400
    status, _, out = request(server, "POST", "/api/run", json.dumps({"bench": "nope"}).encode(), hdr)
    error = json.loads(out)["error"]  # the numbered list grows as benches are registered
    assert status == 422 and error.startswith("unknown bench 'nope'; valid benches: 1:") and ":ccl-allreduce" in error
    status, _, out = request(server, "POST", "/api/run", json.dumps({"bench": "gemm-single-pe", "device": 7}).encode(),
                             hdr)
    assert status == 422 and "device 7 does not exist; use a SIP index 0..1" in json.loads(out)["error"]
    assert request(server, "GET", "/api/run")[0] == 404
    benches = json.loads(request(server, "GET", "/api/benches")[2])
    assert [b["name"] for b in benches] == [b.name for b in discover().benches]


def test_no_runs_hides_the_run_api(graph):
    server = ViewerServer(ViewerState(graph, allow_runs=False), "127.0.0.1", 0).start()
    try:
        hdr = {"X-Kernbench": "run", "Content-Type": "application/json"}
        assert request(server, "POST", "/api/run", b"{}", hdr)[0] == 404
        assert request(server, "GET", "/api/benches")[0] == 404
        assert request(server, "GET", "/data/links.json")[2] == b"null"
    finally:
        server.stop()


def test_a_file_that_goes_bad_while_serving_gives_an_error_answer_not_a_traceback(graph, files, tmp_path):
    server, run, links = serve(graph, files, tmp_path)
    links.write_text('{"schema": "kernbench.links/1", "links": [')
    status, headers, body = request(server, "GET", "/data/links.json")
    assert status == 422 and headers["Content-Type"] == "application/json"
    msg = json.loads(body)["error"]
    assert msg.startswith(f"links file {links} is not valid JSON") and "kernbench run" in msg
    run.write_text("[]")
    status, _, body = request(server, "GET", "/data/run.json")
    assert status == 422 and json.loads(body)["error"] == (f"run file {run} holds an empty list; write it with "
                                                           f"`kernbench run --bench NAME --json > RUN.json`")
    assert b"Traceback" not in body
    server.stop()


def test_bad_files_fail_before_serving(graph, files, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"bench": 3}')
    with pytest.raises(ViewerInputError, match="is not a run result"):
        ViewerState(graph, str(bad))
    with pytest.raises(LinksFileError, match="schema is None"):
        ViewerState(graph, None, str(bad))
    other = load_topology(ROOT / "topologies" / "6sip_2x3_ring_1d.yaml")
    with pytest.raises(LinksFileError, match="was recorded on another topology"):
        ViewerState(other, None, str(files[1]))


def test_a_taken_port_is_a_clear_error(graph):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is in use; pass --port N"):
            ViewerServer(ViewerState(graph), "127.0.0.1", port)


def test_loopback_detection():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.5.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.com", ""))


def start_cli(*args):
    proc = subprocess.Popen([sys.executable, "-m", "kernbench.cli.main", "web", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "kernbench web: serving NAME at URL"
    return proc, line


def stop_cli(proc):
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def test_cli_listens_on_loopback_by_default_and_warns_for_other_hosts():
    proc, line = start_cli("--port", "0")
    try:
        assert line.startswith("kernbench web: serving ahbm-default at http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].strip(" /\n"))
        deadline = time.time() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.time() < deadline
                time.sleep(0.1)
    finally:
        err = stop_cli(proc)
    assert "warning" not in err
    proc, line = start_cli("--port", "0", "--host", "0.0.0.0", "--no-runs")
    try:
        assert "at http://0.0.0.0:" in line
    finally:
        err = stop_cli(proc)
    assert "kernbench web: warning: listening on 0.0.0.0, which other machines may reach" in err


@pytest.mark.parametrize(("args", "needle"), [
    (("--view", "rack", "--port", "0"), "unknown view 'rack' for --view; use one of system, sip, cube, pe"),
    (("--links", "no/such.json"), "links file no/such.json does not exist"),
    (("--run", "no/such.json"), "run file no/such.json does not exist"),
    (("--port", "70000"), "--port 70000 is not a port number"),
])
def test_cli_input_errors_are_one_line(cli, args, needle):
    proc = cli("web", *args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("kernbench: error: ")


def test_cli_reports_a_taken_port(cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = cli("web", "--port", str(s.getsockname()[1]))
    assert proc.returncode == 2 and "is in use; pass --port N with a free port (--port 0 picks one)" in proc.stderr


def test_export_writes_only_the_viewer_files(cli, files, tmp_path):
    out = tmp_path / "viewer"
    proc = cli("web", "--export", str(out), "--links", str(files[1]), "--run", str(files[0]), "--view", "cube")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["app.css", "app.js", "data.js", "graph.js", "index.html"]
    text = (out / "data.js").read_text()
    assert text.startswith("window.KERNBENCH_DATA = ") and text.endswith(";\n")
    data = json.loads(text[len("window.KERNBENCH_DATA = "):-2])
    assert data["graph"]["topology"]["name"] == "ahbm-default" and data["initial"] == {"view": "cube"}
    assert data["run"]["bench"] == "gemm-single-pe" and data["links"]["schema"] == "kernbench.links/2"
    assert data["links"]["links"] == json.loads(files[1].read_text())["links"]  # the links with traffic, all of them


def test_ipv6_loopback_is_served_and_checked(graph):
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    server = ViewerServer(ViewerState(graph), "::1", 0).start()
    try:
        assert server.url == f"http://[::1]:{server.port}/"
        for host, status in ((f"[::1]:{server.port}", 200), (f"localhost:{server.port}", 200),
                             (f"evil.example:{server.port}", 421)):
            conn = http.client.HTTPConnection("::1", server.port, timeout=30)
            conn.putrequest("GET", "/", skip_host=True)
            conn.putheader("Host", host)
            conn.endheaders()
            assert conn.getresponse().status == status, host
            conn.close()
    finally:
        server.stop()
