"""``torch.distributed`` for KernBench: the ``ahbm`` backend.

``init_process_group(backend="ahbm")`` does, in order and all-or-nothing:
load ``ccl.yaml`` (beside the topology, else the packaged one) and the
algorithm it names for ``all_reduce``, import the algorithm module and check
its contract (``launch_spec``; optionally ``supports_sip_topology``,
``COLLECTIVES`` and ``neighbour_table``, see below), resolve the world size
(algorithm entry > collective > defaults > the topology's SIP count; it must
divide the SIP count, and a SIP topology that uses its grid needs exactly
that grid), build the neighbour table (the all-reduce layout unless the
module's ``neighbour_table(spec, world_size, sip_topology)`` gives another)
and install it with its receive rings. Until it succeeds
nothing is installed and every other call raises :class:`NotInitializedError`.

``all_reduce(t)`` asks the algorithm module's ``launch_spec`` for a
:class:`~kernbench.ccl.launch_spec.LaunchSpec` (the kernel and its arguments
by name, given a :class:`~kernbench.ccl.launch_spec.CollectiveCall` holding
the SIP topology *strategy*), runs it on the PEs holding the calling rank's
tensor (its SIP) and waits for it; under
``torch.multiprocessing.spawn`` every rank's wait goes to the launcher, so
the collective drains once all ranks have launched. ``barrier()`` is a no-op:
all ranks share one simulated clock and one process. Other collectives are
not implemented and say so.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from kernbench.ccl.config import AlgorithmConfig, CclConfigError, check_registered, config_path, load, registered_module
from kernbench.ccl.install import Installation, install
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec, LaunchSpecError
from kernbench.ccl.neighbours import intercube_multisip, sip_grid, sip_strategy
from kernbench.runtime import RuntimeContext, Tensor
from kernbench.topology.errors import KernbenchError
from kernbench.topology.sip_topologies import SipTopology, sip_topology_names


class UnsupportedBackendError(KernbenchError, ValueError):
    """``init_process_group`` was asked for a backend other than ``ahbm``."""


class NotInitializedError(KernbenchError, RuntimeError):
    """A ``torch.distributed`` call came before ``init_process_group``."""


class UnsupportedOpError(KernbenchError, NotImplementedError):
    """A collective or reduction op the ``ahbm`` backend does not implement."""


class CollectiveError(KernbenchError):
    """A collective was called with a tensor or a set of ranks it cannot serve."""


class ReduceOp:
    """Reduction ops (only ``SUM`` is implemented)."""

    SUM = "sum"


_NOT_IMPLEMENTED = ("broadcast", "reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
                    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "send", "recv",
                    "isend", "irecv", "new_group")


@dataclass(frozen=True)
class GroupPlan:
    """What a configured algorithm needs on a topology: its module, the world (one rank per SIP), the SIP
    topology strategy, the ranks' grid and the neighbour table to install."""

    module: object
    world_size: int
    sip_topology: SipTopology
    grid: tuple[int, int]
    table: dict


def plan_group(spec, cfg: AlgorithmConfig) -> GroupPlan:
    """Import ``cfg``'s (registered) algorithm and work out its group on ``spec``: :class:`CclConfigError` when
    the world size does not divide the SIPs or the algorithm does not support the SIP topology."""
    module = _import_algorithm(cfg)
    sips = spec.system.sips.count
    world = cfg.world_size or sips
    if world > sips or sips % world:
        raise CclConfigError(f"{cfg.source}: world size {world} does not divide the topology's {sips} SIPs "
                             f"(one rank per SIP); set world_size to a divisor of {sips}")
    topo = sip_strategy(spec.system.sips.topology)
    supports = getattr(module, "supports_sip_topology", None)
    if supports is not None and not supports(topo):
        able = [n for n in sip_topology_names() if supports(sip_strategy(n))]
        raise CclConfigError(f"algorithm {cfg.name!r} does not support the SIP topology {topo.name!r} "
                             f"(of the registered ones it supports {', '.join(map(repr, able)) or 'none'})")
    grid = sip_grid(spec, world, topo)
    table = getattr(module, "neighbour_table", intercube_multisip)(spec, world, topo)
    return GroupPlan(module, world, topo, grid, table)


@dataclass
class _Group:
    config: AlgorithmConfig
    module: object
    world_size: int
    sip_topology: SipTopology
    grid: tuple[int, int]
    buffer_kind: str
    installation: Installation


