"""kernbench.runtime — the host API: tensors, placement, allocators, launches, sessions."""

from kernbench.runtime.allocator import AllocationError, FreeList, PEMemAllocator, VirtualAllocator
from kernbench.runtime.context import (
    EXTENSIONS,
    ExtensionRegistry,
    LaunchHandle,
    RuntimeApiError,
    RuntimeContext,
    Tensor,
    session,
)
from kernbench.runtime.placement import DPPolicy, PolicyError, Shard, resolve_shards

__all__ = [
    "EXTENSIONS", "AllocationError", "DPPolicy", "ExtensionRegistry", "FreeList", "LaunchHandle", "PEMemAllocator",
    "PolicyError", "RuntimeApiError",
    "RuntimeContext", "Shard", "Tensor", "VirtualAllocator", "resolve_shards", "session",
]
