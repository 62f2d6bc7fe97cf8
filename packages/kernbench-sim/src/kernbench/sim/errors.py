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


class SimulationLimitError(KernbenchError):
    """A run exceeded a budget (events, simulated time or wall-clock time); names the PE, the kernel and the last
    op, and how to raise the budget."""


class BudgetError(KernbenchError):
    """A simulation budget (``max_events``, ``max_sim_ns``, ``timeout_s``) is not a positive number."""
