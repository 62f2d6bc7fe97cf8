"""The ``kernbench web`` server: the standard library's threading HTTP server, loopback only by default.

It serves a fixed set of paths and nothing else (a request is looked up by
its exact path in a table; the file system is never indexed by a request),
so ``/../``, encoded traversal and absolute paths are plain 404s:

==================  ==========================================================
path                content
==================  ==========================================================
``/``               the viewer page (``index.html``); ``app.js``, ``graph.js``,
                    ``app.css`` beside it; ``data.js`` marks a served viewer
``/data/graph.json`` the compiled graph (:func:`~kernbench.cli.web.model.graph_payload`)
``/data/run.json``  the loaded run summary, or ``null``
``/data/links.json`` the loaded run's links, or ``null``
``/api/benches``    the registered benches (GET)
``/api/run``        run a bench on the loaded topology (POST, JSON body)
==================  ==========================================================

The run and links files are re-read on every request, so re-running
``kernbench run --links`` and reloading the page shows the new run; a file
that has become unreadable or malformed yields an error answer with the
reader's one-line message, never a traceback. ``POST /api/run`` needs the
``X-Kernbench: run`` header and a JSON body (a cross-site page cannot send
either without a CORS preflight, which this server never grants), and every
request must name a loopback ``Host`` while the server listens on loopback
(no DNS rebinding). Every spelling of a loopback address counts as loopback
(``127.1``, ``0x7f.1``, ``::ffff:127.0.0.1``), and a request with two
``Host`` headers is refused (400) rather than judged by one of them.

Hostile clients: each connection has a read timeout (``timeout``, 10 s by
default) and at most ``max_connections`` (32) are served at once; more get
a 503 and are closed. A run request nested deeper than ``MAX_JSON_DEPTH``
is a 400, found before the JSON parser recurses. A client that resets or
drops its connection, or times out, is forgotten without a console line.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import sys
import threading
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

from kernbench.cli.web.model import ViewerInputError, graph_payload, links_payload, load_links, read_run
from kernbench.sim.links import link_report
from kernbench.topology import TopologyGraph
from kernbench.topology.errors import KernbenchError

ASSETS = ("index.html", "app.js", "graph.js", "app.css")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".json": "application/json"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
MAX_BODY = 4096
MAX_JSON_DEPTH = 8  # the run request is one flat object; anything deeper is not from the viewer page
TIMEOUT_S = 10.0
MAX_CONNECTIONS = 32
LOOPBACK_NAMES = ("localhost",)
_INET_ATON = re.compile(r"[0-9a-fA-FxX.]+")  # what the C inet_aton reads as an IPv4 address (127.1, 0x7f.1, ...)


def address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address, in every spelling the socket layer accepts (``127.1``, ``0177.0.0.1``,
    ``[::1]``), an IPv4-mapped IPv6 address as its IPv4 address; None for a name or nonsense."""
    host = host.strip("[]")
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        if not _INET_ATON.fullmatch(host):
            return None
        try:
            addr = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address in any spelling, or ``localhost``) is a loopback address."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    addr = address(host)
    return addr is not None and addr.is_loopback


