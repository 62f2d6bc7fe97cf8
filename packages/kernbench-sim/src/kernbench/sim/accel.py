"""Which event calendar an engine runs on: kernbench-accel's compiled one when it is installed, else pure Python.

The optional distribution ``kernbench-accel`` (``pip install
"kernbench-sim[accel]"``) provides ``kernbench.accel._calendar.Calendar``:
the engine's calendar with its loop and a data packet's hop past its first
wire in C, computing exactly what the pure-Python calendar computes (ADR
0046). ``KERNBENCH_ACCEL=0`` in the environment, or
``GraphEngine(..., accel=False)``, keeps the pure-Python calendar when the
extension is installed; ``KERNBENCH_ACCEL=1`` (the default) uses it when it
is installed.
"""

from __future__ import annotations

import os
from functools import cache
from types import ModuleType

from kernbench.sim.errors import ComponentError
from kernbench.sim.fabric import Packet, Route, Transfer, Wire
from kernbench.topology.accel import ENV  # one switch for every compiled part


def _wanted(accel: bool | None) -> bool:
    if accel is not None:
        return accel
    value = os.environ.get(ENV, "1").strip()
    if value not in ("0", "1"):
        raise ComponentError(f"{ENV}={value!r} is not 0 or 1: set {ENV}=0 to run on the pure-Python calendar, "
                             f"{ENV}=1 (or leave it unset) to use kernbench-accel's compiled one when installed")
    return value == "1"


def compiled_calendar(accel: bool | None = None) -> type | None:
    """The compiled ``Calendar`` class bound to this package's fabric classes, or None: when ``accel`` is False
    (None: ``KERNBENCH_ACCEL``, default on) or kernbench-accel is not installed."""
    return _load() if _wanted(accel) else None


def compiled_module(engine: object) -> ModuleType | None:
    """kernbench-accel's compiled module when ``engine`` runs on its calendar (``engine.accelerated``), else None:
    components use its other services (``serve_write``, the HBM controller's per-burst write loop) only then, so
    ``accel=False`` or ``KERNBENCH_ACCEL=0`` turns every compiled part off together."""
    if not getattr(engine, "accelerated", False):
        return None
    from kernbench.accel import _calendar

    return _calendar


@cache
def _load() -> type | None:
    """Import the extension once and hand it the fabric classes whose slots its hop step reads."""
    try:
        from kernbench.accel import _calendar
    except ImportError:
        return None
    _calendar.bind(Packet, Wire, Route, Transfer)
    return _calendar.Calendar


__all__ = ["ENV", "compiled_calendar", "compiled_module"]
