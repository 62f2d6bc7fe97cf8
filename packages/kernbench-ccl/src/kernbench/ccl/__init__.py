"""kernbench.ccl — collectives: neighbour tables, the rank = SIP launcher, the ``ahbm`` backend.

Installing this package adds, through the entry-point group
``kernbench.runtime_extensions`` (no import needed), these namespaces to
every :class:`~kernbench.runtime.context.RuntimeContext` (a bench's ``torch``):
``torch.distributed`` (:class:`~kernbench.ccl.distributed.DistributedContext`),
``torch.multiprocessing`` (:class:`~kernbench.ccl.launcher.Launcher`),
``torch.ahbm`` / ``torch.accelerator``
(:class:`~kernbench.ccl.launcher.DeviceApi`), and
``torch.install_ipcq(table, buffer_kind)`` or
``torch.install_ipcq(algorithm=..., ccl_yaml=...)``
(:func:`~kernbench.ccl.install.install`, for kernels that address peers by
direction outside a process group, e.g. ring attention over a cube ring).

A collective algorithm is a registered module whose ``launch_spec(call)``
returns a :class:`LaunchSpec` (:mod:`kernbench.ccl.launch_spec`); for
``all_to_all_single`` the call carries every rank's split sizes as a
:class:`SplitTable`.
"""

from importlib import metadata as _metadata

from kernbench.ccl.config import AlgorithmConfig, CclConfigError, config_path, load, register_algorithm
from kernbench.ccl.distributed import (
    CollectiveError,
    DistributedContext,
    GroupPlan,
    NotInitializedError,
    ReduceOp,
    UnsupportedBackendError,
    UnsupportedOpError,
    collective_span_ns,
    plan_group,
)
from kernbench.ccl.install import Installation, install
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec, LaunchSpecError, SplitTable
from kernbench.ccl.launcher import DeviceApi, Launcher
from kernbench.ccl.neighbours import NeighbourError

__version__ = _metadata.version("kernbench-ccl")


def install_extension(ctx):
    """``torch.install_ipcq``: install a neighbour table and its receive rings on the context (a runtime
    extension). ``torch.install_ipcq(table, buffer_kind="tcm")`` installs ``table``;
    ``torch.install_ipcq(algorithm=NAME, ccl_yaml=PATH)`` (the earlier simulator's spelling) installs the table
    the configured algorithm's process group would use, in the buffer kind ``ccl.yaml`` gives it (``ccl_yaml``
    default: the topology's, else the packaged one). Returns the :class:`Installation`."""
    def install_ipcq(table=None, buffer_kind: str | None = None, *, algorithm: str | None = None,
                     ccl_yaml: str | None = None) -> Installation:
        if table is not None:
            if algorithm is not None or ccl_yaml is not None:
                raise CclConfigError("install_ipcq: give a neighbour table, or algorithm=/ccl_yaml=, not both")
            return install(ctx, table, buffer_kind or "tcm")
        cfg = load(ccl_yaml or config_path(ctx.spec.source), algorithm)
        return install(ctx, plan_group(ctx.spec, cfg).table, buffer_kind or cfg.buffer_kind)

    return install_ipcq


__all__ = [
    "AlgorithmConfig", "CclConfigError", "CollectiveCall", "CollectiveError", "DeviceApi", "DistributedContext",
    "GroupPlan", "Installation", "LaunchSpec", "LaunchSpecError", "Launcher", "NeighbourError",
    "NotInitializedError", "ReduceOp", "SplitTable", "UnsupportedBackendError", "UnsupportedOpError", "__version__",
    "collective_span_ns", "install", "install_extension", "plan_group", "register_algorithm",
]
