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
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

from kernbench.benches.studies.base import SchedulerError, StudyError

EXECUTORS = ("serial", "process", "dask")
CONNECT_TIMEOUT_S = 4.0

Task = tuple[Callable, tuple]


def _serial(tasks: list[Task]) -> Iterator[tuple[int, object]]:
    for i, (fn, args) in enumerate(tasks):
        yield i, fn(*args)


def _process(tasks: list[Task], jobs: int) -> Iterator[tuple[int, object]]:
    with cf.ProcessPoolExecutor(max_workers=max(1, min(jobs, len(tasks)))) as pool:
        futures = {pool.submit(fn, *args): i for i, (fn, args) in enumerate(tasks)}
        try:
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def _address(scheduler: str) -> tuple[str, int]:
    url = urlparse(scheduler if "://" in scheduler else f"tcp://{scheduler}")
    if url.scheme not in ("tcp", "tls") or not url.hostname:
        raise SchedulerError(f"--scheduler {scheduler!r} is not a scheduler address; give tcp://HOST:PORT "
                             f"(what `dask scheduler` prints)")
    try:
        port = url.port or 8786
    except ValueError:
        raise SchedulerError(f"--scheduler {scheduler!r} has an invalid port; give tcp://HOST:PORT") from None
    return url.hostname, port


def check_scheduler(scheduler: str) -> None:
    """:class:`SchedulerError` unless ``scheduler`` accepts a TCP connection and starts talking within
    :data:`CONNECT_TIMEOUT_S` each (a Dask server sends its handshake as soon as it accepts)."""
    host, port = _address(scheduler)
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler} ({exc.strerror or exc}); start one "
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
    from distributed import Client

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
        raise StudyError("--executor dask needs the dask extra: pip install 'kernbench-benches[dask]'") from None
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
