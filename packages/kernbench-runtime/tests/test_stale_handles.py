"""Kernel arguments die with their tensor and stay in their session (round 2 of issue 12): a kernel that kept a
``TensorArg`` past ``torch.free`` used to write into the tensor that took over the memory, and one carried into a
kernel of another session read that session's data. Now every ``tl`` call on a tensor argument checks its lease,
the launch fails naming the tensor and the session, and nothing is written."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernbench.components import KernelError
from kernbench.runtime import DPPolicy, RuntimeContext, session
from kernbench.tl import TensorArg
from kernbench.topology import compile_spec, spec_from_dict

ONE = DPPolicy(num_cubes=1, num_pes=1)
ONES = np.full((8, 64), 1, np.float16)


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict({}))


def _keeper(kept: list):
    """A kernel that keeps its tensor argument for later kernels (the misuse)."""
    def keep(tl, a):
        kept.append(a)
    return keep


def _scribble(kept: list, how: str):
    """A kernel that writes 7.0 through a kept argument (``how``: the tl call that takes it)."""
    def scribble(tl, anchor):
        seven = tl.full((8, 64), 7.0, "float16")
        if how == "store":
            tl.store(kept[0], seven)
        elif how == "load":
            tl.store(anchor, tl.load(kept[0]))
        elif how == "ref":
            tl.store(tl.ref(kept[0]), seven)
        elif how == "global_ref":
            tl.store(tl.global_ref(kept[0]), seven)
        else:
            tl.composite("copy", seven, kept[0])
    return scribble


def _freed_then_reused(torch: RuntimeContext) -> tuple[list, object]:
    """``a`` deployed, its argument kept by a kernel, ``a`` freed, and ``b`` (all ones) placed on a's memory."""
    kept: list = []
    a = torch.from_numpy(ONES, ONE)
    torch.wait(torch.launch("keep", _keeper(kept), a))
    torch.free(a)
    b = torch.from_numpy(ONES, ONE)
    # The old bug's precondition: the kept argument addresses b's bytes exactly.
    assert kept[0].addr == b.shards[0][1] and kept[0].va == b.va
    return kept, b


@pytest.mark.parametrize("how", ["store", "load", "ref", "global_ref", "composite"])
def test_a_kept_argument_of_a_freed_tensor_fails_the_kernel_and_writes_nothing(graph, how):
    with session(graph, data=True) as torch:
        kept, b = _freed_then_reused(torch)
        with pytest.raises(KernelError) as info:
            torch.wait(torch.launch("scribble", _scribble(kept, how), b))
        op = "composite" if how == "composite" else how
        assert str(info.value) == (
            f"kernel 'scribble' failed on sip0.cube0.pe0: TLError: tl.{op}: tensor argument float16[8, 64] of "
            f"{torch.name} was freed, so its memory may now hold another tensor; pass a live tensor as a launch "
            f"argument instead of one kept from an earlier kernel")
        np.testing.assert_array_equal(torch.peek(b), ONES)  # b: still 1.0, not 7.0
        # The session goes on: a kernel given the live tensor writes b.
        torch.wait(torch.launch("write", _write_b, b))
        np.testing.assert_array_equal(torch.peek(b), np.full((8, 64), 7, np.float16))


def _write_b(tl, b):
    tl.store(b, tl.full((8, 64), 7.0, "float16"))


def test_an_argument_kept_from_another_session_is_refused_and_reads_nothing(graph):
    s1, s2 = RuntimeContext(graph, data=True), RuntimeContext(graph, data=True)
    kept: list = []
    a1 = s1.from_numpy(ONES, ONE)
    s1.wait(s1.launch("keep", _keeper(kept), a1))
    b2 = s2.from_numpy(np.full((8, 64), 2, np.float16), ONE)
    assert kept[0].addr == b2.shards[0][1]  # the same addresses, in another session's memory
    with pytest.raises(KernelError) as info:
        s2.wait(s2.launch("copy", _scribble(kept, "load"), b2))
    assert str(info.value) == (
        f"kernel 'copy' failed on sip0.cube0.pe0: TLError: tl.load: tensor argument float16[8, 64] belongs to "
        f"{s1.name}, but this kernel runs in {s2.name}; pass this session's tensors as launch arguments (an argument "
        f"kept from a kernel of another session addresses that session's memory)")
    np.testing.assert_array_equal(s2.peek(b2), np.full((8, 64), 2, np.float16))


