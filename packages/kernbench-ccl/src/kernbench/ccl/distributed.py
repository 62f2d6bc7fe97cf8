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

The other collectives the backend runs (``broadcast``,
``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``all_to_all_single``
and ``barrier``) are resolved at the same time, each from its own
``collectives:`` entry, or the packaged ``ccl.yaml``'s when the file has
none (``algorithms=`` of ``init_process_group`` picks another entry for a
collective); they share the group's world size, neighbour table and
receive rings (the all-reduce's buffer kind, or ``buffer_kind=``), and a
setting that contradicts them is a :class:`CclConfigError` naming the
collective.

``all_reduce(t)`` asks the algorithm module's ``launch_spec`` for a
:class:`~kernbench.ccl.launch_spec.LaunchSpec` (the kernel and its arguments
by name, given a :class:`~kernbench.ccl.launch_spec.CollectiveCall` holding
the SIP topology *strategy*), runs it on the PEs holding the calling rank's
tensor (its SIP) and waits for it; under
``torch.multiprocessing.spawn`` every rank's wait goes to the launcher, so
the collective drains once all ranks have launched. ``barrier()`` launches
the barrier algorithm on a one-value token, so no rank returns from it on
the device before every rank has reached it. ``all_to_all_single`` meets
the other ranks first, then builds every rank's split sizes into one
:class:`~kernbench.ccl.launch_spec.SplitTable` the algorithm plans from
(data-dependent sizes are decided here, on the host). Other collectives are
not implemented and say so.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kernbench.ccl.config import (
    IMPLEMENTED,
    PACKAGED,
    AlgorithmConfig,
    CclConfigError,
    algorithm_entries,
    check_registered,
    config_path,
    configured_collectives,
    load,
    registered_module,
)
from kernbench.ccl.install import Installation, install
from kernbench.ccl.launch_spec import CollectiveCall, LaunchSpec, LaunchSpecError, SplitTable
from kernbench.ccl.neighbours import intercube_multisip, sip_grid, sip_strategy
from kernbench.runtime import DPPolicy, RuntimeContext, Tensor
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


_NOT_IMPLEMENTED = ("reduce", "all_gather", "gather", "scatter", "reduce_scatter", "all_to_all", "send", "recv",
                    "isend", "irecv", "new_group")
_RUNS = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
         "barrier")
_TOKEN = DPPolicy(num_cubes=1, num_pes=1)  # the barrier's one-value token: PE 0 of cube 0 of the rank's SIP


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
    algorithms: dict = field(default_factory=dict)  # collective -> (AlgorithmConfig, module)
    chosen: tuple = ()  # the (collective, algorithm) pairs init_process_group's algorithms= set


