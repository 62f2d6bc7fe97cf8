"""The element types a PE works on, with their sizes: the one list the runtime, ``tl`` and commands share."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Bytes per element of every dtype a tensor may have.
ITEMSIZE: dict[str, int] = {"float16": 2, "float32": 4, "int32": 4, "bool": 1}

#: The supported dtypes, in a stable order for messages.
DTYPES: tuple[str, ...] = tuple(ITEMSIZE)


def itemsize(dtype: str) -> int:
    """Bytes per element of ``dtype`` (a numpy name outside :data:`ITEMSIZE` falls back to numpy)."""
    size = ITEMSIZE.get(dtype)
    return size if size is not None else np.dtype(dtype).itemsize


def nbytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a C-ordered array of ``shape`` and ``dtype``."""
    return math.prod(shape) * itemsize(dtype)
