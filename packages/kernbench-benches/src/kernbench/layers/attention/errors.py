"""Errors of the attention library: every bad input names what is wrong, where, and how to fix it."""

from __future__ import annotations

from kernbench.topology.errors import KernbenchError


class AttentionError(KernbenchError, ValueError):
    """An attention call cannot run as asked (base class of the two kinds below)."""


class AttentionShapeError(AttentionError):
    """The ``q``, ``k`` and ``v`` arrays do not form a GQA problem (rank, dtype, sizes that disagree)."""


class AttentionConfigError(AttentionError):
    """The partitioning does not fit the problem or the topology (unknown partition or mode, ``pes``,
    ``cubes``, more users than cube groups, a ring wider than the SIP, heads that do not divide)."""
