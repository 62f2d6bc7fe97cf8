"""Output paths, checked before any work starts: a run of minutes must not fail at its last step on a typo.

:func:`output_file` and :func:`output_dir` return the path to write, or raise
:class:`OutputPathError` (exit 2, one line) naming the option, the path and
what is wrong with it: a missing or read-only folder, a folder where a file
is expected, a file where a folder is expected.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernbench.topology.errors import KernbenchError


class OutputPathError(KernbenchError):
    """An output path cannot be written: its folder is missing or read-only, or it names the wrong kind of thing."""


def output_file(path: str | Path, option: str) -> Path:
    """``path`` as a file this process can create or overwrite; its folder must already exist."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise OutputPathError(f"{option} {path}: is a folder; give a file name inside it")
    parent = p.parent
    if not parent.is_dir():
        raise OutputPathError(f"{option} {path}: folder {parent} does not exist; create it or choose another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OutputPathError(f"{option} {path}: cannot be written (permission denied); choose a writable path")
    return p


def output_dir(path: str | Path, option: str) -> Path:
    """``path`` as a folder this process can create (with its parents) or write into."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise OutputPathError(f"{option} {path}: is a file, not a folder; give a folder (it is created if missing)")
    existing = p
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise OutputPathError(f"{option} {path}: {existing} is a file, so the folder cannot be created there")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {path}: {existing} cannot be written (permission denied); choose a writable "
                              f"folder")
    return p
