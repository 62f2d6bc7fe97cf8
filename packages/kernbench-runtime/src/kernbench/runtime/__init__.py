"""kernbench.runtime — the host API: tensors, placement, allocators, launches, sessions."""

from kernbench.runtime.allocator import AllocationError, FreeList, PEMemAllocator, VirtualAllocator
from kernbench.runtime.context import LaunchHandle, RuntimeApiError, RuntimeContext, Tensor, session
from kernbench.runtime.placement import DPPolicy, PolicyError, Shard, resolve_shards

__all__ = [
    "AllocationError", "DPPolicy", "FreeList", "LaunchHandle", "PEMemAllocator", "PolicyError", "RuntimeApiError",
    "RuntimeContext", "Shard", "Tensor", "VirtualAllocator", "resolve_shards", "session",
]
