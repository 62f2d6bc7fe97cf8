"""Whether route searches run their inner loop in kernbench-accel's C (ADR 0046), the same steps as in Python.

The optional distribution ``kernbench-accel`` provides
``kernbench.accel._routes.settle``, :meth:`kernbench.topology.routing._Search.settle`'s
loop in C. It is used when it is installed and ``KERNBENCH_ACCEL`` is not
``0`` (the variable the engine's compiled calendar also follows,
:mod:`kernbench.sim.accel`, which refuses values other than ``0`` and ``1``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache

#: The environment variable that turns every compiled part off (``0``) or on where installed (``1``, the default).
ENV = "KERNBENCH_ACCEL"


def compiled_settle() -> Callable[[object, str], None] | None:
    """kernbench-accel's ``settle(search, goal)``, or None when it is not installed or ``KERNBENCH_ACCEL=0``."""
    if os.environ.get(ENV, "1").strip() == "0":
        return None
    return _load()


@cache
def _load() -> Callable[[object, str], None] | None:
    try:
        from kernbench.accel._routes import settle
    except ImportError:
        return None
    return settle


__all__ = ["ENV", "compiled_settle"]
