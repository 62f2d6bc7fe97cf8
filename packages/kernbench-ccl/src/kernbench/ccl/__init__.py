"""kernbench.ccl — collectives: neighbour tables, the rank = SIP launcher, the ``ahbm`` backend, tensor parallelism.

Importing this package adds four namespaces to every
:class:`~kernbench.runtime.context.RuntimeContext` (a bench's ``torch``):
``torch.distributed`` (:class:`~kernbench.ccl.distributed.DistributedContext`),
``torch.multiprocessing`` (:class:`~kernbench.ccl.launcher.Launcher`),
``torch.ahbm`` / ``torch.accelerator``
(:class:`~kernbench.ccl.launcher.DeviceApi`), and
``torch.install_ipcq(table, buffer_kind)``
(:func:`~kernbench.ccl.install.install`, for kernels that address peers by
direction outside a process group, e.g. ring attention over a cube ring).
"""

from functools import partial

from kernbench.ccl.config import AlgorithmConfig, CclConfigError
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
from kernbench.ccl.launcher import DeviceApi, Launcher
from kernbench.ccl.neighbours import NeighbourError
from kernbench.runtime import EXTENSIONS


def _install_factory(ctx):
    """``torch.install_ipcq``: :func:`install` bound to the context."""
    return partial(install, ctx)


EXTENSIONS.register("distributed", DistributedContext)
EXTENSIONS.register("multiprocessing", Launcher)
EXTENSIONS.register("ahbm", DeviceApi)
EXTENSIONS.register("accelerator", DeviceApi)
EXTENSIONS.register("install_ipcq", _install_factory)

__all__ = [
    "AlgorithmConfig", "CclConfigError", "CollectiveError", "DeviceApi", "DistributedContext", "Installation",
    "Launcher", "NeighbourError", "NotInitializedError", "ReduceOp", "UnsupportedBackendError",
    "UnsupportedOpError", "collective_span_ns", "install",
]