def json_depth(raw: bytes) -> int:
    """How deeply the arrays and objects of the JSON text ``raw`` nest (brackets inside strings not counted);
    a linear scan, so a hostile body is measured without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


def asset(name: str) -> bytes:
    """The bytes of one viewer file shipped in this package."""
    return (resources.files("kernbench.cli.web") / "assets" / name).read_bytes()


class ViewerState:
    """What one server shows: the graph, the run and links files, and a run started from the page.

    Both files are read and checked here (raising the reader's error), then re-read whenever they change.
    ``allow_runs`` enables ``/api/run``; ``initial`` holds the first view to show.
    """

    def __init__(self, graph: TopologyGraph, run_path: str | None = None, links_path: str | None = None, *,
                 allow_runs: bool = True, initial: dict | None = None, debug: bool = False) -> None:
        self.graph = graph
        self.run_path = run_path
        self.links_path = links_path
        self.allow_runs = allow_runs
        self.debug = debug
        payload = graph_payload(graph)
        payload["initial"] = initial or {}
        self.graph_json = json.dumps(payload, separators=(",", ":")).encode()
        self.page_run: tuple[object, dict] | None = None  # (run summary, links payload) of a run from the page
        self.run_lock = threading.Lock()
        self._cache: dict[str, tuple[tuple, object]] = {}
        self.files = {f"/{name}": (asset(name), TYPES[Path(name).suffix]) for name in ASSETS}
        self.files["/"] = self.files["/index.html"]
        self.files["/data.js"] = (b"window.KERNBENCH_DATA = null;\n", TYPES[".js"])
        self.run_json()  # read and check both files now: bad input fails before the server starts
        self.links_json()

    def _cached(self, path: str, load):
        """``load(path)``, re-read only when the file's size or modification time changed."""
        try:
            st = os.stat(path)
            key = (path, st.st_mtime_ns, st.st_size)
        except OSError:
            key = None  # let the loader report the missing or unreadable file
        hit = self._cache.get(path)
        if key is not None and hit is not None and hit[0] == key:
            return hit[1]
        value = load(path)
        if key is not None:
            self._cache[path] = (key, value)
        return value

    def run_json(self) -> object:
        """The run summary to show: the page's last run, else the run file, else None."""
        if self.page_run is not None:
            return self.page_run[0]
        return self._cached(self.run_path, read_run) if self.run_path else None

    def links_json(self) -> dict | None:
        """The links to show: the page's last run, else the links file, else None."""
        if self.page_run is not None:
            return self.page_run[1]
        return self._cached(self.links_path, lambda p: load_links(p, self.graph)) if self.links_path else None

    def benches(self) -> list[dict]:
        """Name and description of every registered bench."""
        from kernbench.runtime.bench import discover

        return [{"name": b.name, "description": b.description} for b in discover().benches]

    def run_bench(self, body: dict) -> dict:
        """Run the bench a page asked for on this topology; the result becomes the loaded run."""
        from kernbench.runtime.bench import BenchError, discover, run_bench

        name, device = body.get("bench"), body.get("device", 0)
        sips = self.graph.spec.system.sips.count
        if not isinstance(name, str):
            raise BenchError("the run request needs a bench name")
        if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < sips:
            raise BenchError(f"device {device!r} does not exist; use a SIP index 0..{sips - 1}")
        info = discover().resolve(name)
        if not self.run_lock.acquire(blocking=False):
            raise BenchError("another run started from the page is still running; wait for it to finish")
        try:
            result = run_bench(info, self.graph, device)
            report = link_report(result.engine, {"bench": result.bench, "device": device, "ok": result.ok,
                                                 "latency_ns": result.latency_ns, "source": "kernbench web"})
            self.page_run = (result.to_json(), links_payload(report))
        finally:
            self.run_lock.release()
        return {"run": self.page_run[0], "links": self.page_run[1]}


def _handler(state: ViewerState, allowed_hosts: frozenset[str] | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Answers the fixed paths of the viewer; everything else is 404."""

        server_version = "kernbench-web"
        sys_version = ""

        @property
        def timeout(self) -> float:
            """The read timeout of this connection (``StreamRequestHandler.setup`` applies it to the socket)."""
            return self.server.request_timeout

        def log_message(self, format: str, *args) -> None:
            """Quiet: no line per request (errors reach the page instead)."""

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("Referrer-Policy", "no-referrer")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, data: object) -> None:
            self._send(status, json.dumps(data, separators=(",", ":")).encode(), TYPES[".json"])

        def _not_found(self) -> None:
            body = b"<!DOCTYPE html><title>404</title><h1>404: not found</h1><p>The viewer serves / only.</p>\n"
            self._send(HTTPStatus.NOT_FOUND, body, TYPES[".html"])

        def _host_ok(self) -> bool:
            if len(self.headers.get_all("Host") or ()) > 1:  # never judge a request by one of two names
                self.close_connection = True
                self._send(HTTPStatus.BAD_REQUEST, b"a request may carry one Host header only\n",
                           "text/plain; charset=utf-8")
                return False
            if allowed_hosts is None:
                return True
            host = (self.headers.get("Host") or "").lower()
            if host in allowed_hosts:
                return True
            self._send(HTTPStatus.MISDIRECTED_REQUEST, b"this viewer answers loopback host names only\n",
                       "text/plain; charset=utf-8")
            return False

        def _guard(self, fn) -> None:
            try:
                fn()
            except (ConnectionError, TimeoutError):
                raise  # the client went away: nothing to answer (the server forgets it quietly)
            except KernbenchError as exc:
                self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": str(exc)})
            except Exception as exc:  # a bug: answer without a traceback, show it on the console with --debug
                if state.debug:
                    traceback.print_exc()
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR,
                           {"error": f"internal error in the viewer: {type(exc).__name__}: {exc}"})

        def do_GET(self) -> None:
            """Serve one of the fixed paths."""
            if not self._host_ok():
                return
            path = self.path.split("?", 1)[0].split("#", 1)[0]  # matched exactly, never decoded or joined
            if path in state.files:
                self._send(HTTPStatus.OK, *state.files[path])
            elif path == "/data/graph.json":
                self._send(HTTPStatus.OK, state.graph_json, TYPES[".json"])
            elif path == "/data/run.json":
                self._guard(lambda: self._json(HTTPStatus.OK, state.run_json()))
            elif path == "/data/links.json":
                self._guard(lambda: self._json(HTTPStatus.OK, state.links_json()))
            elif path == "/api/benches" and state.allow_runs:
                self._guard(lambda: self._json(HTTPStatus.OK, state.benches()))
            else:
                self._not_found()

        do_HEAD = do_GET

        def do_POST(self) -> None:
            """``/api/run`` only, with the viewer's header and a small JSON body."""
            if not self._host_ok():
                return
            if self.path != "/api/run" or not state.allow_runs:
                self._not_found()
                return
            if self.headers.get("X-Kernbench") != "run" or \
                    not (self.headers.get("Content-Type") or "").startswith("application/json"):
                self._json(HTTPStatus.FORBIDDEN, {"error": "runs are started by the viewer page only"})
                return
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY:
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"the run request must be 1..{MAX_BODY} bytes of JSON"})
                return
            raw = self.rfile.read(length)
            if json_depth(raw) > MAX_JSON_DEPTH:
                self._json(HTTPStatus.BAD_REQUEST,
                           {"error": f"the run request nests deeper than {MAX_JSON_DEPTH} levels"})
                return
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "the run request is not valid JSON"})
                return
            if not isinstance(body, dict):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "the run request must be a JSON object"})
                return
            self._guard(lambda: self._json(HTTPStatus.OK, state.run_bench(body)))

    return Handler


