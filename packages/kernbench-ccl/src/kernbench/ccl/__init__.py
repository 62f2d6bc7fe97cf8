"""kernbench.ccl — collectives: neighbour tables, the rank = SIP launcher, the ``ahbm`` backend.

Installing this package adds, through the entry-point group
``kernbench.runtime_extensions`` (no import needed), these namespaces to
every :class:`~kernbench.runtime.context.RuntimeContext` (a bench's ``torch``):
``torch.distributed`` (:class:`~kernbench.ccl.distributed.DistributedContext`),
``torch.multiprocessing`` (:class:`~kernbench.ccl.launcher.Launcher`),
``torch.ahbm`` / ``torch.accelerator``
(:class:`~kernbench.ccl.launcher.DeviceApi`), and
``torch.install_ipcq(table, buffer_kind)``
(:func:`~kernbench.ccl.install.install`, for kernels that address peers by
direction outside a process group, e.g. ring attention over a cube ring).

A collective algorithm is a registered module whose ``launch_spec(call)``
returns a :class:`LaunchSpec` (:mod:`kernbench.ccl.launch_spec`).
"""

from functools import partial
from importlib import metadata as _metadata

from kernbench.ccl.config import AlgorithmConfig, CclConfigError, register_algorithm
from kernbench.ccl.distributed import (
    CollectiveError,
    DistributedContext,
    NotInitializedError,
    ReduceOp,
    UnsupportedBackendError,
    UnsupportedOpError,
    collective_span_ns,
)
from kernbench.ccl.install import Installation, install
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec, LaunchSpecError
from kernbench.ccl.launcher import DeviceApi, Launcher
from kernbench.ccl.neighbours import NeighbourError

__version__ = _metadata.version("kernbench-ccl")


def install_extension(ctx):
    """``torch.install_ipcq``: :func:`install` bound to the context (a runtime extension)."""
    return partial(install, ctx)


__all__ = [
    "AlgorithmConfig", "CclConfigError", "CollectiveCall", "CollectiveError", "DeviceApi", "DistributedContext",
    "Installation", "LaunchSpec", "LaunchSpecError", "Launcher", "NeighbourError", "NotInitializedError", "ReduceOp",
    "UnsupportedBackendError", "UnsupportedOpError", "__version__", "collective_span_ns", "install",
    "install_extension", "register_algorithm",
]
