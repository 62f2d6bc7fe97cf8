"""The ahbm backend's errors: unsupported backends and ops, calls before init, bad ccl.yaml, bad tensors, spawn.

Every failure must leave nothing installed (no PE_IPCQ links, no process
group), and the messages must tell the user what to do.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from kernbench.ccl import (
    CclConfigError,
    CollectiveError,
    NeighbourError,
    NotInitializedError,
    UnsupportedBackendError,
    UnsupportedOpError,
)
from kernbench.ccl.config import PACKAGED, register_algorithm
from kernbench.runtime import DPPolicy, RuntimeApiError, RuntimeContext
from kernbench.topology.address import decode
from kernbench.topology.errors import KernbenchError

ALGO = "lrab_hierarchical_allreduce"
ALGO_MODULE = "kernbench.ccl.algorithms.lrab_hierarchical_allreduce"
GOOD = DPPolicy(cube="row_wise", num_pes=1)  # one shard on PE 0 of each of the 16 cubes


def ipcq(ctx, pe):
    return ctx.engine.components[f"sip{pe[0]}.cube{pe[1]}.pe{pe[2]}.pe_ipcq"]


def linked_pes(ctx) -> set:
    return {name for name, c in ctx.engine.components.items() if name.endswith(".pe_ipcq") and c.links}


def write_ccl(tmp_path, *, module: str = ALGO_MODULE, world_size=None, buffer_kind: str = "tcm",
              entry: bool = True, name: str = "ccl.yaml") -> str:
    lines = ["defaults:", f"  algorithm: {ALGO}", f"  buffer_kind: {buffer_kind}"]
    if world_size is not None:
        lines.append(f"  world_size: {world_size}")
    lines.append("algorithms:")
    if entry:
        lines += [f"  {ALGO}:", f"    module: {module}"]
    else:
        lines += ["  some_other_algorithm:", f"    module: {ALGO_MODULE}"]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def write_module(tmp_path, monkeypatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return register_algorithm(name)  # a ccl.yaml may name registered algorithm modules only


@pytest.fixture
def ctx(default_graph):
    return RuntimeContext(default_graph)


# ---------------------------------------------------------------------------------------------- backend, init
def test_a_backend_other_than_ahbm_is_refused(ctx):
    d = ctx.distributed
    with pytest.raises(ValueError, match="'nccl'") as exc:
        d.init_process_group(backend="nccl")
    assert isinstance(exc.value, UnsupportedBackendError)
    assert "'ahbm'" in str(exc.value)
    assert not d.is_initialized() and linked_pes(ctx) == set()


@pytest.mark.parametrize("call", ["all_reduce", "get_world_size", "get_rank", "barrier", "get_backend",
                                  "destroy_process_group"])
def test_calls_before_init_say_to_call_init_process_group(ctx, call):
    d = ctx.distributed
    args = (ctx.zeros((16, 8), "float16", GOOD),) if call == "all_reduce" else ()
    with pytest.raises(RuntimeError, match=r"call torch\.distributed\.init_process_group") as exc:
        getattr(d, call)(*args)
    assert isinstance(exc.value, NotInitializedError)
    assert f"torch.distributed.{call}" in str(exc.value)
    assert not d.is_initialized()


def test_is_initialized_tracks_init_and_destroy(ctx):
    d = ctx.distributed
    assert not d.is_initialized()
    d.init_process_group("ahbm")
    assert d.is_initialized()
    d.destroy_process_group()
    assert not d.is_initialized()
    assert linked_pes(ctx) == set()
    with pytest.raises(NotInitializedError):
        d.destroy_process_group()


def test_unsupported_reduce_op(ctx):
    d = ctx.distributed
    d.init_process_group()
    t = ctx.zeros((16, 8), "float16", GOOD)
    with pytest.raises(NotImplementedError, match="'max'") as exc:
        d.all_reduce(t, op="max")
    assert isinstance(exc.value, UnsupportedOpError)
    assert d.ReduceOp.SUM == "sum"


@pytest.mark.parametrize("name", ["all_gather", "reduce_scatter", "all_to_all", "send", "recv", "new_group"])
def test_other_collectives_are_not_implemented(ctx, name):
    d = ctx.distributed
    with pytest.raises(NotImplementedError, match=rf"torch\.distributed\.{name} is not implemented") as exc:
        getattr(d, name)(ctx.zeros((16, 8), "float16", GOOD), 0)
    assert isinstance(exc.value, UnsupportedOpError)


def test_unknown_attributes_are_attribute_errors(ctx):
    with pytest.raises(AttributeError, match="no_such_call"):
        ctx.distributed.no_such_call()


# ---------------------------------------------------------------------------------------------- world size
@pytest.mark.parametrize("world", [4, 5, 7, 12])
def test_a_world_size_that_does_not_divide_the_sips_is_refused(load_graph, tmp_path, world):
    ctx = RuntimeContext(load_graph("6sip_2x3_ring_1d"))
    d = ctx.distributed
    with pytest.raises(CclConfigError, match="does not divide") as exc:
        d.init_process_group(config=write_ccl(tmp_path, world_size=world))
    assert f"world size {world}" in str(exc.value)
    assert not d.is_initialized() and linked_pes(ctx) == set()


@pytest.mark.parametrize("world", [0, -2, "two", True])
def test_a_world_size_that_is_not_a_positive_integer_is_refused(ctx, tmp_path, world):
    with pytest.raises(CclConfigError, match="world_size must be a positive integer"):
        ctx.distributed.init_process_group(config=write_ccl(tmp_path, world_size=world))


def test_a_dividing_world_size_is_accepted_on_a_ring(load_graph, tmp_path):
    ctx = RuntimeContext(load_graph("6sip_2x3_ring_1d"))
    d = ctx.distributed
    d.init_process_group(config=write_ccl(tmp_path, world_size=3))
    assert d.get_world_size() == 3
    # the ring closes over ranks 0..2; SIPs 3..5 get nothing
    assert ipcq(ctx, (0, 4, 0)).links["global_W"].peer == (2, 4, 0)
    assert ipcq(ctx, (2, 4, 0)).links["global_E"].peer == (0, 4, 0)
    assert {n.split(".")[0] for n in linked_pes(ctx)} == {"sip0", "sip1", "sip2"}


def test_the_world_size_defaults_to_the_sip_count(load_graph):
    ctx = RuntimeContext(load_graph("6sip_2x3_torus_2d"))
    ctx.distributed.init_process_group()
    assert ctx.distributed.get_world_size() == 6


def test_the_algorithm_entry_overrides_the_default_world_size(load_graph, tmp_path):
    path = tmp_path / "ccl.yaml"
    path.write_text(f"defaults: {{algorithm: {ALGO}, world_size: 2}}\n"
                    f"algorithms: {{{ALGO}: {{module: {ALGO_MODULE}, world_size: 6}}}}\n")
    ctx = RuntimeContext(load_graph("6sip_2x3_ring_1d"))
    ctx.distributed.init_process_group(config=str(path))
    assert ctx.distributed.get_world_size() == 6


@pytest.mark.parametrize("topo", ["torus_2d", "mesh_2d_no_wrap"])
def test_a_2d_sip_topology_needs_its_whole_grid(load_graph, tmp_path, topo):
    ctx = RuntimeContext(load_graph(f"6sip_2x3_{topo}"))
    d = ctx.distributed
    with pytest.raises(NeighbourError, match="2x3"):
        d.init_process_group(config=write_ccl(tmp_path, world_size=3))  # divides 6, but is not the 2x3 grid
    assert not d.is_initialized() and linked_pes(ctx) == set()


# ---------------------------------------------------------------------------------------------- algorithm module
@pytest.mark.parametrize("body", [
    "def kernel_args(world_size, n_elem, **kw):\n    return ()\n",  # the former positional contract
    "def kernel(tl, *args):\n    pass\n",
    "launch_spec = 3\n",
    "X = 1\n",
])
def test_an_algorithm_module_must_define_launch_spec(ctx, tmp_path, monkeypatch, body):
    mod = write_module(tmp_path, monkeypatch, f"ccl_algo_missing_{abs(hash(body)) % 10**8}_{len(body)}", body)
    with pytest.raises(CclConfigError, match=r"does not define launch_spec \(") as exc:
        ctx.distributed.init_process_group(config=write_ccl(tmp_path, module=mod))
    assert mod in str(exc.value)
    assert not ctx.distributed.is_initialized() and linked_pes(ctx) == set()


def test_a_custom_algorithm_module_with_the_contract_is_accepted(ctx, tmp_path, monkeypatch):
    mod = write_module(tmp_path, monkeypatch, "ccl_algo_minimal_ok", """
        from kernbench.ccl import LaunchSpec

        def kernel(tl, t, n_elem):
            pass

        def launch_spec(call):
            return LaunchSpec(kernel, {"n_elem": call.n_elem})
    """)
    ctx.distributed.init_process_group(config=write_ccl(tmp_path, module=mod))
    assert ctx.distributed.is_initialized()


def test_an_algorithm_that_does_not_support_the_sip_topology_is_refused(ctx, tmp_path, monkeypatch):
    mod = write_module(tmp_path, monkeypatch, "ccl_algo_torus_only", """
        def supports_sip_topology(topology):
            return topology.name == "torus_2d"

        def launch_spec(call):
            raise NotImplementedError
    """)
    with pytest.raises(CclConfigError, match=r"SIP topology 'ring_1d' .*supports 'torus_2d'\)"):
        ctx.distributed.init_process_group(config=write_ccl(tmp_path, module=mod))
    assert linked_pes(ctx) == set()


@pytest.mark.parametrize("module", ["ccl_no_such_module_xyz", "kernbench.ccl.algorithms.no_such_algorithm",
                                    "ccl_algo_imports_missing"])
def test_an_unimportable_algorithm_module_is_a_config_error(ctx, tmp_path, monkeypatch, module):
    write_module(tmp_path, monkeypatch, "ccl_algo_imports_missing", "import ccl_dependency_that_is_not_there\n")
    monkeypatch.delitem(sys.modules, module, raising=False)
    register_algorithm(module)  # registered by name, so the import is tried (and fails)
    with pytest.raises(CclConfigError, match="cannot import algorithm module") as exc:
        ctx.distributed.init_process_group(config=write_ccl(tmp_path, module=module))
    assert module in str(exc.value)
    assert not ctx.distributed.is_initialized()


def test_a_ccl_yaml_without_the_algorithm_entry_is_a_config_error(ctx, tmp_path):
    with pytest.raises(CclConfigError, match=rf"'{ALGO}' has no entry") as exc:
        ctx.distributed.init_process_group(config=write_ccl(tmp_path, entry=False))
    assert "some_other_algorithm" in str(exc.value)  # lists the known ones
    with pytest.raises(CclConfigError, match="'nope' has no entry"):
        ctx.distributed.init_process_group(config=str(PACKAGED), algorithm="nope")
    assert not ctx.distributed.is_initialized()


@pytest.mark.parametrize("text", ["defaults: [1, 2\n", "- a\n- b\n", "algorithms: {}\n", "defaults: 3\n",
                                  "defaults: {algorithm: [a]}\n", "defaults: {}\ndefaults: {}\n",
                                  "defaults: !!python/name:os.system\n"])
def test_a_malformed_ccl_yaml_is_a_config_error(ctx, tmp_path, text):
    path = tmp_path / "ccl.yaml"
    path.write_text(text)
    with pytest.raises(CclConfigError):
        ctx.distributed.init_process_group(config=str(path))


@pytest.mark.parametrize("raw, fragment", [
    (b"defaults:\n  algorithm: lrab\xff\n", "not UTF-8 text: byte 0xff at offset 27 (line 2)"),
    (b"defaults: {}\ndefaults: {}\n", "duplicate key 'defaults' (first at line 1, again at line 2)"),
])
def test_ccl_yaml_goes_through_the_safe_loader(ctx, tmp_path, raw, fragment):
    path = tmp_path / "ccl.yaml"
    path.write_bytes(raw)
    with pytest.raises(CclConfigError) as info:
        ctx.distributed.init_process_group(config=str(path))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_missing_ccl_yaml_is_a_config_error(ctx, tmp_path):
    with pytest.raises(CclConfigError, match="cannot read"):
        ctx.distributed.init_process_group(config=str(tmp_path / "absent.yaml"))


# ---------------------------------------------------------------------------------------------- atomic init
def test_a_failed_init_leaves_nothing_installed(ctx, tmp_path, monkeypatch):
    d = ctx.distributed
    mod = write_module(tmp_path, monkeypatch, "ccl_algo_no_kernel", "def kernel_args(*a, **k):\n    return ()\n")
    with pytest.raises(CclConfigError):
        d.init_process_group(config=write_ccl(tmp_path, module=mod))
    assert not d.is_initialized()
    assert linked_pes(ctx) == set()
    with pytest.raises(NotInitializedError):
        d.get_world_size()
    d.init_process_group(config=write_ccl(tmp_path, name="good.yaml"))
    assert d.is_initialized() and d.get_world_size() == 2
    # the all-reduce layout: PE 0 of all 16 cubes of both SIPs
    assert linked_pes(ctx) == {f"sip{s}.cube{c}.pe0.pe_ipcq" for s in range(2) for c in range(16)}


def test_an_init_whose_rings_do_not_fit_leaves_nothing_installed(load_graph):
    ctx = RuntimeContext(load_graph("big_slots"))  # 8 MiB rings: two do not fit in 15 MiB of TCM
    d = ctx.distributed
    with pytest.raises(NeighbourError, match="cannot reserve IPCQ receive rings in tcm"):
        d.init_process_group(config=str(PACKAGED), buffer_kind="tcm")
    assert not d.is_initialized() and linked_pes(ctx) == set()
    d.init_process_group(config=str(PACKAGED), buffer_kind="hbm")
    assert d.is_initialized()
    assert decode(ipcq(ctx, (1, 15, 0)).links["global_E"].rx_base).kind == "hbm"


def test_an_unknown_buffer_kind_fails_init_cleanly(ctx):
    with pytest.raises(KernbenchError, match="dram"):
        ctx.distributed.init_process_group(buffer_kind="dram")
    assert not ctx.distributed.is_initialized() and linked_pes(ctx) == set()


# ---------------------------------------------------------------------------------------------- init twice
def _kinds(ctx) -> set:
    return {decode(lk.rx_base).kind for n in linked_pes(ctx) for lk in ctx.engine.components[n].links.values()}


def test_init_twice_with_the_same_settings_is_a_no_op(ctx):
    d = ctx.distributed
    d.init_process_group(backend="ahbm", buffer_kind="tcm")
    before = {d_: lk.rx_base for d_, lk in ipcq(ctx, (0, 5, 0)).links.items()}
    d.init_process_group(backend="ahbm", buffer_kind="tcm")
    d.init_process_group(backend="ahbm")  # the packaged ccl.yaml's default is tcm as well
    assert {d_: lk.rx_base for d_, lk in ipcq(ctx, (0, 5, 0)).links.items()} == before  # nothing re-reserved
    assert d.get_world_size() == 2


def test_init_with_another_buffer_kind_needs_destroy_first(ctx):
    d = ctx.distributed
    d.init_process_group(buffer_kind="tcm")
    with pytest.raises(CollectiveError, match="destroy_process_group"):
        d.init_process_group(buffer_kind="sram")
    assert d.is_initialized() and _kinds(ctx) == {"tcm"}  # the existing group is untouched
    d.destroy_process_group()
    assert linked_pes(ctx) == set()
    d.init_process_group(buffer_kind="sram")
    assert _kinds(ctx) == {"sram"}
    d.destroy_process_group()
    d.init_process_group(buffer_kind="hbm")
    assert _kinds(ctx) == {"hbm"}


def test_the_buffer_kind_comes_from_ccl_yaml_unless_given(ctx, tmp_path):
    d = ctx.distributed
    d.init_process_group(config=write_ccl(tmp_path, buffer_kind="sram"))
    assert _kinds(ctx) == {"sram"}
    d.destroy_process_group()
    d.init_process_group(config=write_ccl(tmp_path, buffer_kind="sram"), buffer_kind="hbm")
    assert _kinds(ctx) == {"hbm"}


# ---------------------------------------------------------------------------------------------- queries
def test_backend_rank_and_barrier_after_init(ctx):
    d = ctx.distributed
    d.init_process_group()
    assert d.get_backend() == "ahbm"
    assert d.get_rank() == 0
    with pytest.raises(CollectiveError, match=r"barrier: the group has 2 ranks but 1 is running; run the workers "
                                              r"with torch\.multiprocessing\.spawn\(worker, nprocs=2\)"):
        d.barrier()  # a real barrier: one rank alone would wait for ever


def test_a_barrier_of_every_rank_takes_simulated_time(ctx):
    def worker(rank):
        ctx.distributed.init_process_group()
        ctx.distributed.barrier()

    t0 = ctx.now_ns
    ctx.multiprocessing.spawn(worker, nprocs=2)
    assert ctx.now_ns > t0 and len(ctx.distributed.collective_results["barrier"]) == 2


def test_get_rank_inside_spawn_is_the_worker_rank(ctx):
    d = ctx.distributed
    d.init_process_group()
    seen = {}

    def worker(rank):
        seen[rank] = (d.get_rank(), d.get_world_size(), ctx.ahbm.current_device())

    ctx.multiprocessing.spawn(worker, nprocs=2)
    assert seen == {0: (0, 2, 0), 1: (1, 2, 1)}
    assert d.get_rank() == 0


# ---------------------------------------------------------------------------------------------- all_reduce misuse
def test_all_reduce_of_a_multi_rank_group_needs_spawn(ctx):
    d = ctx.distributed
    d.init_process_group()
    t = ctx.zeros((16, 8), "float16", GOOD)
    with pytest.raises(CollectiveError, match=r"torch\.multiprocessing\.spawn\(worker, nprocs=2\)"):
        d.all_reduce(t)


def test_all_reduce_with_fewer_spawned_ranks_than_the_group_is_refused(ctx):
    d = ctx.distributed
    d.init_process_group()

    def worker(rank):
        d.all_reduce(ctx.zeros((16, 8), "float16", GOOD))

    with pytest.raises(CollectiveError, match=r"the group has 2 ranks but 1 (is|are) running") as exc:
        ctx.multiprocessing.spawn(worker, nprocs=1)
    assert any("rank 0" in note for note in exc.value.__notes__)


@pytest.fixture
def solo(default_graph, tmp_path):
    """A data-mode context whose group has one rank (world_size 1 on the 2-SIP topology): no spawn needed."""
    ctx = RuntimeContext(default_graph, data=True)
    ctx.distributed.init_process_group(config=write_ccl(tmp_path, world_size=1))
    assert ctx.distributed.get_world_size() == 1
    return ctx


@pytest.mark.parametrize(("shape", "policy"), [
    ((32, 8), DPPolicy(cube="row_wise", pe="row_wise", num_pes=2)),      # shards on PE 0 and PE 1 of each cube
    ((16, 8), DPPolicy(cube="row_wise", num_pes=1, num_cubes=2)),        # only 2 of 16 cubes
    ((16, 8), DPPolicy(cube="row_wise", num_pes=1, num_cubes=8, cube_start=8)),
    ((17, 8), DPPolicy(cube="row_wise", num_pes=1)),                     # unequal shards (2 rows and 1 row)
    ((16, 8), DPPolicy(cube="replicate", num_cubes=1)),                  # one cube, all 8 PEs
])
def test_all_reduce_refuses_a_tensor_it_cannot_serve(solo, shape, policy):
    t = solo.zeros(shape, "float16", policy)
    with pytest.raises(CollectiveError, match="one equal shard on PE 0 of one cube or of every cube"):
        solo.distributed.all_reduce(t)
    assert solo.distributed.results == []


def test_all_reduce_refuses_a_tensor_on_another_sip(solo):
    solo.ahbm.set_device(1)
    t = solo.zeros((16, 8), "float16", GOOD)
    with pytest.raises(CollectiveError, match="rank 0 passed a tensor on SIP 1"):
        solo.distributed.all_reduce(t)


def test_all_reduce_refuses_a_tensor_of_another_session_before_any_state_changes(solo):
    other = RuntimeContext(solo.graph)
    t = other.zeros((16, 8), "float16", GOOD)
    with pytest.raises(RuntimeApiError, match=f"all_reduce: tensor float16\\[16, 8\\] belongs to session "
                                              f"{other.number} \\(device 0\\), not to session {solo.number}"):
        solo.distributed.all_reduce(t)
    assert solo.distributed.results == [] and solo.distributed._calls == {} and solo.engine.submitted == 0


def test_all_reduce_refuses_a_non_tensor(solo):
    with pytest.raises(CollectiveError, match="ndarray"):
        solo.distributed.all_reduce(np.zeros((16, 8), np.float16))


def test_all_reduce_of_a_good_layout_sums_the_shards(solo):
    # control for the refusals above: 16 shards of rows [c, c + 1] (rows 2c, 2c+1 on cube c)
    x = np.arange(32 * 4, dtype=np.float16).reshape(32, 4) % 5
    t = solo.from_numpy(x, GOOD)
    solo.distributed.all_reduce(t)
    total = x.reshape(16, 2, 4).astype(np.float64).sum(axis=0)
    assert np.array_equal(solo.to_numpy(t), np.tile(total, (16, 1)).astype(np.float16))
    assert len(solo.distributed.results) == 1


def test_all_reduce_of_a_single_cube_tensor_with_one_rank_is_the_identity(solo):
    x = (np.arange(24, dtype=np.float16) % 7).reshape(3, 8)
    t = solo.from_numpy(x, DPPolicy(cube="replicate", num_cubes=1, num_pes=1, cube_start=5))
    solo.distributed.all_reduce(t)
    assert np.array_equal(solo.to_numpy(t), x)


# ---------------------------------------------------------------------------------------------- spawn
@pytest.mark.parametrize("nprocs", [3, 0, -1, True, 1.5])
def test_spawn_needs_one_to_sip_count_ranks(ctx, nprocs):
    ran = []
    with pytest.raises(RuntimeApiError, match=r"nprocs must be 1\.\.2"):
        ctx.multiprocessing.spawn(ran.append, nprocs=nprocs)
    assert ran == []


def test_spawn_join_false_is_refused(ctx):
    with pytest.raises(RuntimeApiError, match="join=False"):
        ctx.multiprocessing.spawn(lambda rank: None, nprocs=2, join=False)


@pytest.mark.parametrize("bad_rank", [0, 1])
def test_a_worker_exception_propagates_with_its_rank(ctx, bad_rank):
    finished = []

    class Boom(Exception):
        pass

    def worker(rank, tag):
        if rank == bad_rank:
            raise Boom(f"{tag} from {rank}")
        ctx.zeros((4, 4), "float16")  # the healthy rank waits for the device, then is stopped
        finished.append(rank)

    with pytest.raises(Boom, match=f"payload from {bad_rank}") as exc:
        ctx.multiprocessing.spawn(worker, args=("payload",), nprocs=2)
    notes = getattr(exc.value, "__notes__", [])
    assert any(f"rank {bad_rank}" in n and "spawn" in n for n in notes), notes
    if bad_rank == 1:
        assert finished == []  # rank 0 was waiting when rank 1 failed: it is stopped, not resumed
    # the launcher is usable again
    assert ctx.multiprocessing.nprocs == 0
    ranks = []
    ctx.multiprocessing.spawn(lambda r: ranks.append((r, ctx.device)), nprocs=2)
    assert ranks == [(0, 0), (1, 1)]


def test_spawn_cannot_be_nested(ctx):
    def worker(rank):
        ctx.multiprocessing.spawn(lambda r: None, nprocs=1)

    with pytest.raises(RuntimeApiError, match="nested"):
        ctx.multiprocessing.spawn(worker, nprocs=1)
