"""The protocol between the ``ahbm`` backend and a collective algorithm module: a call in, a launch spec out.

For every collective call the backend gives the algorithm module's
``launch_spec`` function a :class:`CollectiveCall` (which collective, the
group, the calling rank, the tensor's layout and the SIP topology strategy)
and launches the :class:`LaunchSpec` it returns: the kernel, the name of the
kernel parameter that receives the tensor, and every other argument *by
name*. The arguments are bound to the kernel's own signature, so a missing,
misspelt or extra argument is an error naming the kernel and the parameter,
never a silently shifted position. Topology families are strategies
(:class:`~kernbench.topology.sip_topologies.SipTopology`), never integers;
an algorithm whose kernel wants an integer derives it from the strategy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kernbench.topology.errors import KernbenchError
from kernbench.topology.sip_topologies import SipTopology


class LaunchSpecError(KernbenchError, TypeError):
    """A launch spec whose arguments do not fit its kernel's signature."""


@dataclass(frozen=True)
class SplitTable:
    """The sizes of one ``all_to_all_single`` call, decided on the host from every rank's split sizes.

    ``splits[i][j]`` is the number of rows (of dim 0) rank ``i`` sends to
    rank ``j``. Each rank's input and output are spread over the same
    ``cubes`` of its SIP (SIP-wide cube indices in row order: one cube, or
    every cube of the mesh); ``in_rows[i][k]`` and ``out_rows[i][k]`` are the
    rows of rank ``i``'s input and output on ``cubes[k]``. ``row_bytes`` is
    the size of one row in bytes, ``slot_bytes`` the largest IPCQ message
    (bytes) and ``scratch_bytes`` a kernel's TCM scratch (bytes): together
    they bound the rows one message carries. Kernels read these integers;
    they never look at tensor values to size a message.
    """

    splits: tuple[tuple[int, ...], ...]
    in_rows: tuple[tuple[int, ...], ...]
    out_rows: tuple[tuple[int, ...], ...]
    cubes: tuple[int, ...]
    row_bytes: int
    slot_bytes: int
    scratch_bytes: int

    @property
    def world_size(self) -> int:
        """Ranks in the exchange."""
        return len(self.splits)

    def sent_before(self, i: int, j: int) -> int:
        """First row of rank ``i``'s input that goes to rank ``j`` (the sum of ``splits[i][:j]``)."""
        return sum(self.splits[i][:j])

    def received_before(self, i: int, j: int) -> int:
        """First row of rank ``j``'s output that comes from rank ``i`` (the sum of ``splits[:i][j]``)."""
        return sum(row[j] for row in self.splits[:i])


@dataclass(frozen=True)
class CollectiveCall:
    """One collective call as an algorithm sees it.

    ``collective`` (``"all_reduce"``, ``"broadcast"``, ``"all_gather"``,
    ``"reduce_scatter"``, ``"all_to_all"`` or ``"barrier"``), ``world_size``
    ranks (one per SIP), the calling ``rank``, ``n_elem`` values per shard (of
    the input; of the output for ``reduce_scatter``; of the input's first
    shard for ``all_to_all``), the cube mesh the shards span (``cube_w x
    cube_h``; ``1 x 1`` for a tensor on one cube), the SIP topology strategy,
    the ranks' grid ``sip_grid = (rows, cols)``, for ``broadcast`` the source
    rank ``src`` and for ``all_to_all`` every rank's split sizes and row
    layout (``split_table``).
    """

    collective: str
    world_size: int
    rank: int
    n_elem: int
    cube_w: int
    cube_h: int
    sip_topology: SipTopology
    sip_grid: tuple[int, int]
    src: int | None = None  # broadcast: the source rank
    split_table: SplitTable | None = None  # all_to_all: sizes of every rank, decided on the host


@dataclass(frozen=True)
class LaunchSpec:
    """What to launch for one rank: ``kernel(tl, <tensor>, **kwargs)``.

    ``tensor`` names the kernel parameter that receives the collective's
    tensor (its shards decide the PEs the kernel runs on); ``kwargs`` holds
    every other argument by parameter name (kept as a read-only copy).
    ``workspace`` names kernel parameters that receive a scratch tensor the
    backend allocates for the call and frees after it: parameter name ->
    rows (of the tensor's columns and dtype) on every PE the kernel runs on;
    a parameter asking for 0 rows receives ``None``.
    """

    kernel: Callable
    kwargs: Mapping[str, object] = field(default_factory=dict)
    tensor: str = "t"
    workspace: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.kernel):
            raise LaunchSpecError(f"LaunchSpec: the kernel must be a function, got {type(self.kernel).__name__}")
        if not isinstance(self.kwargs, Mapping) or not all(isinstance(k, str) for k in self.kwargs):
            raise LaunchSpecError("LaunchSpec: kwargs must map kernel parameter names to values")
        if self.tensor in self.kwargs:
            raise LaunchSpecError(f"LaunchSpec: {self.tensor!r} receives the tensor; do not pass it in kwargs too")
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))
        if not isinstance(self.workspace, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in self.workspace.items()):
            raise LaunchSpecError("LaunchSpec: workspace must map kernel parameter names to row counts >= 0")
        clash = sorted(set(self.workspace) & ({self.tensor} | set(self.kwargs)))
        if clash:
            raise LaunchSpecError(f"LaunchSpec: {', '.join(map(repr, clash))} receive(s) a workspace tensor; do "
                                  f"not pass them as the tensor or in kwargs too")
        object.__setattr__(self, "workspace", MappingProxyType(dict(self.workspace)))

    @property
    def kernel_name(self) -> str:
        return getattr(self.kernel, "__name__", type(self.kernel).__name__)

    def arguments(self, tensor: object, extra: Mapping[str, object] | None = None) -> tuple:
        """The kernel's arguments after ``tl``, in its parameter order: ``tensor``, ``kwargs`` and the backend's
        ``extra`` arguments (``out``: the output tensor of ``all_gather``, ``reduce_scatter`` and
        ``all_to_all``; the ``workspace`` tensors) bound by name."""
        extra = dict(extra or {})
        try:
            sig = inspect.signature(self.kernel)
        except (TypeError, ValueError) as exc:
            raise LaunchSpecError(f"LaunchSpec: cannot read the signature of kernel {self.kernel_name}: "
                                  f"{exc}") from None
        keyword_only = [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
        if keyword_only:
            raise LaunchSpecError(f"kernel {self.kernel_name}: parameter(s) {', '.join(keyword_only)} are "
                                  f"keyword-only; a kernel receives its arguments by position, so declare them "
                                  f"before any '*'")
        try:
            bound = sig.bind(None, **{self.tensor: tensor}, **extra, **self.kwargs)  # None stands for tl
        except TypeError as exc:
            raise LaunchSpecError(f"kernel {self.kernel_name} does not accept the launch spec's arguments "
                                  f"{[self.tensor, *extra, *self.kwargs]}: {exc}") from None
        bound.apply_defaults()
        return tuple(bound.args[1:])
