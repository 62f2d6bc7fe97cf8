"""Which device each host thread of control works on, and how it waits for the simulator.

A context deploys to and launches on one SIP, its *device*. A launcher that
runs one rank per SIP (``torch.multiprocessing``) starts a worker greenlet
per rank and binds each to its own SIP with
:meth:`DeviceBinding.bind_device`; every other caller gets the device the
context was created with.

Every host call that touches the device ends by waiting for its requests
(:meth:`DeviceBinding._drain`). Normally that runs the simulation until they
complete; a launcher juggling several ranks installs a :data:`WaitHook`
instead, so a rank that waits hands control to the others.
"""

from __future__ import annotations

from collections.abc import Callable

from greenlet import getcurrent

from kernbench.runtime.tensors import RuntimeApiError
from kernbench.sim import Request

#: Waits a host thread of control may hand to a scheduler: returns True when it waited for the requests itself.
WaitHook = Callable[[list[Request]], bool]


class DeviceBinding:
    """The current device per greenlet, and waiting for requests (part of
    :class:`~kernbench.runtime.context.RuntimeContext`)."""

    _default_device: int
    _device_of: dict
    wait_hook: WaitHook | None

    def _check_device(self, device: int) -> None:
        sips = self.graph.spec.system.sips.count
        if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < sips:
            raise RuntimeApiError(f"device {device!r} does not exist; the topology has SIPs 0..{sips - 1}")

    @property
    def device(self) -> int:
        """The SIP this thread of control deploys to and launches on."""
        return self._device_of.get(getcurrent(), self._default_device)

    def bind_device(self, device: int, glet=None) -> None:
        """Make ``device`` (a SIP index) the current device of ``glet`` (default: the calling greenlet)."""
        self._check_device(device)
        self._device_of[getcurrent() if glet is None else glet] = device

    def unbind_device(self, glet) -> None:
        """Forget a finished greenlet's device."""
        self._device_of.pop(glet, None)

    def _drain(self, requests: list[Request]) -> None:
        """Wait until every request has completed (through the wait hook when one takes them); raise the first
        error among them."""
        hook = self.wait_hook
        if hook is None or not hook(requests):
            for req in requests:
                self.engine.wait(req)
        for req in requests:
            if req.error is not None:
                raise req.error
