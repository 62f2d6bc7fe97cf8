"""Error hierarchy shared by every KernBench package.

Every error a user can provoke with bad input derives from
:class:`KernbenchError`; its message says what is wrong, where, and how to
fix it. The CLI prints the message on one line and exits with status 2.
"""

from __future__ import annotations


class KernbenchError(Exception):
    """Base class of all user-facing KernBench errors."""


class SpecError(KernbenchError):
    """A topology file is unreadable, malformed, or holds an invalid value."""


class TopologyError(KernbenchError):
    """A topology compiles to an inconsistent graph (for example a missing link)."""


class RoutingError(KernbenchError):
    """No path exists between two nodes for the requested routing intent."""


class AddressError(KernbenchError):
    """A physical address is out of range or does not decode to a modeled unit."""
