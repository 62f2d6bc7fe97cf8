"""kernbench.tl — the kernel language: ``def kernel(tl, *args)`` with ``tl`` a :class:`TLContext`.

Kernels run in a greenlet on a simulated PE (the PE_CPU builds their context
with :meth:`TLContext.for_pe` from its :class:`KernelHost`), or in
command-list mode with :func:`record`, which returns the PE commands a kernel
would issue without simulating time.
"""

from importlib import metadata as _metadata

from kernbench.tl.build import DescriptorTooLarge
from kernbench.tl.context import ScratchScope, TLContext, record
from kernbench.tl.issue import KernelHost
from kernbench.tl.scratch import ScratchOverflowError
from kernbench.tl.tensors import TensorArg, TensorHandle, TensorLease, TLError

__all__ = [
    "DescriptorTooLarge", "KernelHost", "ScratchOverflowError", "ScratchScope", "TLContext", "TLError", "TensorArg",
    "TensorHandle", "TensorLease", "record",
]

__version__ = _metadata.version("kernbench-components")
