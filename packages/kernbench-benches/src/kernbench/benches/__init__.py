"""kernbench.benches — the benches: each top-level module registers one or more (sub-packages and ``_`` modules
are helpers). The model layers they use live in :mod:`kernbench.layers`; the studies in kernbench-studies.

The benches are found through the entry point ``builtin = "kernbench.benches"``
of the group ``kernbench.benches`` (see :mod:`kernbench.runtime.bench`).
"""

from importlib import metadata as _metadata

__version__ = _metadata.version("kernbench-benches")
