"""Where KernBench keeps derived files, and how it writes them so that readers never see half a file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    """The user cache folder of every KernBench cache: ``$KERNBENCH_CACHE_DIR`` when set, else the platform's
    user cache directory for ``kernbench`` (``~/.cache/kernbench`` on Linux)."""
    env = os.environ.get("KERNBENCH_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernbench", appauthor=False))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (folders made as needed) through a temporary file in the same folder and
    ``os.replace``: a concurrent reader sees the old file or the new one, never a partial write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