class DistributedContext:
    """``torch.distributed`` bound to one :class:`~kernbench.runtime.context.RuntimeContext`."""

    ReduceOp = ReduceOp

    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx
        self._group: _Group | None = None
        self.results: list = []  # (rank, LaunchResult) of every all_reduce, for benches and reports
        self._destroy_calls = 0
        self._calls: dict[int, int] = {}  # all_reduce calls made so far, per rank
        self._layouts: dict[int, tuple] = {}  # call index -> (cubes, elements, dtype) of the first rank to make it

    # ------------------------------------------------------------------ process group
    def init_process_group(self, backend: str = "ahbm", *, world_size: int | None = None, rank: int | None = None,
                           config: str | None = None, algorithm: str | None = None,
                           buffer_kind: str | None = None, **_ignored) -> None:
        """Create the process group (see the module docstring). ``world_size``/``rank`` are accepted and
        ignored, as with PyTorch's environment variables: ranks come from the launcher."""
        if backend != "ahbm":
            raise UnsupportedBackendError(f"init_process_group: backend {backend!r} is not supported; use 'ahbm'")
        spec = self.ctx.spec
        cfg = load(config or config_path(spec.source), algorithm)
        kind = buffer_kind or cfg.buffer_kind
        if self._group is not None:
            g = self._group
            if (g.config, g.buffer_kind) == (cfg, kind):
                return  # every rank calls it; the first call installed the group
            raise CollectiveError("init_process_group: a process group with other settings already exists; call "
                                  "destroy_process_group() first")
        plan = plan_group(spec, cfg)
        inst = install(self.ctx, plan.table, kind)
        self._group = _Group(cfg, plan.module, plan.world_size, plan.sip_topology, plan.grid, kind, inst)

    def destroy_process_group(self) -> None:
        """Remove the neighbour tables and free their receive rings. Under spawn every rank calls it; the group
        is torn down by the last call."""
        group = self._require("destroy_process_group")
        spawned = self.ctx.multiprocessing.nprocs
        self._destroy_calls += 1
        if spawned and self._destroy_calls < spawned:
            return
        group.installation.remove()
        self._group = None
        self._destroy_calls = 0
        self._calls.clear()
        self._layouts.clear()

    def is_initialized(self) -> bool:
        """Whether ``init_process_group`` has succeeded."""
        return self._group is not None

    def _require(self, what: str) -> _Group:
        if self._group is None:
            raise NotInitializedError(f"torch.distributed.{what}: the default process group has not been "
                                      f"initialized; call torch.distributed.init_process_group(backend='ahbm') first")
        return self._group

    def get_world_size(self) -> int:
        """Ranks in the group (one per SIP)."""
        return self._require("get_world_size").world_size

    def get_rank(self) -> int:
        """The calling rank (0 outside spawned workers)."""
        self._require("get_rank")
        rank = self.ctx.multiprocessing.rank_of()
        return 0 if rank is None else rank

    def get_backend(self) -> str:
        """Always ``"ahbm"``."""
        self._require("get_backend")
        return "ahbm"

    def barrier(self) -> None:
        """A no-op: ranks share one simulated clock and one process, so there is nothing to wait for."""
        self._require("barrier")

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, tensor: Tensor, op: str = ReduceOp.SUM):
        """Sum ``tensor`` over every shard of every rank, in place; returns the kernel's launch result.

        The tensor lives on the caller's SIP with one shard on PE 0 of either
        one cube or every cube (row-wise), all shards the same size.
        """
        group = self._require("all_reduce")
        if op != ReduceOp.SUM:
            raise UnsupportedOpError(f"all_reduce: op {op!r} is not implemented; only 'sum' is")
        rank = self.get_rank()
        spawned = self.ctx.multiprocessing.nprocs
        if (spawned or 1) != group.world_size:
            raise CollectiveError(f"all_reduce: the group has {group.world_size} ranks but {spawned or 1} "
                                  f"{'are' if (spawned or 1) > 1 else 'is'} running; run the workers with "
                                  f"torch.multiprocessing.spawn(worker, nprocs={group.world_size})")
        if not isinstance(tensor, Tensor):
            raise CollectiveError(f"all_reduce expects a tensor of this runtime, got {type(tensor).__name__}")
        self.ctx.check_tensor(tensor, "all_reduce")  # this session's, live: before any collective state changes
        if tensor.sip != rank:
            raise CollectiveError(f"all_reduce: rank {rank} passed a tensor on SIP {tensor.sip}; each rank reduces "
                                  f"a tensor on its own SIP")
        spec = self.ctx.spec
        shards = [s for s, _ in tensor.shards]
        cubes = sorted({s.cube for s in shards})
        sizes = {s.nbytes for s in shards}
        if any(s.pe != 0 for s in shards) or len(cubes) != len(shards) or len(sizes) != 1 or \
                len(cubes) not in (1, spec.cubes_per_sip):
            raise CollectiveError("all_reduce: the tensor must have one equal shard on PE 0 of one cube or of every "
                                  "cube (e.g. DPPolicy(cube='row', num_pes=1)); got shards on "
                                  f"{sorted((s.cube, s.pe) for s in shards)}")
        n_elem = shards[0].nbytes // _itemsize(tensor.dtype)
        call = self._calls.get(rank, 0)
        self._calls[rank] = call + 1
        layout = (tuple(cubes), n_elem, tensor.dtype)
        first = self._layouts.setdefault(call, layout)
        if layout != first:
            raise CollectiveError(f"all_reduce #{call + 1}: rank {rank} passes {n_elem} {tensor.dtype} values on "
                                  f"cube(s) {list(cubes)} but another rank passed {first[1]} {first[2]} values on "
                                  f"cube(s) {list(first[0])}; every rank must reduce the same layout")
        self.ctx.multiprocessing.rendezvous("all_reduce")
        w, h = (1, 1) if len(cubes) == 1 else (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h)
        call = CollectiveCall("all_reduce", group.world_size, rank, n_elem, w, h, group.sip_topology, group.grid)
        launch = group.module.launch_spec(call)
        if not isinstance(launch, LaunchSpec):
            raise CclConfigError(f"{group.config.source}: launch_spec of algorithm module {group.config.module!r} "
                                 f"returned {type(launch).__name__}, not a kernbench.ccl.LaunchSpec")
        try:
            args = launch.arguments(tensor)
        except LaunchSpecError as exc:
            raise CclConfigError(f"{group.config.source}: algorithm {group.config.name!r}: {exc}") from None
        handle = self.ctx.launch(group.config.name, launch.kernel, *args)
        result = self.ctx.wait(handle)
        self.results.append((rank, result))
        return result

    def __getattr__(self, name: str):
        if name in _NOT_IMPLEMENTED:
            def unsupported(*_args, **_kwargs):
                raise UnsupportedOpError(f"torch.distributed.{name} is not implemented by the ahbm backend; "
                                         f"all_reduce is (kernels can use tl.send / tl.recv directly)")
            return unsupported
        raise AttributeError(f"torch.distributed has no attribute {name!r}")


