"""kernbench.accel — optional compiled parts of the engine and the router (same results, fewer ns).

``kernbench.accel._calendar`` holds the engine's event calendar
(``Calendar``: the entries the engine schedules itself, the engine's loop and
every packet hop it does not trace), the cut of a transfer into packets
(``split_packets``) and the HBM controller's per-burst write loop
(``serve_write``). ``kernbench.accel._routes.settle`` is the route search's
inner loop. ``kernbench-sim`` and ``kernbench-topology`` use them when this
distribution is installed (``pip install "kernbench-sim[accel]"``) and fall
back to their pure-Python code otherwise, with identical results (ADR 0046).
Nothing here imports another kernbench package: the engine hands the
calendar its fabric classes (``bind``).
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("kernbench-accel")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
