"""``kernbench --version``: every installed kernbench distribution and its version."""

from __future__ import annotations

from kernbench.topology.versions import installed


def version_text() -> str:
    """The ``--version`` text: one ``name version`` line per installed distribution."""
    lines = [f"{name} {version}" for name, version in installed().items() if version is not None]
    return "\n".join(lines) or "kernbench (not installed)"
