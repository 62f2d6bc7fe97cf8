"""The project's distributions and the versions installed of them (``kernbench --version``, study provenance)."""

from __future__ import annotations

from importlib import metadata

#: The distributions of this project, in dependency order.
DISTRIBUTIONS = ("kernbench-topology", "kernbench-sim", "kernbench-components", "kernbench-runtime",
                 "kernbench-ccl", "kernbench-benches", "kernbench-studies", "kernbench")


def installed() -> dict[str, str | None]:
    """``{distribution: version}`` for every project distribution, ``None`` for one not installed."""
    out: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
