"""Where study points run: in this process, in a process pool, or on a Dask cluster.

Every executor takes picklable tasks ``(fn, args)`` and yields ``(index,
result)`` as tasks finish; the runner puts results back in grid order, so
the order of completion never reaches a results file. A Dask executor
connects to a running scheduler (``--scheduler ADDRESS``) or starts a
``LocalCluster`` of ``jobs`` single-threaded worker processes; an
unreachable scheduler is a :class:`SchedulerError` within
:data:`CONNECT_TIMEOUT_S` seconds (a TCP probe, then the client's own
handshake), never a hang.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

from kernbench.studies.base import SchedulerError, StudyError

EXECUTORS = ("serial", "process", "dask")
CONNECT_TIMEOUT_S = 4.0

Task = tuple[Callable, tuple]


def _serial(tasks: list[Task]) -> Iterator[tuple[int, object]]:
    for i, (fn, args) in enumerate(tasks):
        yield i, fn(*args)


#: How often (s) a pool worker checks that the process that started it is still alive.
PARENT_CHECK_S = 1.0


def _exit_with_parent(parent: int) -> None:
    """Pool-worker initializer: end this worker when ``parent`` (the ``kernbench study`` process) dies, even by
    SIGKILL, which gives the pool no chance to stop its workers (they ran on, orphaned, before): a daemon thread
    polls the parent id every :data:`PARENT_CHECK_S` seconds and ends the worker once it changes. (Linux's
    ``PR_SET_PDEATHSIG`` is not used: it follows the thread that started the worker, not the process.)"""
    import os

    if os.getppid() != parent:  # the parent died before the request was in place
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="kernbench-parent-watch", daemon=True).start()


def _process(tasks: list[Task], jobs: int) -> Iterator[tuple[int, object]]:
    import os

    with cf.ProcessPoolExecutor(max_workers=max(1, min(jobs, len(tasks))), initializer=_exit_with_parent,
                                initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(fn, *args): i for i, (fn, args) in enumerate(tasks)}
        try:
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


DASK_EXTRA = "--executor dask needs the dask extra: pip install 'kernbench-studies[dask]'"


def _address(scheduler: str) -> tuple[str, int]:
    try:  # urlparse itself refuses some text: `tcp://[::1` is "Invalid IPv6 URL"
        url = urlparse(scheduler if "://" in scheduler else f"tcp://{scheduler}")
        hostname = url.hostname
    except ValueError:
        hostname, url = None, None
    if url is None or url.scheme not in ("tcp", "tls") or not hostname or not scheduler.isprintable():
        raise SchedulerError(f"--scheduler {scheduler[:120]!r} is not a scheduler address; give tcp://HOST:PORT "
                             f"(what `dask scheduler` prints)")
    try:
        port = url.port or 8786
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise SchedulerError(f"--scheduler {scheduler[:120]!r} has an invalid port; give tcp://HOST:PORT with a port "
                             f"from 1 to 65535")
    return hostname, port


def check_scheduler(scheduler: str) -> None:
    """:class:`SchedulerError` unless ``scheduler`` accepts a TCP connection and starts talking within
    :data:`CONNECT_TIMEOUT_S` each (a Dask server sends its handshake as soon as it accepts)."""
    host, port = _address(scheduler)
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except (OSError, UnicodeError, ValueError) as exc:  # UnicodeError: a host name IDNA cannot encode
        reason = getattr(exc, "strerror", None) or f"{type(exc).__name__}: {str(exc)[:80]}"
        raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler} ({reason}); start one "
                             f"with `dask scheduler` and `dask worker ADDRESS`, or drop --scheduler to use a "
                             f"local cluster") from None
    with sock:
        try:
            first = sock.recv(1)
        except OSError:
            first = b""
    if not first:
        raise SchedulerError(f"{scheduler} accepted a connection but sent no handshake within {CONNECT_TIMEOUT_S:g} s: "
                             f"it is not a working Dask scheduler; check the address")


def connect(scheduler: str):
    """A ``distributed.Client`` of the scheduler at ``scheduler``, or :class:`SchedulerError` within about
    ``3 × CONNECT_TIMEOUT_S`` seconds (the client is built in a helper thread with a hard deadline, because a peer
    that speaks but is not Dask can stall the client's own handshake)."""
    check_scheduler(scheduler)
    try:  # also when every point is cached: the address is still checked, which needs the extra
        from distributed import Client
    except ImportError:
        raise StudyError(DASK_EXTRA) from None

    box: dict[str, object] = {}

    def make() -> None:
        try:
            box["client"] = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
        except Exception as exc:  # OSError, TimeoutError, or decoding errors from a non-Dask peer
            box["error"] = exc

    worker = threading.Thread(target=make, name="kernbench-dask-connect", daemon=True)
    worker.start()
    worker.join(CONNECT_TIMEOUT_S + 1)
    if "client" in box:
        return box["client"]
    exc = box.get("error")
    what = f"{type(exc).__name__}: {str(exc)[:120]}" if exc else "no answer to the client handshake"
    raise SchedulerError(f"{scheduler} accepted a connection but is not a working Dask scheduler ({what}); check "
                         f"the address")


def _dask(tasks: list[Task], jobs: int, scheduler: str | None) -> Iterator[tuple[int, object]]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise StudyError(DASK_EXTRA) from None
    with contextlib.ExitStack() as stack:
        if scheduler:
            client = stack.enter_context(connect(scheduler))
        else:
            cluster = stack.enter_context(LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                                                       dashboard_address=None))
            client = stack.enter_context(Client(cluster))
        futures = [client.submit(fn, *args, pure=False) for fn, args in tasks]
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures):
            yield index[fut.key], fut.result()


def run_tasks(tasks: list[Task], executor: str, jobs: int, scheduler: str | None = None
              ) -> Iterator[tuple[int, object]]:
    """Run ``tasks`` on ``executor`` with ``jobs`` workers; yields ``(task index, result)`` as they finish."""
    if executor not in EXECUTORS:
        raise StudyError(f"unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    if scheduler and executor != "dask":
        raise StudyError("--scheduler needs --executor dask")
    if not tasks:
        return iter(())
    if executor == "serial":
        return _serial(tasks)
    if executor == "process":
        return _process(tasks, jobs)
    return _dask(tasks, jobs, scheduler)