def collective_span_ns(results) -> float:
    """Wall time of a collective across ranks: from the earliest PE start to the latest PE end of the launch
    results (one per rank), ns."""
    reports = [rep for res in results for rep in res.reports.values()]
    if not reports:
        return 0.0
    return max(r.exec_start_ns + r.exec_ns for r in reports) - min(r.exec_start_ns for r in reports)


def _itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(dtype).itemsize


def _import_algorithm(cfg: AlgorithmConfig):
    check_registered(cfg.module, cfg.name, cfg.source)  # an AlgorithmConfig built by hand is checked too
    try:
        module = registered_module(cfg.module) or importlib.import_module(cfg.module)
    except Exception as exc:  # ImportError, or the module itself failing while it is imported
        raise CclConfigError(f"{cfg.source}: cannot import algorithm module {cfg.module!r} of {cfg.name!r}: "
                             f"{type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "launch_spec", None)):
        raise CclConfigError(f"{cfg.source}: algorithm module {cfg.module!r} does not define launch_spec (an "
                             f"algorithm module exposes launch_spec(call) -> kernbench.ccl.LaunchSpec)")
    served = getattr(module, "COLLECTIVES", (cfg.collective,))
    if cfg.collective not in served:
        raise CclConfigError(f"{cfg.source}: algorithm {cfg.name!r} runs {', '.join(map(str, served))}, not "
                             f"{cfg.collective}; choose another algorithm for collectives.{cfg.collective}")
    return module
