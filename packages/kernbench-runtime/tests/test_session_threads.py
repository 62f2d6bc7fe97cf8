"""A session belongs to the thread that opened it: other threads get one clear error and change nothing, and the
owner goes on as if they had never tried (four threads sharing a session ended in KeyError or RoutingError)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kernbench.runtime import DPPolicy, session
from kernbench.runtime.context import RuntimeApiError

ONE_PE = DPPolicy(num_cubes=1, num_pes=1)


def _copy(tl, a, b):
    tl.store(b, tl.load(a))


def test_other_threads_are_refused_and_the_owner_carries_on():
    errors: dict[int, BaseException] = {}
    with session(data=True) as torch:
        before = (torch.now_ns, torch.engine.submitted)

        def work(i: int) -> None:
            try:
                torch.from_numpy(np.full((8, 64), i, np.float16), ONE_PE)
            except BaseException as exc:  # the test reads what each thread saw
                errors[i] = exc

        threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(errors) == [0, 1, 2, 3]
        for i, exc in errors.items():
            assert isinstance(exc, RuntimeApiError)
            assert str(exc) == (f"from_numpy: {torch.name} was opened in thread 'MainThread' and cannot be used from "
                                f"thread 'worker-{i}': a session drives one simulation and is not thread-safe; open "
                                f"one session per thread")
        assert (torch.now_ns, torch.engine.submitted) == before  # nothing was simulated for them
        a = torch.from_numpy(np.full((8, 64), 3.0, np.float16), ONE_PE)
        b = torch.empty((8, 64), "float16", ONE_PE)
        torch.wait(torch.launch("copy", _copy, a, b))
        assert np.array_equal(torch.peek(b), np.full((8, 64), 3.0, np.float16))


def test_a_session_opened_in_a_thread_works_there_and_nowhere_else():
    seen: dict[str, object] = {}

    def owner() -> None:
        with session() as torch:
            seen["torch"] = torch
            seen["tensor"] = torch.empty((8, 64), "float16", ONE_PE)
            done = threading.Event()
            seen["done"] = done
            done.wait(timeout=60)

    t = threading.Thread(target=owner, name="owner")
    t.start()
    while "done" not in seen and t.is_alive():
        t.join(timeout=0.01)
    assert "done" in seen, "the owner thread ended before opening its session"
    with pytest.raises(RuntimeApiError, match=r"opened in thread 'owner' and cannot be used from thread 'MainThread'"):
        seen["torch"].free(seen["tensor"])
    seen["done"].set()
    t.join(timeout=60)
    assert not t.is_alive()
