"""kernbench.runtime — the host API: tensors, placement, allocators, launches, sessions, bench parameters."""

from importlib import metadata as _metadata

from kernbench.runtime.allocator import AllocationError, FreeList, PEMemAllocator, VirtualAllocator
from kernbench.runtime.context import LaunchHandle, RuntimeApiError, RuntimeContext, Tensor, session
from kernbench.runtime.extensions import EXTENSIONS, ExtensionError, ExtensionRegistry
from kernbench.runtime.launching import ByAddress, by_address
from kernbench.runtime.params import BenchParams, Param, ParamError
from kernbench.runtime.placement import DPPolicy, PolicyError, Shard, resolve_shards

__version__ = _metadata.version("kernbench-runtime")

__all__ = [
    "EXTENSIONS", "AllocationError", "BenchParams", "ByAddress", "DPPolicy", "ExtensionError", "ExtensionRegistry",
    "FreeList", "LaunchHandle", "PEMemAllocator", "Param", "ParamError", "PolicyError", "RuntimeApiError",
    "RuntimeContext", "Shard", "Tensor", "VirtualAllocator", "__version__", "by_address", "resolve_shards", "session",
]
