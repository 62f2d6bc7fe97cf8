"""The earlier bench scripts' host surface over a :class:`~kernbench.runtime.context.RuntimeContext`.

Bench code written for the earlier simulator calls ``torch.empty(shape,
dtype=..., dp=DPPolicy(...), name=...)``, ``torch.zeros(...)``,
``torch.from_numpy(arr, dp=...)``, ``torch.launch(name, fn, *args)``,
``torch.wait``/``wait_all``, ``torch.spec[...]`` and the ``torch.ahbm``,
``torch.accelerator``, ``torch.distributed``, ``torch.multiprocessing`` and
``torch.install_ipcq`` namespaces. :func:`earlier` wraps a context in an
:class:`EarlierHost` that accepts those spellings and forwards everything to
the context, so nothing is simulated differently: ``dp=`` is our
``policy``, ``"f16"`` is ``"float16"``, ``name=`` labels the tensor, and the
spec reads as a nested mapping as well as by attribute.

Kernels launched through it may be written in either spelling of the kernel
language (see :mod:`kernbench.tl.pointers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping

import numpy as np

from kernbench.runtime.context import RuntimeContext, session
from kernbench.runtime.placement import DPPolicy
from kernbench.runtime.tensors import RuntimeApiError, Tensor
from kernbench.tl.pointers import DTYPE_SPELLINGS

__all__ = ["EarlierHost", "SpecView", "earlier", "earlier_session"]


def _dtype(use: str, dtype) -> str:
    """Our dtype name for a host-side spelling: ``"f16"``, ``"float16"``, ``np.float16`` or ``np.dtype``."""
    if isinstance(dtype, str) and dtype in DTYPE_SPELLINGS:
        return DTYPE_SPELLINGS[dtype]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name in DTYPE_SPELLINGS.values():
        return name
    raise RuntimeApiError(f"{use}: unknown dtype {dtype!r}; use one of {', '.join(DTYPE_SPELLINGS)}")


class SpecView(Mapping):
    """A read-only view of a topology spec (or a part of it) as a nested mapping: ``spec["pe"]["gemm"]["tile_m"]``.

    Attribute access reaches the spec itself, so ``spec.pe.gemm.tile_m`` works too.
    """

    __slots__ = ("_spec",)

    def __init__(self, spec) -> None:
        self._spec = spec

    def __getitem__(self, key: str):
        if not isinstance(key, str) or key not in self._names():
            raise KeyError(f"{key!r} is not a field of {type(self._spec).__name__} (fields: "
                           f"{', '.join(self._names())})")
        value = getattr(self._spec, key)
        return SpecView(value) if dataclasses.is_dataclass(value) else value

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self._spec))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._spec, name)

    def __repr__(self) -> str:
        return f"SpecView({self._spec!r})"


class EarlierHost:
    """A :class:`RuntimeContext` with the earlier benches' spellings (``dp=``, ``name=``, ``"f16"``, a mapping
    spec); every other attribute is the context's own."""

    def __init__(self, ctx: RuntimeContext) -> None:
        if not isinstance(ctx, RuntimeContext):
            raise RuntimeApiError(f"earlier(): expected a RuntimeContext, got {type(ctx).__name__}")
        self.context = ctx
        self.names: dict[str, Tensor] = {}  # tensors created with name=, by name

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.context, name)

    def __repr__(self) -> str:
        return f"<earlier host over {self.context!r}>"

    @property
    def spec(self) -> SpecView:
        """The topology spec as a nested mapping (and by attribute)."""
        return SpecView(self.context.spec)

    def _policy(self, use: str, dp, policy) -> DPPolicy | None:
        if dp is not None and policy is not None:
            raise RuntimeApiError(f"{use}: give dp= or policy=, not both (they are the same placement)")
        dp = dp if dp is not None else policy
        if dp is not None and not isinstance(dp, DPPolicy):
            raise RuntimeApiError(f"{use}: dp must be a DPPolicy, got {type(dp).__name__}")
        return dp

    def _named(self, use: str, t: Tensor, name) -> Tensor:
        if name is not None:
            if not isinstance(name, str):
                raise RuntimeApiError(f"{use}: name must be a string, got {type(name).__name__}")
            self.names[name] = t
        return t

    def empty(self, shape, dtype="float16", dp: DPPolicy | None = None, name: str | None = None, *,
              policy: DPPolicy | None = None) -> Tensor:
        """Allocate a tensor placed by ``dp`` without writing it."""
        t = self.context.empty(shape, _dtype("empty", dtype), self._policy("empty", dp, policy))
        return self._named("empty", t, name)

    def zeros(self, shape, dtype="float16", dp: DPPolicy | None = None, name: str | None = None, *,
              policy: DPPolicy | None = None) -> Tensor:
        """A deployed tensor of zeros placed by ``dp``."""
        t = self.context.zeros(shape, _dtype("zeros", dtype), self._policy("zeros", dp, policy))
        return self._named("zeros", t, name)

    def from_numpy(self, array, dp: DPPolicy | None = None, name: str | None = None, *,
                   policy: DPPolicy | None = None) -> Tensor:
        """Deploy a numpy array placed by ``dp``."""
        t = self.context.from_numpy(array, self._policy("from_numpy", dp, policy))
        return self._named("from_numpy", t, name)

    def launch(self, name: str, fn, *args):
        """Launch ``fn`` (either kernel spelling); tensors become tensor arguments, numpy scalars plain numbers."""
        converted = []
        for a in args:
            if isinstance(a, np.generic) and not isinstance(a, np.bool_):
                a = a.item()
            converted.append(a)
        return self.context.launch(name, fn, *converted)


def earlier(ctx: RuntimeContext | EarlierHost) -> EarlierHost:
    """``ctx`` with the earlier benches' host spellings (an :class:`EarlierHost` is returned as it is)."""
    return ctx if isinstance(ctx, EarlierHost) else EarlierHost(ctx)


@contextlib.contextmanager
def earlier_session(*args, **kwargs) -> Iterator[EarlierHost]:
    """``with earlier_session(data=True) as torch:`` — :func:`~kernbench.runtime.context.session`, wrapped."""
    with session(*args, **kwargs) as ctx:
        yield EarlierHost(ctx)
