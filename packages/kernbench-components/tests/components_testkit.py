"""Helpers shared by the kernel-level component tests: deploy arrays on PE 0 and launch a kernel there."""

from __future__ import annotations

from kernbench.components import default_registry
from kernbench.components.launch import KernelLaunchMsg
from kernbench.sim import GraphEngine, MemoryWriteMsg
from kernbench.tl import TensorArg
from kernbench.topology import AddressResolver


def deploy(graph, arrays, data: bool = True):
    """A fresh engine with ``arrays`` written into PE 0's HBM slice (4 KiB aligned); returns (engine, TensorArgs)."""
    eng = GraphEngine(graph, default_registry(), data=data)
    res = AddressResolver(graph)
    args, off = [], 0
    for arr in arrays:
        addr = res.hbm_addr(0, 0, 0, off)
        off += -(-arr.nbytes // 4096) * 4096
        eng.submit(MemoryWriteMsg(addr, arr.nbytes, arr.tobytes() if data else None))
        args.append(TensorArg(addr, arr.shape, str(arr.dtype)))
    eng.run()
    return eng, args


def launch_on_pe0(eng, fn, args):
    """Launch ``fn(tl, *args)`` on sip0.cube0.pe0, run to completion, return the request."""
    req = eng.submit(KernelLaunchMsg("k", fn, (((0, 0, 0), tuple(args)),)))
    eng.run()
    return req
