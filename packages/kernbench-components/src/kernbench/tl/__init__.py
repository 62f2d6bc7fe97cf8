"""kernbench.tl — the kernel language: ``def kernel(tl, *args)`` with ``tl`` a :class:`TLContext`.

The pointer form ``def kernel(a_ptr, ..., *, tl)`` (:mod:`kernbench.tl.pointers`) is a thin front over the same
context: its tensor arguments arrive as :class:`Pointer` byte addresses and ``tl`` as a :class:`PointerTL`.

Kernels run in a greenlet on a simulated PE (the PE_CPU builds their context
with :meth:`TLContext.for_pe` from its :class:`KernelHost`), or in
command-list mode with :func:`record`, which returns the PE commands a kernel
would issue without simulating time.
"""

from importlib import metadata as _metadata

from kernbench.tl.build import DescriptorTooLarge
from kernbench.tl.compat import CompositeError
from kernbench.tl.context import ScratchScope, TLContext, record
from kernbench.tl.issue import KernelHost
from kernbench.tl.pointers import Pointer, PointerTL, call_kernel, pointer_form
from kernbench.tl.scratch import ScratchOverflowError
from kernbench.tl.tensors import TensorArg, TensorHandle, TensorLease, TLError

__all__ = [
    "CompositeError", "DescriptorTooLarge", "KernelHost", "Pointer", "PointerTL", "ScratchOverflowError",
    "ScratchScope", "TLContext", "TLError", "TensorArg", "TensorHandle", "TensorLease", "call_kernel", "pointer_form",
    "record",
]

__version__ = _metadata.version("kernbench-components")
