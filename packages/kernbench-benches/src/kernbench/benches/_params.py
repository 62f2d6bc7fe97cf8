"""Reading bench parameters from environment variables, with clear errors."""

from __future__ import annotations

import os

from kernbench.runtime.bench import BenchError


def env_int(name: str, default: int) -> int:
    """A positive integer from the environment variable ``name`` (``default`` when unset)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise BenchError(f"environment variable {name}={raw!r} must be a positive integer")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` from the environment variable ``name``."""
    value = os.environ.get(name, default)
    if value not in choices:
        raise BenchError(f"environment variable {name}={value!r} must be one of {', '.join(choices)}")
    return value
