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
(no DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import json
import os
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
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
            try:
                body = json.loads(self.rfile.read(length))
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "the run request is not valid JSON"})
                return
            if not isinstance(body, dict):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "the run request must be a JSON object"})
                return
            self._guard(lambda: self._json(HTTPStatus.OK, state.run_bench(body)))

    return Handler


class _Server6(ThreadingHTTPServer):
    """The threading server on an IPv6 address (``::1``, or ``::`` when given explicitly)."""

    address_family = socket.AF_INET6


class PortInUseError(ViewerInputError):
    """The requested address and port are taken."""


class ViewerServer:
    """A viewer on ``host:port`` (port 0: any free port). :meth:`start` serves in a thread, :meth:`serve`
    blocks; :attr:`url` is the address to open."""

    def __init__(self, state: ViewerState, host: str = "127.0.0.1", port: int = 8765) -> None:
        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        try:
            self.httpd = server_class((host.strip("[]"), port), _handler(state, None))
        except OSError as exc:
            if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
                raise PortInUseError(f"port {port} on {host} is in use; pass --port N with a free port "
                                     f"(--port 0 picks one)") from None
            raise ViewerInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and "
                                   f"--port") from None
        self.httpd.daemon_threads = True
        self.host, self.port = host.strip("[]"), self.httpd.server_address[1]
        if is_loopback(host):  # answer only requests that name a loopback host (no DNS rebinding)
            names = {"localhost", "127.0.0.1", "[::1]", f"[{host}]" if ":" in host else host.lower()}
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


__all__ = ["ASSETS", "PortInUseError", "ViewerServer", "ViewerState", "asset", "is_loopback"]