BUSY_BODY = b"the viewer is busy: too many open connections; try again\n"
BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(BUSY_BODY), BUSY_BODY))


class _Server(ThreadingHTTPServer):
    """The threading server, with a cap on the connections served at once and quiet disconnects."""

    daemon_threads = True
    request_timeout = TIMEOUT_S
    debug = False

    def limit(self, max_connections: int) -> None:
        """Serve at most ``max_connections`` connections at once; the next ones get a 503 and are closed."""
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request, client_address) -> None:
        """Start a thread for the connection if a slot is free, else answer 503 and close it."""
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        """Serve one connection in its thread and free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        """A client that reset, dropped or timed out its connection is forgotten quietly; anything else is one
        line on the console (with the traceback under ``--debug``)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        print(f"kernbench web: error while answering a request: {type(exc).__name__}: {exc}", file=sys.stderr)
        if self.debug:
            traceback.print_exc()


class _Server6(_Server):
    """The threading server on an IPv6 address (``::1``, or ``::`` when given explicitly)."""

    address_family = socket.AF_INET6


class PortInUseError(ViewerInputError):
    """The requested address and port are taken."""


class ViewerServer:
    """A viewer on ``host:port`` (port 0: any free port). :meth:`start` serves in a thread, :meth:`serve`
    blocks; :attr:`url` is the address to open. ``timeout`` is each connection's read timeout in seconds,
    ``max_connections`` the number served at once."""

    def __init__(self, state: ViewerState, host: str = "127.0.0.1", port: int = 8765, *,
                 timeout: float = TIMEOUT_S, max_connections: int = MAX_CONNECTIONS) -> None:
        server_class = _Server6 if ":" in host else _Server
        try:
            self.httpd = server_class((host.strip("[]"), port), _handler(state, None))
        except OSError as exc:
            if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
                raise PortInUseError(f"port {port} on {host} is in use; pass --port N with a free port "
                                     f"(--port 0 picks one)") from None
            raise ViewerInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and "
                                   f"--port") from None
        self.httpd.limit(max_connections)
        self.httpd.request_timeout, self.httpd.debug = timeout, state.debug
        self.host, self.port = host.strip("[]"), self.httpd.server_address[1]
        if is_loopback(host):  # answer only requests that name a loopback host, in any spelling (no DNS rebinding)
            try:
                canonical = str(ipaddress.ip_address(self.host)) if ":" in self.host else None
            except ValueError:  # e.g. a scoped address the socket layer accepted
                canonical = None
            names = {"localhost", "127.0.0.1", "[::1]", f"[{self.host.lower()}]" if ":" in host else host.lower()}
            if canonical:
                names.add(f"[{canonical}]")
            self.httpd.RequestHandlerClass = _handler(state, frozenset(f"{n}:{self.port}" for n in names))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The viewer's address, e.g. ``http://127.0.0.1:8765/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> ViewerServer:
        """Serve in a daemon thread (tests, benchmarks); returns self."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="kernbench-web", daemon=True)
        self._thread.start()
        return self

    def serve(self) -> None:
        """Serve until interrupted (Ctrl-C)."""
        try:
            self.httpd.serve_forever()
        except KeyboardInterrupt:
            print("kernbench web: stopped", file=sys.stderr)
        finally:
            self.httpd.server_close()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


__all__ = ["ASSETS", "PortInUseError", "ViewerServer", "ViewerState", "address", "asset", "is_loopback",
           "json_depth"]