class DistributedContext:
    """``torch.distributed`` bound to one :class:`~kernbench.runtime.context.RuntimeContext`."""

    ReduceOp = ReduceOp

    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx
        self._group: _Group | None = None
        self.results: list = []  # (rank, LaunchResult) of every all_reduce, for benches and reports
        self.collective_results: dict[str, list] = {}  # collective -> (rank, LaunchResult) of every call of it
        self._destroy_calls = 0
        self._calls: dict[int, int] = {}  # all_reduce calls made so far, per rank
        self._layouts: dict[int, tuple] = {}  # call index -> (cubes, elements, dtype) of the first rank to make it
        self._splits: dict[int, dict[int, tuple]] = {}  # all_to_all call index -> rank -> its sizes (see below)
        self._tables_built: dict[int, int] = {}  # all_to_all call index -> ranks that have built its table

    # ------------------------------------------------------------------ process group
    def init_process_group(self, backend: str = "ahbm", *, world_size: int | None = None, rank: int | None = None,
                           config: str | None = None, algorithm: str | None = None,
                           buffer_kind: str | None = None, algorithms: Mapping[str, str] | None = None,
                           **_ignored) -> None:
        """Create the process group (see the module docstring). ``world_size``/``rank`` are accepted and
        ignored, as with PyTorch's environment variables: ranks come from the launcher. ``algorithm`` names the
        all-reduce's algorithm entry; ``algorithms`` maps other collectives (``"all_to_all"``, ...) to an entry of
        the ``ccl.yaml`` that configures them, in place of the entry the file chooses."""
        if backend != "ahbm":
            raise UnsupportedBackendError(f"init_process_group: backend {backend!r} is not supported; use 'ahbm'")
        chosen = _chosen_algorithms(algorithms)
        spec = self.ctx.spec
        cfg = load(config or config_path(spec.source), algorithm)
        kind = buffer_kind or cfg.buffer_kind
        if self._group is not None:
            g = self._group
            if (g.config, g.buffer_kind, g.chosen) == (cfg, kind, chosen):
                return  # every rank calls it; the first call installed the group
            raise CollectiveError("init_process_group: a process group with other settings already exists; call "
                                  "destroy_process_group() first")
        path = config or config_path(spec.source)
        plan = plan_group(spec, cfg)
        algorithms = {"all_reduce": (cfg, plan.module)}
        configured, entries = configured_collectives(path), algorithm_entries(path)
        for coll in IMPLEMENTED[1:]:
            name = dict(chosen).get(coll)  # an entry of the file in use, else of the packaged one
            source = path if coll in configured or name in entries else PACKAGED
            algorithms[coll] = self._plan_other(spec, source, coll, plan, kind, buffer_kind is not None, name)
        inst = install(self.ctx, plan.table, kind)
        self._group = _Group(cfg, plan.module, plan.world_size, plan.sip_topology, plan.grid, kind, inst,
                             algorithms, chosen)

    @staticmethod
    def _plan_other(spec, path, coll: str, plan: GroupPlan, kind: str, kind_forced: bool, name: str | None = None):
        """Resolve ``coll``'s algorithm in ``path`` (entry ``name`` when given) and check it fits the group planned
        for ``all_reduce``."""
        cfg = load(path, name, collective=coll)
        if path == PACKAGED:  # not configured in the user's file: the group's settings apply
            cfg = replace(cfg, world_size=plan.world_size, buffer_kind=kind)
        if cfg.world_size is not None and cfg.world_size != plan.world_size:
            raise CclConfigError(f"{cfg.source}: {coll} has world size {cfg.world_size} but the group (all_reduce) "
                                 f"has {plan.world_size}; one process group has one world size")
        if not kind_forced and cfg.buffer_kind_given and cfg.buffer_kind != kind:
            raise CclConfigError(f"{cfg.source}: {coll} asks for buffer_kind {cfg.buffer_kind} but the group's rings "
                                 f"(all_reduce's) are in {kind}; one process group installs one set of rings, so set "
                                 f"the same buffer_kind (e.g. under defaults) or pass buffer_kind=")
        other = plan_group(spec, replace(cfg, world_size=plan.world_size))
        if other.table != plan.table:
            raise CclConfigError(f"{cfg.source}: algorithm {cfg.name!r} of {coll} needs another neighbour table "
                                 f"than all_reduce's {plan.module.__name__}; one process group installs one table")
        return cfg, other.module

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
        self._splits.clear()
        self._tables_built.clear()

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

    def barrier(self):
        """Wait on the device until every rank has reached the barrier (the ``barrier`` algorithm of
        ``ccl.yaml`` on a one-value token on PE 0 of cube 0); returns the launch result."""
        group = self._require("barrier")
        rank = self._check_ranks("barrier", group)
        token = self.ctx.empty((1, 1), "float16", _TOKEN)
        try:
            self._record_layout("barrier", rank, (), "")
            call = CollectiveCall("barrier", group.world_size, rank, 1, 1, 1, group.sip_topology, group.grid)
            return self._launch("barrier", "barrier", group, token, call)
        finally:
            self.ctx.free(token)

    def broadcast(self, tensor: Tensor, src: int = 0, group=None, async_op: bool = False):
        """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank, in place; returns the launch result.
        The tensor is one 2-D shard on PE 0 of one cube (e.g. ``DPPolicy(num_cubes=1, num_pes=1)``), the same
        shape and dtype on every rank."""
        grp = self._require("broadcast")
        self._no_group_args("broadcast", group, async_op)
        rank = self._check_ranks("broadcast", grp)
        if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < grp.world_size:
            raise CollectiveError(f"broadcast: rank {rank} passes src={src!r}; src must be a rank "
                                  f"0..{grp.world_size - 1}")
        n_elem = self._one_cube("broadcast", rank, tensor, "tensor")
        self._record_layout("broadcast", rank, (tuple(tensor.shape), tensor.dtype, src),
                            f"a {tensor.dtype}{list(tensor.shape)} tensor from src {src}")
        call = CollectiveCall("broadcast", grp.world_size, rank, n_elem, 1, 1, grp.sip_topology, grp.grid, src=src)
        return self._launch("broadcast", "broadcast", grp, tensor, call)

    def all_gather_into_tensor(self, output_tensor: Tensor, input_tensor: Tensor, group=None,
                               async_op: bool = False):
        """Concatenate every rank's ``input_tensor`` (in rank order, along dim 0) into ``output_tensor`` on
        every rank. Both are one 2-D shard on PE 0 of the same cube; the output has ``world_size`` times the
        input's rows."""
        grp = self._require("all_gather_into_tensor")
        self._no_group_args("all_gather_into_tensor", group, async_op)
        rank = self._check_ranks("all_gather_into_tensor", grp)
        n_elem = self._one_cube("all_gather_into_tensor", rank, input_tensor, "input")
        self._matching("all_gather_into_tensor", rank, grp.world_size, output_tensor, input_tensor, "output",
                       "input")
        self._record_layout("all_gather_into_tensor", rank, (tuple(input_tensor.shape), input_tensor.dtype),
                            f"an input of {input_tensor.dtype}{list(input_tensor.shape)}")
        call = CollectiveCall("all_gather", grp.world_size, rank, n_elem, 1, 1, grp.sip_topology, grp.grid)
        return self._launch("all_gather_into_tensor", "all_gather", grp, input_tensor, call, {"out": output_tensor})

    def reduce_scatter_tensor(self, output: Tensor, input: Tensor, op: str = ReduceOp.SUM, group=None,
                              async_op: bool = False):
        """Sum every rank's ``input`` and give rank ``r`` block ``r`` of the sum (rows ``r*R .. (r+1)*R``) in
        ``output`` (``R`` rows). Both are one 2-D shard on PE 0 of the same cube."""
        grp = self._require("reduce_scatter_tensor")
        self._no_group_args("reduce_scatter_tensor", group, async_op)
        if op != ReduceOp.SUM:
            raise UnsupportedOpError(f"reduce_scatter_tensor: op {op!r} is not implemented; only 'sum' is")
        rank = self._check_ranks("reduce_scatter_tensor", grp)
        n_elem = self._one_cube("reduce_scatter_tensor", rank, output, "output")
        self._matching("reduce_scatter_tensor", rank, grp.world_size, input, output, "input", "output")
        self._record_layout("reduce_scatter_tensor", rank, (tuple(output.shape), output.dtype),
                            f"an output of {output.dtype}{list(output.shape)}")
        call = CollectiveCall("reduce_scatter", grp.world_size, rank, n_elem, 1, 1, grp.sip_topology, grp.grid)
        return self._launch("reduce_scatter_tensor", "reduce_scatter", grp, input, call, {"out": output})

    def all_to_all_single(self, output: Tensor, input: Tensor, output_split_sizes: Sequence[int] | None = None,
                          input_split_sizes: Sequence[int] | None = None, group=None, async_op: bool = False):
        """Cut ``input`` along dim 0 into one block per rank, in rank order (``input_split_sizes[j]`` rows for
        rank ``j``), send each block to its rank, and fill ``output`` with the blocks every rank sent this one, in
        rank order (``output_split_sizes[i]`` rows from rank ``i``). ``None`` cuts a tensor into ``world_size``
        equal blocks; a split may be 0 rows. Returns the launch result.

        Both tensors are 2-D on the rank's SIP, with the same columns and dtype, either on PE 0 of one cube
        (``DPPolicy(num_cubes=1, num_pes=1)``) or split row-wise over PE 0 of every cube
        (``DPPolicy(cube="row_wise", num_pes=1)``), the same cubes for both. Rank ``i``'s
        ``input_split_sizes[j]`` must equal rank ``j``'s ``output_split_sizes[i]``; the backend checks it once
        every rank has called, and passes the whole table to the algorithm.
        """
        what = "all_to_all_single"
        grp = self._require(what)
        self._no_group_args(what, group, async_op)
        rank = self._check_ranks(what, grp)
        cubes, in_rows = self._row_shards(what, rank, input, "input")
        out_cubes, out_rows = self._row_shards(what, rank, output, "output")
        if out_cubes != cubes or output.dtype != input.dtype or output.shape[1] != input.shape[1]:
            raise CollectiveError(f"{what}: rank {rank} passes output {output.dtype}{list(output.shape)} on cube(s) "
                                  f"{list(out_cubes)} and input {input.dtype}{list(input.shape)} on cube(s) "
                                  f"{list(cubes)}; both need the same columns and dtype on the same cubes")
        world = grp.world_size
        sends = _split_sizes(what, rank, input_split_sizes, input.shape[0], world, "input")
        receives = _split_sizes(what, rank, output_split_sizes, output.shape[0], world, "output")
        call_no = self._calls.get(rank, 0)
        self._record_layout(what, rank, (input.shape[1], input.dtype, cubes),
                            f"rows of {input.shape[1]} {input.dtype} values on cube(s) {list(cubes)}")
        self._splits.setdefault(call_no, {})[rank] = (sends, receives, in_rows, out_rows)
        spec = self.ctx.spec
        w, h = (1, 1) if len(cubes) == 1 else (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h)
        row_bytes = input.shape[1] * _itemsize(input.dtype)

        def call() -> CollectiveCall:  # every rank has arrived: their sizes make one table
            table = self._split_table(what, call_no, world, cubes, row_bytes)
            return CollectiveCall("all_to_all", world, rank, in_rows[0] * input.shape[1], w, h, grp.sip_topology,
                                  grp.grid, split_table=table)

        return self._launch(what, "all_to_all", grp, input, call, {"out": output})

    def _split_table(self, what: str, call_no: int, world: int, cubes: tuple[int, ...], row_bytes: int
                     ) -> SplitTable:
        """Every rank's sizes for ``what`` call ``call_no`` as one table, once each send matches its receive."""
        ranks = self._splits[call_no]
        for i in range(world):
            for j in range(world):
                s, t = ranks[i][0][j], ranks[j][1][i]
                if s != t:
                    raise CollectiveError(f"{what} #{call_no + 1}: rank {i} sends {s} rows to rank {j} but rank {j} "
                                          f"expects {t} rows from rank {i}; rank {j}'s output_split_sizes[{i}] must "
                                          f"equal rank {i}'s input_split_sizes[{j}]")
        spec = self.ctx.spec
        table = SplitTable(splits=tuple(ranks[i][0] for i in range(world)),
                           in_rows=tuple(ranks[i][2] for i in range(world)),
                           out_rows=tuple(ranks[i][3] for i in range(world)), cubes=cubes, row_bytes=row_bytes,
                           slot_bytes=spec.pe.ipcq.slot_bytes,
                           scratch_bytes=int(spec.pe.tcm.scratch_mib * (1 << 20)))
        built = self._tables_built.get(call_no, 0) + 1
        if built == world:  # every rank has its table: the sizes of this call are no longer needed
            del self._splits[call_no]
            self._tables_built.pop(call_no, None)
        else:
            self._tables_built[call_no] = built
        return table

    # ------------------------------------------------------------------ shared checks of the collectives
    @staticmethod
    def _no_group_args(what: str, group, async_op: bool) -> None:
        if group is not None or async_op:
            raise UnsupportedOpError(f"{what}: group= and async_op=True are not implemented by the ahbm backend; "
                                     f"every collective runs on the default group and waits")

    def _check_ranks(self, what: str, group: _Group) -> int:
        """The calling rank, once the number of running ranks matches the group."""
        spawned = self.ctx.multiprocessing.nprocs
        if (spawned or 1) != group.world_size:
            raise CollectiveError(f"{what}: the group has {group.world_size} ranks but {spawned or 1} "
                                  f"{'are' if (spawned or 1) > 1 else 'is'} running; run the workers with "
                                  f"torch.multiprocessing.spawn(worker, nprocs={group.world_size})")
        return self.get_rank()

    def _one_cube(self, what: str, rank: int, tensor: Tensor, name: str) -> int:
        """Check ``tensor`` is this session's, on the rank's SIP, one 2-D shard on PE 0 of one cube; its values."""
        if not isinstance(tensor, Tensor):
            raise CollectiveError(f"{what}: rank {rank}: {name} must be a tensor of this runtime, got "
                                  f"{type(tensor).__name__}")
        self.ctx.check_tensor(tensor, what)
        if tensor.sip != rank:
            raise CollectiveError(f"{what}: rank {rank} passed a tensor on SIP {tensor.sip}; each rank passes "
                                  f"tensors on its own SIP")
        shards = [s for s, _ in tensor.shards]
        if len(shards) != 1 or shards[0].pe != 0 or len(tensor.shape) != 2:
            raise CollectiveError(f"{what}: rank {rank}: {name} must be 2-D with one shard on PE 0 of one cube "
                                  f"(e.g. DPPolicy(num_cubes=1, num_pes=1)); got shape {list(tensor.shape)} with "
                                  f"shards on {sorted((s.cube, s.pe) for s in shards)}")
        return shards[0].nbytes // _itemsize(tensor.dtype)

    def _row_shards(self, what: str, rank: int, tensor: Tensor, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Check ``tensor`` is this session's, on the rank's SIP, 2-D, on PE 0 of one cube or split row-wise over
        PE 0 of every cube; its cubes and the rows on each."""
        if not isinstance(tensor, Tensor):
            raise CollectiveError(f"{what}: rank {rank}: {name} must be a tensor of this runtime, got "
                                  f"{type(tensor).__name__}")
        self.ctx.check_tensor(tensor, what)
        if tensor.sip != rank:
            raise CollectiveError(f"{what}: rank {rank} passed a tensor on SIP {tensor.sip}; each rank passes "
                                  f"tensors on its own SIP")
        shards = sorted((s for s, _ in tensor.shards), key=lambda s: s.cube)
        cubes = tuple(s.cube for s in shards)
        whole = len(tensor.shape) == 2 and all(s.cols == (0, tensor.shape[1]) for s in shards) and \
            [s.rows[0] for s in shards] == [0, *(s.rows[1] for s in shards[:-1])] and \
            shards[-1].rows[1] == tensor.shape[0]  # consecutive rows, in cube order
        if not whole or any(s.pe != 0 for s in shards) or len(set(cubes)) != len(cubes) or \
                len(cubes) not in (1, self.ctx.spec.cubes_per_sip):
            raise CollectiveError(f"{what}: rank {rank}: {name} must be 2-D on PE 0 of one cube "
                                  f"(DPPolicy(num_cubes=1, num_pes=1)) or split row-wise over PE 0 of every cube "
                                  f"(DPPolicy(cube='row_wise', num_pes=1)); got shape {list(tensor.shape)} with "
                                  f"shards on {sorted((s.cube, s.pe) for s in shards)}")
        return cubes, tuple(s.rows[1] - s.rows[0] for s in shards)

    def _matching(self, what: str, rank: int, world: int, large: Tensor, small: Tensor, large_name: str,
                  small_name: str) -> None:
        """``large`` must be ``world`` blocks of ``small`` stacked along dim 0, in the same dtype and on the same
        PE (the PE the kernel runs on)."""
        self._one_cube(what, rank, large, large_name)
        want = (world * small.shape[0], small.shape[1])
        if tuple(large.shape) != want or large.dtype != small.dtype:
            raise CollectiveError(f"{what}: rank {rank} passes {large_name} {large.dtype}{list(large.shape)} and "
                                  f"{small_name} {small.dtype}{list(small.shape)}; {large_name} must be "
                                  f"{small.dtype}{list(want)} (world size {world} x the {small_name}'s rows)")
        (a, _), (b, _) = large.shards[0], small.shards[0]
        if a.cube != b.cube:
            raise CollectiveError(f"{what}: rank {rank} passes the {large_name} on cube {a.cube} and the "
                                  f"{small_name} on cube {b.cube}; place both on the same cube's PE 0")

    def _record_layout(self, what: str, rank: int, layout: tuple, text: str, rule: str = "pass the same sizes"
                       ) -> None:
        """Count the rank's collective calls and check its ``layout`` against the first rank's n-th call."""
        call = self._calls.get(rank, 0)
        self._calls[rank] = call + 1
        first = self._layouts.setdefault(call, (what, layout, text, rank))
        if first[0] != what:
            raise CollectiveError(f"collective #{call + 1}: rank {rank} calls {what} but rank {first[3]} called "
                                  f"{first[0]}; every rank must call the same collectives in the same order")
        if first[1] != layout:
            raise CollectiveError(f"{what} #{call + 1}: rank {rank} passes {text} but rank {first[3]} passed "
                                  f"{first[2]}; every rank must {rule}")

    def _launch(self, what: str, collective: str, group: _Group, tensor: Tensor,
                call: CollectiveCall | Callable[[], CollectiveCall], extra: dict | None = None):
        """Meet the other ranks in ``what`` (the call's name), then launch the algorithm configured for
        ``collective`` on ``tensor``'s PEs and wait; the result is kept in ``collective_results``. ``call`` may be
        a function that builds the call once every rank has arrived (from what the other ranks passed). The
        launch spec's workspace tensors are allocated on ``tensor``'s PEs for the launch and freed after it."""
        cfg, module = group.algorithms[collective]
        self.ctx.multiprocessing.rendezvous(what)
        if callable(call):
            call = call()
        launch = module.launch_spec(call)
        if not isinstance(launch, LaunchSpec):
            raise CclConfigError(f"{cfg.source}: launch_spec of algorithm module {cfg.module!r} "
                                 f"returned {type(launch).__name__}, not a kernbench.ccl.LaunchSpec")
        extra = dict(extra or {})
        clash = sorted(set(launch.workspace) & set(extra))
        if clash:
            raise CclConfigError(f"{cfg.source}: algorithm {cfg.name!r} asks for a workspace named "
                                 f"{', '.join(map(repr, clash))}, which the backend passes itself; rename it")
        work = {name: self._workspace(tensor, rows) for name, rows in launch.workspace.items()}
        try:
            try:
                args = launch.arguments(tensor, {**extra, **work})
            except LaunchSpecError as exc:
                raise CclConfigError(f"{cfg.source}: algorithm {cfg.name!r}: {exc}") from None
            result = self.ctx.wait(self.ctx.launch(cfg.name, launch.kernel, *args))
        finally:
            for t in work.values():
                if t is not None:
                    self.ctx.free(t)
        if collective == "all_reduce":
            self.results.append((call.rank, result))
        self.collective_results.setdefault(collective, []).append((call.rank, result))
        return result

    def _workspace(self, tensor: Tensor, rows: int) -> Tensor | None:
        """A ``rows x columns`` tensor of ``tensor``'s dtype on PE 0 of each cube ``tensor`` spans (``None`` for 0
        rows): scratch an algorithm asked for in its launch spec."""
        if not rows:
            return None
        cubes = sorted({s.cube for s, _ in tensor.shards})
        policy = DPPolicy(cube="replicate", num_cubes=len(cubes), cube_start=cubes[0], num_pes=1)
        return self.ctx.empty((rows, tensor.shape[-1]), tensor.dtype, policy)

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, tensor: Tensor, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
        """Sum ``tensor`` over every shard of every rank, in place; returns the kernel's launch result.

        The tensor lives on the caller's SIP with one shard on PE 0 of either
        one cube or every cube (row-wise), all shards the same size.
        """
        grp = self._require("all_reduce")
        self._no_group_args("all_reduce", group, async_op)
        if op != ReduceOp.SUM:
            raise UnsupportedOpError(f"all_reduce: op {op!r} is not implemented; only 'sum' is")
        rank = self._check_ranks("all_reduce", grp)
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
        self._record_layout("all_reduce", rank, (tuple(cubes), n_elem, tensor.dtype),
                            f"{n_elem} {tensor.dtype} values on cube(s) {list(cubes)}", "reduce the same layout")
        w, h = (1, 1) if len(cubes) == 1 else (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h)
        call = CollectiveCall("all_reduce", grp.world_size, rank, n_elem, w, h, grp.sip_topology, grp.grid)
        return self._launch("all_reduce", "all_reduce", grp, tensor, call)

    def __getattr__(self, name: str):
        if name in _NOT_IMPLEMENTED:
            def unsupported(*_args, **_kwargs):
                raise UnsupportedOpError(f"torch.distributed.{name} is not implemented by the ahbm backend; "
                                         f"{', '.join(_RUNS)} are (kernels can use tl.send / tl.recv directly)")
            return unsupported
        raise AttributeError(f"torch.distributed has no attribute {name!r}")


def _split_sizes(what: str, rank: int, sizes: Sequence[int] | None, rows: int, world: int, name: str
                 ) -> tuple[int, ...]:
    """The rows of ``name`` (``"input"`` or ``"output"``) that go to (come from) each rank: ``sizes`` checked, or
    ``world`` equal parts of ``rows``."""
    arg = f"{name}_split_sizes"
    if sizes is None:
        if rows % world:
            raise CollectiveError(f"{what}: rank {rank}: the {name} has {rows} rows, which world size {world} does "
                                  f"not divide into equal splits; pass {arg} (rows per rank)")
        return (rows // world,) * world
    try:
        values = tuple(operator.index(v) if not isinstance(v, bool) else _not_a_count(v) for v in sizes)
    except TypeError:
        raise CollectiveError(f"{what}: rank {rank}: {arg} must be a sequence of {world} row counts, got "
                              f"{sizes!r}") from None
    if len(values) != world:
        raise CollectiveError(f"{what}: rank {rank}: {arg} has {len(values)} entries but the group has {world} "
                              f"ranks; give one row count per rank")
    for j, v in enumerate(values):
        if v < 0:
            raise CollectiveError(f"{what}: rank {rank}: {arg}[{j}] = {v} is negative; a split is a number of rows "
                                  f"(>= 0)")
    if sum(values) != rows:
        raise CollectiveError(f"{what}: rank {rank}: {arg} {list(values)} add up to {sum(values)} rows but the "
                              f"{name} has {rows} rows (dim 0); the splits must add up to them")
    return values


def _not_a_count(value: object) -> int:
    raise TypeError(f"{value!r} is not a row count")


def _chosen_algorithms(algorithms: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """``init_process_group``'s ``algorithms=`` checked: a collective the backend runs (other than ``all_reduce``,
    which ``algorithm=`` chooses) -> an algorithm entry name."""
    if algorithms is None:
        return ()
    if not isinstance(algorithms, Mapping):
        raise CclConfigError(f"init_process_group: algorithms= must map collectives to algorithm entries, got "
                             f"{type(algorithms).__name__}")
    others = IMPLEMENTED[1:]
    for coll, name in algorithms.items():
        if coll not in others:
            raise CclConfigError(f"init_process_group: algorithms= names {coll!r}, which is not one of "
                                 f"{', '.join(others)} (all_reduce's algorithm is algorithm=)")
        if not isinstance(name, str) or not name:
            raise CclConfigError(f"init_process_group: algorithms[{coll!r}] must name an algorithm entry of "
                                 f"ccl.yaml, got {name!r}")
    return tuple(sorted(algorithms.items()))


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
