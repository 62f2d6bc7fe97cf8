"""kernbench.accel — an optional compiled event calendar for kernbench-sim's engine (same results, fewer ns).

``kernbench.accel._calendar.Calendar`` holds the entries the engine schedules
itself and runs the engine's loop, computing a data packet's hop past its
first wire with the wire formula in C. ``kernbench-sim`` picks it up when
this distribution is installed (``pip install "kernbench-sim[accel]"``) and
falls back to its pure-Python calendar otherwise, with identical results
(ADR 0046). Nothing here imports another kernbench package: the engine hands
the calendar its fabric classes (``bind``).
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("kernbench-accel")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
