"""kernbench.cli — the ``kernbench`` command (``kernbench.cli.main:main``)."""

from importlib import metadata as _metadata

__version__ = _metadata.version("kernbench")
