"""Sessions own their tensors and handles (issue 12): a tensor used in another or a closed session is refused
before anything changes, naming both sessions; a closed session refuses new work."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernbench.runtime import DPPolicy, RuntimeApiError, RuntimeContext, session
from kernbench.topology import compile_spec, spec_from_dict

ONE = DPPolicy(num_cubes=1, num_pes=1)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _copy(kernel_tl, src, dst):
    kernel_tl.store(dst, kernel_tl.load(src))


def _state(ctx: RuntimeContext) -> tuple:
    """Everything a refused call must leave alone: clock, requests, live tensors, allocators, memory bytes."""
    allocs = {k: (repr(a.hbm.free_blocks) if hasattr(a.hbm, "free_blocks") else repr(vars(a)))
              for k, a in ctx._alloc.items()}
    memory = list(ctx.engine.memory.pages()) if ctx.engine.memory is not None else None
    return ctx.now_ns, ctx.engine.submitted, len(ctx.oplog), [id(t) for t in ctx._tensors], allocs, \
        [(b, bytes(r)) for b, r in memory or ()]


def _two_sessions(graph):
    s1, s2 = RuntimeContext(graph, data=True), RuntimeContext(graph, data=True)
    a1 = s1.from_numpy(np.full((8, 64), 1, np.float16), ONE)
    b2 = s2.from_numpy(np.full((8, 64), 2, np.float16), ONE)
    # The two tensors sit at the very same addresses in their own sessions: the old bug's precondition.
    assert [a for _, a in a1.shards] == [a for _, a in b2.shards]
    return s1, s2, a1, b2


def test_launch_with_a_tensor_of_another_session_is_refused_before_anything_changes(graph):
    s1, s2, a1, b2 = _two_sessions(graph)
    out = s2.empty((8, 64), "float16", ONE)
    before = _state(s2)
    with pytest.raises(RuntimeApiError) as info:
        s2.launch("copy", _copy, a1, out)
    msg = str(info.value)
    assert msg == (f"launch 'copy': tensor float16[8, 64] belongs to {s1.name}, not to {s2.name}; use a tensor in "
                   f"the session that created it (copy it with to_numpy / from_numpy)")
    assert _state(s2) == before
    np.testing.assert_array_equal(s2.to_numpy(b2), np.full((8, 64), 2, np.float16))


def _add(kernel_tl, x, y, dst):
    kernel_tl.store(dst, kernel_tl.load(x) + kernel_tl.load(y))


def _add_scaled(kernel_tl, x, scale, y, dst):
    kernel_tl.store(dst, kernel_tl.load(x) + kernel_tl.load(y))


def _refused_launch(ctx: RuntimeContext, fn, *args) -> str:
    """The message of a launch that must be refused before anything is submitted or changed."""
    before, launches = _state(ctx), list(ctx._launches)
    with pytest.raises(RuntimeApiError) as info:
        ctx.launch("add", fn, *args)
    assert _state(ctx) == before and ctx._launches == launches
    return str(info.value)


@pytest.mark.parametrize("position", [1, 2])
def test_launch_checks_every_tensor_argument_not_only_the_first(graph, position):
    s1, s2, a1, b2 = _two_sessions(graph)
    out = s2.empty((8, 64), "float16", ONE)
    args = [b2, b2, out]
    args[position] = a1  # a1 sits at b2's very addresses, so only the ownership check can tell them apart
    msg = _refused_launch(s2, _add, *args)
    assert msg == (f"launch 'add': tensor float16[8, 64] belongs to {s1.name}, not to {s2.name}; use a tensor in "
                   f"the session that created it (copy it with to_numpy / from_numpy)")
    # The same launch with the session's own tensors runs: the refusal was about ownership alone.
    s2.wait(s2.launch("add", _add, b2, b2, out))
    np.testing.assert_array_equal(s2.to_numpy(out), np.full((8, 64), 4, np.float16))


def test_launch_checks_a_tensor_after_a_plain_argument(graph):
    s1, s2, a1, b2 = _two_sessions(graph)
    msg = _refused_launch(s2, _add_scaled, b2, 2.0, b2, a1)  # the foreign tensor is the 4th argument
    assert msg.startswith(f"launch 'add': tensor float16[8, 64] belongs to {s1.name}, not to {s2.name};")


@pytest.mark.parametrize("position", [1, 2])
def test_launch_with_a_freed_tensor_in_a_later_position_is_refused(graph, position):
    ctx = RuntimeContext(graph, data=True)
    x = ctx.from_numpy(np.full((8, 64), 3, np.float16), ONE)
    gone = ctx.from_numpy(np.full((8, 64), 5, np.float16), ONE)
    out = ctx.empty((8, 64), "float16", ONE)
    ctx.free(gone)
    args = [x, x, out]
    args[position] = gone
    assert _refused_launch(ctx, _add, *args) == "launch 'add': tensor float16[8, 64] was freed; create it again"


def test_free_of_another_sessions_tensor_frees_nothing(graph):
    s1, s2, a1, b2 = _two_sessions(graph)
    before = _state(s2)
    with pytest.raises(RuntimeApiError, match=re.escape(f"free: tensor float16[8, 64] belongs to {s1.name}, "
                                                        f"not to {s2.name};")):
        s2.free(a1)
    assert _state(s2) == before and not a1.freed
    # b2's block is still allocated: a new tensor does not land on it and b2 keeps its values.
    c2 = s2.from_numpy(np.full((8, 64), 7, np.float16), ONE)
    assert [a for _, a in c2.shards] != [a for _, a in b2.shards]
    np.testing.assert_array_equal(s2.to_numpy(b2), np.full((8, 64), 2, np.float16))


def test_to_numpy_and_peek_of_another_sessions_tensor(graph):
    s1, s2, a1, _ = _two_sessions(graph)
    for call in (s2.to_numpy, s2.peek):
        with pytest.raises(RuntimeApiError, match=re.escape(f"belongs to {s1.name}, not to {s2.name};")):
            call(a1)


def test_wait_on_a_handle_of_another_session(graph):
    s1, s2, a1, _ = _two_sessions(graph)
    out = s1.empty((8, 64), "float16", ONE)
    handle = s1.launch("copy", _copy, a1, out)
    want = f"wait: launch 'copy' belongs to {s1.name}, not to {s2.name};"
    with pytest.raises(RuntimeApiError, match=re.escape(want)):
        s2.wait(handle)
    s1.wait(handle)
    np.testing.assert_array_equal(s1.to_numpy(out), np.full((8, 64), 1, np.float16))


def test_a_closed_session_refuses_new_work(graph):
    with session(graph) as torch:
        t = torch.zeros((4, 64), "float16", ONE)
        name = torch.name
    assert torch.closed and t.freed and not torch._tensors
    calls = {
        "empty": lambda: torch.empty((4, 64)),
        "from_numpy": lambda: torch.from_numpy(np.zeros((4, 64), np.float16)),
        "zeros": lambda: torch.zeros((4, 64)),
        "launch 'copy'": lambda: torch.launch("copy", _copy, t, t),
        "wait_all": torch.wait_all,
        "reserve": lambda: torch.reserve("tcm", 0, 0, 0, 256),
    }
    clock = torch.now_ns
    for use, call in calls.items():
        with pytest.raises(RuntimeApiError) as info:
            call()
        assert str(info.value) == (f"{use}: {name} is closed (its `with session(...)` block has ended); do the work "
                                   f"inside the block, or open a new session")
    assert torch.now_ns == clock and torch.engine.submitted > 0


def test_close_is_idempotent_and_named(graph):
    ctx = RuntimeContext(graph)
    assert repr(ctx) == f"<RuntimeContext session {ctx.number} (device 0)>"
    ctx.close()
    ctx.close()
    assert repr(ctx).endswith("(closed)>")


@pytest.mark.parametrize("shape, fragment", [((), "shape () is invalid"), ((0, 4), "shape (0, 4) is invalid"),
                                             ((-1,), "shape (-1,) is invalid"), ((2.5, 4), "shape (2.5, 4)"),
                                             ("ab", "shape 'ab' is invalid"), (None, "shape None is not a shape")])
def test_bad_shapes(graph, shape, fragment):
    ctx = RuntimeContext(graph)
    with pytest.raises(RuntimeApiError, match=re.escape(fragment)):
        ctx.empty(shape)
    assert ctx.engine.submitted == 0


def test_zero_d_array_is_refused_not_reshaped(graph):
    ctx = RuntimeContext(graph, data=True)
    with pytest.raises(RuntimeApiError, match=r"a 0-d array has no shape to place; pass array\.reshape\(1\)"):
        ctx.from_numpy(np.float16(3.0))
    assert ctx.engine.submitted == 0


def test_zeros_beyond_the_device_fails_before_allocating_host_memory(graph):
    ctx = RuntimeContext(graph, data=True)
    with pytest.raises(Exception) as info:  # AllocationError: 4 PB never reaches numpy
        ctx.zeros((1 << 25, 1 << 25), "float32", ONE)
    assert type(info.value).__name__ == "AllocationError" and ctx.engine.submitted == 0


def test_zeros_writes_zeros_with_the_same_timing_as_from_numpy(graph):
    a, b = RuntimeContext(graph, data=True), RuntimeContext(graph, data=True)
    ta = a.zeros((16, 128), "float16", DPPolicy(num_cubes=2, num_pes=2))
    tb = b.from_numpy(np.zeros((16, 128), np.float16), DPPolicy(num_cubes=2, num_pes=2))
    assert a.now_ns == b.now_ns and a.engine.events == b.engine.events
    np.testing.assert_array_equal(a.to_numpy(ta), b.to_numpy(tb))
