"""kernbench.tl — the kernel language: ``def kernel(tl, *args)`` with ``tl`` a :class:`TLContext`."""

from kernbench.tl.context import ScratchOverflowError, TensorArg, TensorHandle, TLContext, TLError

__all__ = ["ScratchOverflowError", "TLContext", "TLError", "TensorArg", "TensorHandle"]
