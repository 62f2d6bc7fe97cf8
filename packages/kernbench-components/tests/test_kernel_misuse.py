"""Kernel-language misuse that used to pass silently (round 2 of issue 12): a negative shape, a block slice past
the tensor (clamped to a smaller block before), a scratch scope entered twice or never. Each is a TLError naming
what and how to fix it, checked in command-list mode (``tl.record``) and on a simulated PE."""

from __future__ import annotations

import numpy as np
import pytest
from components_testkit import deploy, launch_on_pe0

from kernbench.components import KernelError
from kernbench.tl import TensorArg, TLError, record
from kernbench.topology import AddressResolver, compile_spec, spec_from_dict


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


@pytest.fixture(scope="module")
def arg(graph):
    return TensorArg(AddressResolver(graph).hbm_addr(0, 0, 0), (8, 64), "float16")


def _recorded_error(graph, kernel, *args) -> str:
    with pytest.raises(TLError) as info:
        record(kernel, *args, spec=graph.spec)
    return str(info.value)


# ---------------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("call", ["full", "zeros"])
@pytest.mark.parametrize("shape", [(-8, 64), (0, 64), (8, 0), (), (8.0, 64), (True, 64)])
def test_a_shape_with_a_size_below_one_is_refused(graph, call, shape):
    def kernel(tl):
        tl.full(shape, 1.0) if call == "full" else tl.zeros(shape)

    assert _recorded_error(graph, kernel) == (f"tl.{call}: shape {shape!r} is invalid; every size must be a positive "
                                              f"integer, e.g. (8, 64)")


def test_a_negative_shape_fails_the_kernel_on_a_pe(graph):
    """``tl.full((-8, 64))`` filled nothing in timing mode and raised numpy's ValueError out of the engine in data
    mode; both now fail the kernel before a command is issued."""
    for data in (False, True):
        eng, _ = deploy(graph, [], data=data)
        req = launch_on_pe0(eng, lambda tl: tl.full((-8, 64), 1.0), ())
        assert isinstance(req.error, KernelError)
        assert str(req.error) == ("kernel 'k' failed on sip0.cube0.pe0: TLError: tl.full: shape (-8, 64) is invalid; "
                                  "every size must be a positive integer, e.g. (8, 64)")
        assert not [r for r in eng.oplog.records if r.op_name == "fill"]


def test_the_smallest_shapes_are_accepted(graph):
    def kernel(tl):
        assert tl.full((1, 1), 2.0).shape == (1, 1)
        assert tl.zeros(1).shape == (1,)  # an int is a 1-d shape
        assert tl.full((np.int64(8), 64), 0.5).shape == (8, 64)

    record(kernel, spec=graph.spec)


def test_recv_and_broadcast_check_their_shapes_too(graph):
    assert _recorded_error(graph, lambda tl: tl.recv("E", (-4, 4))) == (
        "tl.recv: shape (-4, 4) is invalid; every size must be a positive integer, e.g. (8, 64)")
    assert _recorded_error(graph, lambda tl: tl.broadcast(tl.zeros((1, 4)), (0, 4))) == (
        "tl.broadcast: shape (0, 4) is invalid; every size must be a positive integer, e.g. (8, 64)")


# ---------------------------------------------------------------------------------------------- block slices
@pytest.mark.parametrize(("rows", "cols", "shape"), [
    (slice(0, 8), slice(0, 64), (8, 64)),      # the whole tensor: stop = size is the last valid bound
    (slice(7, 8), slice(63, 64), (1, 1)),      # the last row and column
    (slice(-8, None), slice(-64, 4), (8, 4)),  # negative bounds count from the end, down to -size
    (slice(None, None), slice(60, None), (8, 4)),
])
def test_slices_within_the_tensor(graph, arg, rows, cols, shape):
    seen = []
    record(lambda tl, a: seen.append(tl.ref(a)[rows, cols].shape), arg, spec=graph.spec)
    assert seen == [shape]


@pytest.mark.parametrize(("rows", "cols", "message"), [
    (slice(0, 1000), slice(60, 200), "block [0:1000, 60:200] is out of range for a tensor of shape (8, 64): rows "
                                     "0:1000 reach past its 8 rows; slice within the shape"),
    (slice(0, 9), slice(0, 64), "block [0:9, 0:64] is out of range for a tensor of shape (8, 64): rows 0:9 reach "
                                "past its 8 rows; slice within the shape"),
    (slice(0, 8), slice(0, 65), "block [0:8, 0:65] is out of range for a tensor of shape (8, 64): columns 0:65 "
                                "reach past its 64 columns; slice within the shape"),
    (slice(-9, None), slice(None, None), "block [-9:, :] is out of range for a tensor of shape (8, 64): rows -9: "
                                         "reach past its 8 rows; slice within the shape"),
    (slice(9, None), slice(None, None), "block [9:, :] is out of range for a tensor of shape (8, 64): rows 9: reach "
                                        "past its 8 rows; slice within the shape"),
])
def test_a_slice_past_the_tensor_is_refused_not_clamped(graph, arg, rows, cols, message):
    assert _recorded_error(graph, lambda tl, a: tl.ref(a)[rows, cols], arg) == message


def test_an_out_of_range_slice_fails_the_kernel_on_a_pe(graph):
    eng, args = deploy(graph, [np.ones((8, 64), np.float16)])
    req = launch_on_pe0(eng, lambda tl, a: tl.load(tl.ref(a)[0:1000, 60:200]), args)
    assert isinstance(req.error, KernelError)
    assert str(req.error).endswith("TLError: block [0:1000, 60:200] is out of range for a tensor of shape (8, 64): "
                                   "rows 0:1000 reach past its 8 rows; slice within the shape")
    assert not [r for r in eng.oplog.records if r.op_name == "dma_read"]  # nothing was read


# ---------------------------------------------------------------------------------------------- scratch scopes
def test_a_scratch_scope_entered_twice_is_refused(graph):
    def kernel(tl):
        scope = tl.scratch_scope()
        with scope:
            tl.zeros((16,))
        with scope:
            tl.zeros((16,))

    assert _recorded_error(graph, kernel) == (
        "tl.scratch_scope(): this scope was already entered; a scope serves one `with` block, so write "
        "`with tl.scratch_scope():` at each place (a loop body gets a fresh one each time)")


def test_a_scratch_scope_never_entered_is_reported_when_the_kernel_ends(graph):
    def kernel(tl):
        tl.scratch_scope()  # the call alone opens nothing
        tl.zeros((16,))

    line = kernel.__code__.co_firstlineno + 1
    assert _recorded_error(graph, kernel) == (
        f"tl.scratch_scope() at test_kernel_misuse.py:{line} was never entered, so it released nothing; write "
        f"`with tl.scratch_scope():` around the work whose scratch it should release")


def test_scopes_closed_out_of_order_are_refused(graph):
    def kernel(tl):
        outer, inner = tl.scratch_scope(), tl.scratch_scope()
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)

    assert _recorded_error(graph, kernel) == ("tl.scratch_scope(): scopes must close innermost first; nest the `with` "
                                              "blocks")


def test_a_scope_made_and_entered_later_is_fine(graph):
    marks = []

    def kernel(tl):
        scope = tl.scratch_scope()
        tl.zeros((16,))
        with scope:
            tl.zeros((16,))
            marks.append(tl.scratch_used)
        marks.append(tl.scratch_used)

    record(kernel, spec=graph.spec)
    assert marks == [128, 64]
