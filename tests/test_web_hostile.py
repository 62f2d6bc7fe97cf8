"""`kernbench web` against hostile clients, on a real server on 127.0.0.1 (bounded in time and connections).

Loopback in any spelling keeps the Host check on; two Host headers are refused; idle and half-sent requests
time out; connections beyond the cap get a 503; deeply nested JSON is a 400; resets leave the console quiet.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import time

import pytest

from kernbench.cli.web import ViewerServer, ViewerState, is_loopback
from kernbench.cli.web.server import BUSY_BODY, MAX_JSON_DEPTH, address, json_depth
from kernbench.topology import load_topology

from .conftest import DEFAULT_TOPOLOGY

MISDIRECTED = b"this viewer answers loopback host names only\n"


@pytest.fixture(scope="module")
def graph():
    return load_topology(DEFAULT_TOPOLOGY)


def ask(port: int, hosts: list[str], method: str = "GET", path: str = "/", body: bytes | None = None,
        headers: dict | None = None, connect: str = "127.0.0.1") -> tuple[int, bytes]:
    """One request with exactly the Host headers ``hosts``; returns (status, body)."""
    conn = http.client.HTTPConnection(connect, port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for host in hosts:
            conn.putheader("Host", host)
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("spelling", ["127.1", "0x7f.0.0.1", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]",
                                      "0177.0.0.1", "2130706433", "LocalHost"])
def test_every_spelling_of_loopback_is_loopback(spelling):
    assert is_loopback(spelling)
    assert str(address(spelling)) == ("None" if spelling == "LocalHost" else "127.0.0.1")


@pytest.mark.parametrize("spelling", ["127.0.0.1 evil.example", "127.1.evil", "::ffff:10.0.0.1", "0x7g.1", "0.0.0.0"])
def test_lookalikes_of_loopback_are_not_loopback(spelling):
    assert not is_loopback(spelling)


@pytest.mark.parametrize("host", ["127.1", "0x7f.0.0.1", "::ffff:127.0.0.1"])
def test_the_host_check_holds_for_every_loopback_spelling(graph, host):
    try:
        server = ViewerServer(ViewerState(graph, allow_runs=False), host, 0).start()
    except Exception as exc:  # an IPv4-mapped IPv6 socket needs a dual-stack IPv6 here
        pytest.skip(f"cannot listen on {host} here: {exc}")
    try:
        port = server.port
        connect = "::ffff:127.0.0.1" if ":" in host else "127.0.0.1"
        assert ask(port, [f"evil.example:{port}"], connect=connect) == (421, MISDIRECTED)
        assert ask(port, [f"127.0.0.1:{port}"], connect=connect)[0] == 200
        assert ask(port, [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"], connect=connect)[0] == 200
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served(graph):
    server = ViewerServer(ViewerState(graph), "127.0.0.1", 0).start()
    yield server
    server.stop()


@pytest.mark.parametrize("order", ["good-first", "evil-first", "both-good"])
def test_two_host_headers_are_refused(served, order):
    port = served.port
    good, evil = f"127.0.0.1:{port}", f"evil.example:{port}"
    hosts = {"good-first": [good, evil], "evil-first": [evil, good], "both-good": [good, good]}[order]
    assert ask(port, hosts) == (400, b"a request may carry one Host header only\n")
    assert ask(port, hosts, "POST", "/api/run", b"{}",
               {"X-Kernbench": "run", "Content-Type": "application/json"}) == (400,
                                                                            b"a request may carry one Host header "
                                                                            b"only\n")


def post_run(port: int, body: bytes) -> tuple[int, object]:
    status, data = ask(port, [f"127.0.0.1:{port}"], "POST", "/api/run", body,
                       {"X-Kernbench": "run", "Content-Type": "application/json"})
    return status, json.loads(data)


def test_deeply_nested_json_is_a_400_not_a_silent_recursion_error(served, capsys):
    too_deep = {"error": f"the run request nests deeper than {MAX_JSON_DEPTH} levels"}
    assert post_run(served.port, b"[" * 2000) == (400, too_deep)
    assert post_run(served.port, b'{"bench": ' + b"[" * 9 + b"]" * 9 + b"}") == (400, too_deep)
    # brackets inside a string are text, not nesting: this one reaches the bench lookup
    status, answer = post_run(served.port, b'{"bench": "' + b"[" * 500 + b'"}')
    assert status == 422 and answer["error"].startswith("unknown bench '[[[["), answer
    assert capsys.readouterr().err == ""


def test_json_depth_counts_brackets_outside_strings_only():
    assert json_depth(b"") == 0
    assert json_depth(b'{"a": [1, {"b": []}]}') == 4
    assert json_depth(b'["[[[", "\\"[["]') == 1
    assert json_depth(b"[" * 2000) == 2000


def test_idle_and_half_sent_connections_time_out_and_the_cap_answers_503(graph):
    server = ViewerServer(ViewerState(graph), "127.0.0.1", 0, timeout=1.0, max_connections=3).start()
    held: list[socket.socket] = []
    try:
        start = time.monotonic()
        post = (b"POST /api/run HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nX-Kernbench: run\r\nContent-Type: application/json"
                b"\r\nContent-Length: 100\r\n\r\n{" % server.port)  # reaches the body read, which waits for 99 bytes
        for partial in (b"", b"GET / HTT", post):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall(partial)
            held.append(s)
        time.sleep(0.2)  # let the server take all three
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
            answer = b""
            while chunk := extra.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 503 Service Unavailable\r\n") and answer.endswith(b"\r\n\r\n" + BUSY_BODY)
        for s in held:
            assert s.recv(4096) == b""  # closed by the server's read timeout, with no answer
        assert time.monotonic() - start < 5
        assert ask(server.port, [f"127.0.0.1:{server.port}"])[0] == 200  # the slots are free again
    finally:
        for s in held:
            s.close()
        server.stop()


def test_a_connection_reset_mid_request_is_forgotten_quietly(graph, capsys):
    """A client resetting its connection mid-request leaves nothing on the console; the server goes on."""
    server = ViewerServer(ViewerState(graph), "127.0.0.1", 0, timeout=5.0).start()
    errors: list[BaseException] = []
    handle_error = server.httpd.handle_error

    def record(request, client_address):
        import sys

        errors.append(sys.exc_info()[1])
        handle_error(request, client_address)

    server.httpd.handle_error = record
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(b"POST /api/run HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nX-Kernbench: run\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{" % server.port)
        time.sleep(0.2)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST while the server waits for the body
        deadline = time.monotonic() + 5
        while not errors and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [type(e) for e in errors] == [ConnectionResetError]
        assert capsys.readouterr().err == ""
        assert ask(server.port, [f"127.0.0.1:{server.port}"])[0] == 200
    finally:
        server.stop()


def test_other_errors_while_serving_are_one_console_line(graph, capsys):
    server = ViewerServer(ViewerState(graph), "127.0.0.1", 0)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            server.httpd.handle_error(None, ("127.0.0.1", 1))
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError:
            server.httpd.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == "kernbench web: error while answering a request: ValueError: boom\n"
    finally:
        server.httpd.server_close()
