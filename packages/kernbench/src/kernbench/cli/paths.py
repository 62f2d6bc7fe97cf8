"""Output paths, checked before any work starts: a run of minutes must not fail at its last step on a typo.

:func:`output_file` and :func:`output_dir` return the path to write, or raise
:class:`OutputPathError` (exit 2, one line) naming the option, the path and
what is wrong with it: an empty path, a read-only folder, a folder where a
file is expected, a file where a folder is expected. One rule for every
output: missing folders are created. :func:`check_distinct` refuses an output
that is one of the command's inputs or another of its outputs, and
:func:`replace_atomically` writes an output beside its final name and moves it
into place in one step, so an interrupted write (Ctrl-C, a full disk) leaves
the old file, never a truncated one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from kernbench.topology.errors import KernbenchError


class OutputPathError(KernbenchError):
    """An output path cannot be written: its folder is missing or read-only, or it names the wrong kind of thing."""


def _not_empty(path: str | Path, option: str, what: str) -> None:
    if not str(path).strip():
        raise OutputPathError(f"{option} {str(path)!r}: the path is empty; give {what}")


def _expanded(path: str | Path, option: str) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded; :class:`OutputPathError` when that user has no home
    folder here (``Path.expanduser`` raises ``RuntimeError`` for ``~nosuchuser/x``)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = str(path).split("/", 1)[0][:80]
        raise OutputPathError(f"{option} {str(path)[:200]!r}: {user} names no user with a home folder on this "
                              f"machine; spell the path out") from None


def output_target(path: str | Path, option: str, folder_name: str | None = None) -> Path:
    """The file ``path`` names, without touching the disk: with ``folder_name``, a ``path`` that is a folder (or
    ends in a separator) means ``path/folder_name``. An empty path is an :class:`OutputPathError`."""
    _not_empty(path, option, "a file name" if folder_name is None else "a file or a folder")
    p = _expanded(path, option)
    if folder_name is not None and (p.is_dir() or str(path).endswith(("/", os.sep))):
        p = p / folder_name
    return p


def output_file(path: str | Path, option: str, *, parents: bool = False, folder_name: str | None = None) -> Path:
    """``path`` (see :func:`output_target`) as a file this process can create or overwrite; its folder must
    already exist, or, with ``parents`` (what every ``kernbench`` output uses), is created now."""
    p = output_target(path, option, folder_name)
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
    _not_empty(path, option, "a folder")
    p = _expanded(path, option)
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


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file: equal once resolved (``./x``, ``../d/x``, symlinks), or, when both exist,
    the same inode (hard links)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def plan_outputs(given: Mapping[str, tuple[str | None, str | None]], inputs: Mapping[str, Path]) -> dict[str, Path]:
    """Check every output of a command before it starts: ``given`` maps an option to ``(path or None,
    folder_name)`` (see :func:`output_target`), ``inputs`` what the command reads. Refuses an empty path, an
    output that is an input or another output (:func:`check_distinct`, before any folder is made), then checks and
    prepares each (:func:`output_file`). Returns ``option -> file`` for the outputs given."""
    targets = {option: output_target(path, option, name) for option, (path, name) in given.items() if path is not None}
    check_distinct(targets, inputs)
    return {option: output_file(given[option][0], option, parents=True, folder_name=given[option][1])
            for option in targets}


def check_distinct(outputs: Mapping[str, Path], inputs: Mapping[str, Path]) -> None:
    """:class:`OutputPathError` when an output (``option -> path``) is one of the command's inputs (``what it is
    -> path``) or the same file as another output; call it before any work starts."""
    seen: list[tuple[str, Path]] = []
    for option, path in outputs.items():
        for what, source in inputs.items():
            if _same(path, source):
                raise OutputPathError(f"{option} {path}: is {what}, which this command reads; writing it would "
                                      f"destroy it, so choose another path")
        for other, earlier in seen:
            if _same(path, earlier):
                raise OutputPathError(f"{option} {path}: is also the {other} file; give each output its own path")
        seen.append((option, path))


def _new_file_mode(path: Path) -> int:
    """The permission bits ``path`` would get from a plain ``open(path, "w")``: its own if it exists, else the
    defaults left by the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def replace_atomically(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path in ``path``'s folder (same suffix) to write; when the block ends normally it
    replaces ``path`` in one step (``os.replace``). On any failure, Ctrl-C included, the temporary file is
    removed and ``path`` keeps what it held. A symlink is written through: its target is replaced."""
    final = Path(path)
    if final.is_symlink():
        final = final.resolve()
    fd, name = tempfile.mkstemp(prefix=f".{final.stem}.", suffix=f".part{final.suffix}", dir=final.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, _new_file_mode(final))
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