def test_an_argument_of_a_closed_session_is_refused_in_the_next_one(graph):
    kept: list = []
    with session(graph, data=True) as s1:
        s1.wait(s1.launch("keep", _keeper(kept), s1.from_numpy(ONES, ONE)))
    assert kept[0].lease.gone == "was freed when its session closed"
    with session(graph, data=True) as s2:
        b2 = s2.from_numpy(np.full((8, 64), 2, np.float16), ONE)
        with pytest.raises(KernelError, match=re.escape(f"tensor argument float16[8, 64] belongs to {s1.name}, but "
                                                        f"this kernel runs in {s2.name};")):
            s2.wait(s2.launch("scribble", _scribble(kept, "store"), b2))
        np.testing.assert_array_equal(s2.peek(b2), np.full((8, 64), 2, np.float16))


def test_a_live_argument_and_a_hand_made_one_pass_the_check(graph):
    """The lease is per tensor and shared by its arguments; arguments built by hand (no lease) are not checked."""
    with session(graph, data=True) as torch:
        a = torch.from_numpy(ONES, ONE)
        kept: list = []
        torch.wait(torch.launch("keep", _keeper(kept), a))
        torch.wait(torch.launch("keep", _keeper(kept), a))
        assert kept[0].lease is kept[1].lease is a.lease and kept[0].lease.gone is None
        k = kept[0]
        bare = TensorArg(k.addr, k.shape, k.dtype, k.va, k.tensor_va, k.tensor_shape)
        assert bare.lease is None and bare == k  # the lease takes no part in equality
        torch.wait(torch.launch("scribble", _scribble([bare], "store"), a))
        np.testing.assert_array_equal(torch.peek(a), np.full((8, 64), 7, np.float16))


def _hold(how: str):
    """A kernel that takes a reference to ``a`` (``how``: ``ref``, ``block`` or ``global_ref``), waits 50,000
    cycles, then copies what the reference names into ``out``."""
    def hold(tl, a, out):
        if how == "ref":
            r = tl.ref(a)
        elif how == "block":
            r = tl.ref(a)[0:8, 0:64]
        else:
            r = tl.global_ref(a)[0:8, 0:64]
        tl.cycles(50_000)
        tl.store(tl.ref(out)[0:8, 0:64], tl.load(r))
    return hold


def _quick(tl, x):
    tl.cycles(10)


@pytest.mark.parametrize("how", ["ref", "block", "global_ref"])
def test_a_reference_made_before_the_host_frees_its_tensor_dies_with_it(graph, how):
    """The host frees ``a`` while a kernel holding ``tl.ref(a)`` is still running (it waits for a shorter launch
    first) and puts ``b`` (all 3s) on a's memory: the reference is refused at its next use, and nothing of b
    reaches ``out`` (the copy used to read b's 3s)."""
    two = DPPolicy(num_cubes=2, num_pes=1)
    with session(graph, data=True) as torch:
        x = torch.from_numpy(np.zeros((8, 64), np.float16), ONE)
        a = torch.from_numpy(np.ones((16, 64), np.float16), two)
        out = torch.from_numpy(np.zeros((16, 64), np.float16), two)
        short = torch.launch("quick", _quick, x)
        running = torch.launch("hold", _hold(how), a, out)
        torch.wait(short)
        a_addrs = [addr for _, addr in a.shards]
        torch.free(a)
        b = torch.from_numpy(np.full((16, 64), 3, np.float16), two)
        assert [addr for _, addr in b.shards] == a_addrs  # b now holds a's bytes
        with pytest.raises(KernelError) as info:
            torch.wait(running)
        assert ("a reference into tensor argument float16[16, 64], which was freed while the kernel ran, so its "
                "memory may now hold another tensor; free a tensor only after the kernels using it have finished "
                "(torch.wait)") in str(info.value)
        np.testing.assert_array_equal(torch.peek(out), np.zeros((16, 64), np.float16))
