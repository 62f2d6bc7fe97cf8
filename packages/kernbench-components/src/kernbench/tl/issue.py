"""How ``tl`` calls reach a PE: one :class:`Issuer` protocol, simulated or recording.

The kernel language builds commands; an issuer delivers them. There are two:

* :class:`SimIssuer` runs inside a simulated PE. The PE_CPU hands the kernel a
  :class:`KernelHost` (the PE side of the protocol): ``issue`` charges the
  dispatch cost and sends the command to the scheduler, ``suspend`` switches
  the kernel's greenlet back to the simulator until an event fires.
* :class:`RecordingIssuer` is command-list mode (``tl.record``): commands are
  appended to a list, every event is already complete, no time passes and no
  address is resolved.

Nothing else in ``kernbench.tl`` knows which mode it runs in.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from kernbench.tl.tensors import TLError


class KernelHost(Protocol):
    """What a running kernel needs from the PE that runs it (implemented by the PE_CPU's kernel slot).

    Times are ns; addresses are encoded physical (or, for :meth:`translate`,
    virtual) addresses.
    """

    spec: object
    kernel: str
    pe: tuple[int, int, int]
    program_id: tuple[int, int]
    num_programs: tuple[int, int]

    @property
    def now_ns(self) -> float:
        """The simulated time now."""

    def event(self) -> object:
        """A fresh completion event."""

    def issue(self, cmd: object) -> None:
        """Dispatch ``cmd`` to the PE (charging the PE_CPU's dispatch cost); returns at once."""

    def suspend(self, event: object) -> object:
        """Give control back to the simulator until ``event`` fires; returns its value."""

    def translate(self, va: int, nbytes: int) -> tuple[int, float]:
        """The physical address of ``nbytes`` at virtual ``va``, and the translation time its DMA pays."""

    def check_target(self, addr: int, nbytes: int) -> None:
        """Raise a ``KernbenchError`` when ``nbytes`` at ``addr`` are not backed by any memory."""

    def directions(self) -> Collection[str]:
        """The PE_IPCQ directions with an installed neighbour."""


class _Recorded:
    """The completion event of a recorded command: already complete (command-list mode has no time)."""

    processed = triggered = True
    value = None


RECORDED = _Recorded()


class Issuer(Protocol):
    """Delivers a kernel's commands and waits for their events; ``waiting`` says on what (deadlock reports)."""

    waiting: str | None

    @property
    def now_ns(self) -> float:
        """The simulated time now (0 in command-list mode)."""

    def event(self) -> object:
        """A fresh completion event for a command."""

    def issue(self, cmd) -> None:
        """Issue ``cmd`` and wait for its ``done`` event; a failure value raises :class:`TLError`."""

    def start(self, cmd) -> None:
        """Issue ``cmd`` and return at once."""

    def wait(self, event) -> None:
        """Wait until ``event`` has fired (its value is the caller's to check)."""

    def translate(self, addr: int, nbytes: int) -> tuple[int, float]:
        """The physical address of a virtual range and the translation time (identity when recording)."""

    def check_target(self, addr: int, nbytes: int) -> None:
        """Check that a DMA's far side exists before anything is issued (nothing when recording)."""

    def directions(self) -> Collection[str] | None:
        """Installed IPCQ directions, or None when they are unknown (recording)."""


class SimIssuer:
    """The issuer of a kernel running on a simulated PE, through its :class:`KernelHost`."""

    __slots__ = ("host", "waiting", "where")

    def __init__(self, host: KernelHost, where: str) -> None:
        self.host = host
        self.where = where
        self.waiting: str | None = None

    @property
    def now_ns(self) -> float:
        """The simulated time now."""
        return self.host.now_ns

    def event(self):
        """A fresh completion event."""
        return self.host.event()

    def issue(self, cmd) -> None:
        """Dispatch ``cmd`` and suspend the kernel until it completes."""
        host = self.host
        host.issue(cmd)
        if self.waiting is None:
            self.waiting = type(cmd).__name__
        value = host.suspend(cmd.done)
        self.waiting = None
        if isinstance(value, Exception):
            raise TLError(f"{self.where}: {value}")

    def start(self, cmd) -> None:
        """Dispatch ``cmd`` without waiting."""
        self.host.issue(cmd)

    def wait(self, event) -> None:
        """Suspend the kernel until ``event`` has been processed."""
        if not event.processed:
            self.waiting = "an asynchronous load, receive or composite"
            self.host.suspend(event)
            self.waiting = None

    def translate(self, addr: int, nbytes: int) -> tuple[int, float]:
        """Translate through the PE's MMU."""
        return self.host.translate(addr, nbytes)

    def check_target(self, addr: int, nbytes: int) -> None:
        """Resolve the address now, so a bad one fails in the kernel rather than inside the engine."""
        self.host.check_target(addr, nbytes)

    def directions(self) -> Collection[str]:
        """The PE_IPCQ's installed directions."""
        return self.host.directions()


class RecordingIssuer:
    """Command-list mode: commands are collected in :attr:`commands`; nothing waits, nothing is resolved."""

    __slots__ = ("commands", "waiting")

    def __init__(self) -> None:
        self.commands: list = []
        self.waiting: str | None = None

    @property
    def now_ns(self) -> float:
        """Always 0: recording has no time."""
        return 0.0

    def event(self):
        """The shared, already-complete event."""
        return RECORDED

    def issue(self, cmd) -> None:
        """Record ``cmd``."""
        self.commands.append(cmd)

    def start(self, cmd) -> None:
        """Record ``cmd``."""
        self.commands.append(cmd)

    def wait(self, event) -> None:
        """Nothing to wait for."""

    def translate(self, addr: int, nbytes: int) -> tuple[int, float]:
        """Addresses stay as given; no translation time."""
        return addr, 0.0

    def check_target(self, addr: int, nbytes: int) -> None:
        """Addresses are not resolved when recording."""

    def directions(self) -> None:
        """Neighbours are unknown when recording."""
        return None
