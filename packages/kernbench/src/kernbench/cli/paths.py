"""Output paths, checked before any work starts: a run of minutes must not fail at its last step on a typo.

:func:`output_file` and :func:`output_dir` return the path to write, or raise
:class:`OutputPathError` (exit 2, one line) naming the option, the path and
what is wrong with it: a missing or read-only folder, a folder where a file
is expected, a file where a folder is expected.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kernbench.topology.errors import KernbenchError


class OutputPathError(KernbenchError):
    """An output path cannot be written: its folder is missing or read-only, or it names the wrong kind of thing."""


def output_file(path: str | Path, option: str, *, parents: bool = False) -> Path:
    """``path`` as a file this process can create or overwrite; its folder must already exist, or, with
    ``parents`` (for outputs whose writer creates their folders), is created now."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise OutputPathError(f"{option} {path}: is a folder; give a file name inside it")
    parent = p.parent
    if parent.exists() and not parent.is_dir():
        raise OutputPathError(f"{option} {path}: {parent} is a file, not a folder; choose another path")
    if parents and not parent.exists():
        output_dir(parent, option, shown=path)
    if not parent.is_dir():
        raise OutputPathError(f"{option} {path}: folder {parent} does not exist; create it or choose another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OutputPathError(f"{option} {path}: cannot be written (permission denied); choose a writable path")
    _probe(p, option, path)
    return p


def _probe(p: Path, option: str, path: str | Path) -> None:
    """Open ``p`` for appending (what permission bits cannot tell, e.g. ``/proc`` or a read-only mount, even for
    root); a file the probe created is removed again."""
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as exc:
        raise OutputPathError(f"{option} {path}: cannot be written ({exc.strerror}); choose a writable path") \
            from None
    if not existed:
        p.unlink(missing_ok=True)


def output_dir(path: str | Path, option: str, *, shown: str | Path | None = None) -> Path:
    """``path`` as a folder this process can write into, created (with its parents) now if missing; messages name
    ``shown`` (default ``path``): the file an option names, when ``path`` is its folder."""
    p = Path(path).expanduser()
    path = path if shown is None else shown
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
    try:  # what permission bits cannot tell (e.g. /proc, a read-only mount, even for root): create it now
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as exc:
        raise OutputPathError(f"{option} {path}: cannot be written ({exc.strerror}); choose a writable folder") \
            from None
    return p
