"""kernbench.ccl — collectives: neighbour tables, the rank = SIP launcher, the ``ahbm`` backend, tensor parallelism.

Importing this package adds four namespaces to every
:class:`~kernbench.runtime.RuntimeContext` (a bench's ``torch``):
``torch.distributed`` (:class:`DistributedContext`),
``torch.multiprocessing`` (:class:`Launcher`), and ``torch.ahbm`` /
``torch.accelerator`` (:class:`DeviceApi`).
"""

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

EXTENSIONS.register("distributed", DistributedContext)
EXTENSIONS.register("multiprocessing", Launcher)
EXTENSIONS.register("ahbm", DeviceApi)
EXTENSIONS.register("accelerator", DeviceApi)

__all__ = [
    "AlgorithmConfig", "CclConfigError", "CollectiveError", "DeviceApi", "DistributedContext", "Installation",
    "Launcher", "NeighbourError", "NotInitializedError", "ReduceOp", "UnsupportedBackendError",
    "UnsupportedOpError", "collective_span_ns", "install",
]
