"""A session's life: open, stopped, closed, and what each state still allows.

An open session accepts every host call. A session whose run *stopped* (a
simulation budget ran out, or an interrupt such as Ctrl-C unwound the
simulator mid-step) keeps refusing work that would simulate, with a message
saying why; only calls that simulate nothing (``peek``, ``free``) still run.
Closing (the end of a ``with session(...)`` block) frees every live tensor
and refuses everything after; a stopped session, or a block that ended in
an error, frees its memory without simulating the MMU unmaps, so a limit is
not raised a second time at the end of the block. Host calls made from
inside a running kernel are refused in every state, and so are calls from
any thread but the one that opened the session: a session drives one
simulation, whose kernels are greenlets of that thread.
"""

from __future__ import annotations

import threading

from kernbench.runtime.launching import running_kernel
from kernbench.runtime.tensors import RuntimeApiError, Tensor


class SessionLifecycle:
    """Open/stopped/closed checks and :meth:`close` (part of :class:`~kernbench.runtime.context.RuntimeContext`)."""

    closed: bool
    _tensors: list[Tensor]
    _thread: threading.Thread  # the thread that opened the session: the only one that may drive it

    def _check_open(self, use: str, *, stopped_ok: bool = False) -> None:
        """:class:`RuntimeApiError` when this session cannot do ``use`` now: called from inside a running kernel,
        closed, or (unless ``stopped_ok``, for calls that simulate nothing) stopped; or called from another thread
        than the one that opened it."""
        here = threading.current_thread()
        if here is not self._thread:
            raise RuntimeApiError(f"{use}: {self.name} was opened in thread {self._thread.name!r} and cannot be used "
                                  f"from thread {here.name!r}: a session drives one simulation and is not "
                                  f"thread-safe; open one session per thread")
        kernel = running_kernel()
        if kernel is not None:
            raise RuntimeApiError(f"{use}: called inside kernel {kernel!r}, which runs on a simulated PE; host calls "
                                  f"(torch.*) cannot run in a kernel: do them before the launch and pass the tensors "
                                  f"as arguments")
        if self.closed:
            raise RuntimeApiError(f"{use}: {self.name} is closed (its `with session(...)` block has ended); "
                                  f"do the work inside the block, or open a new session")
        if not stopped_ok and self.engine.halted is not None:
            raise RuntimeApiError(f"{use}: {self.name} has stopped ({self.engine.halted}); its simulation cannot go "
                                  f"on, so open a new session for more work")

    def close(self, *, simulate: bool = True) -> None:
        """Free every live tensor and refuse any further work (what the end of a ``with session()`` block does).
        Closing twice is harmless. ``simulate=False`` (a block that ended in an error), or a session that has
        stopped (a budget ran out or an interrupt cut a step short, even if the error was caught), releases the
        tensors without simulating their MMU unmaps: the run is over, and it must not be resumed."""
        if self.closed:
            return
        for t in self._tensors:  # first, so the reason kernels are given is the close, not the frees below
            if t.lease is not None:
                t.lease.revoke("was freed when its session closed")
        try:
            if simulate and self.engine.halted is None:
                self.cleanup()
        finally:
            for t in list(self._tensors):
                self._retire(t, "was freed when its session closed")
            self.closed = True

    def cleanup(self) -> None:
        """Free every live tensor."""
        for t in list(self._tensors):
            self.free(t)
