"""kernbench.tl — the kernel language: ``def kernel(tl, *args)`` with ``tl`` a :class:`TLContext`.

Kernels run in a greenlet on a simulated PE, or in command-list mode with
:func:`record`, which returns the PE commands a kernel would issue without
simulating time.
"""

from kernbench.tl.context import (
    DescriptorTooLarge,
    ScratchOverflowError,
    TensorArg,
    TensorHandle,
    TLContext,
    TLError,
    record,
)

__all__ = [
    "DescriptorTooLarge", "ScratchOverflowError", "TLContext", "TLError", "TensorArg",
    "TensorHandle", "record",
]
