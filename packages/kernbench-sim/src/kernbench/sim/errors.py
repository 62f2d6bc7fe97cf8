"""Errors raised by the simulation engine."""

from __future__ import annotations

from kernbench.topology.errors import KernbenchError


class ComponentError(KernbenchError):
    """A component binding is unknown, duplicated, or missing for a node on a route."""


class DeadlockError(KernbenchError):
    """The event queue emptied while requests were still waiting; names each one."""


class MessageError(KernbenchError):
    """A submitted message is malformed: unsupported type, non-positive size, or no distinct destination.

    Addresses that decode to nothing modeled raise ``AddressError``; unreachable
    destinations raise ``RoutingError``.
    """
