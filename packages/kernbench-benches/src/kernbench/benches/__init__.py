"""kernbench.benches — the benches (each top-level module registers one or more), the attention library and the
milestone studies (sub-packages, libraries the benches and studies use).

The benches are found through the entry point ``builtin = "kernbench.benches"``
of the group ``kernbench.benches`` (see :mod:`kernbench.runtime.bench`).
"""

from importlib import metadata as _metadata

__version__ = _metadata.version("kernbench-benches")
