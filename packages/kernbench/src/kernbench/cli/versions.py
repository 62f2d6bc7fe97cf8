"""``kernbench --version``: every installed kernbench distribution and its version."""

from __future__ import annotations

from importlib import metadata

#: The distributions of this project, in dependency order.
DISTRIBUTIONS = ("kernbench-topology", "kernbench-sim", "kernbench-components", "kernbench-runtime",
                 "kernbench-ccl", "kernbench-benches", "kernbench")


def installed() -> dict[str, str]:
    """``{distribution: version}`` of the project's distributions that are installed, in dependency order."""
    out = {}
    for name in DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def version_text() -> str:
    """The ``--version`` text: one ``name version`` line per installed distribution."""
    return "\n".join(f"{name} {version}" for name, version in installed().items()) or "kernbench (not installed)"
