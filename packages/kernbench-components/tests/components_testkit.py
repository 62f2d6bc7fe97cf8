"""Helpers shared by the component tests: deploy arrays on PE 0 and launch a kernel there; a stand-in engine for
an HBM controller served on its own."""

from __future__ import annotations

from types import SimpleNamespace

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


#: HBM slice geometries the controller tests run in: (flit_bytes, burst_bytes, channels, packet_bytes,
#: channel_bw_gbs): the default slice, the flow-service tests' one, a small one, flits wider than a burst, and
#: flits that straddle burst boundaries.
HBM_GEOMETRIES = [
    (256, 256, 8, 4096, 16.0),
    (32, 256, 8, 4096, 16.0),
    (32, 64, 2, 256, 4.0),
    (64, 32, 2, 512, 3.0),
    (48, 256, 4, 480, 7.0),
]

#: The reply link of every stand-in HBM controller: a flit takes flit_bytes / 256 ns on it.
LINK_GBS = 256.0


class HbmEngine:
    """What ``HbmCtrl`` reads of an engine when it serves a read: sizes, the reply link, and where the reply
    (``replies``) and the op-log row (``rows``) go."""

    def __init__(self, fidelity: str, flit: int, packet: int) -> None:
        self.graph = SimpleNamespace(out_edges=lambda node_id: (SimpleNamespace(bw_gbs=LINK_GBS),))
        self.fidelity = fidelity
        self.flit_bytes = flit
        self.packet_bytes = packet
        self.replies: list = []
        self.rows: list = []
        self.oplog = SimpleNamespace(record=lambda *row: self.rows.append(row))

    def read_reply(self, cmd, ready):
        self.replies.append(ready)


def read_cmd(addr: int, nbytes: int, row_bytes: int = 0, pitch: int = 0):
    """A stand-in read command for ``HbmCtrl._read``: ``nbytes`` from ``addr``, 2-D when ``row_bytes`` is given."""
    return SimpleNamespace(addr=addr, read_nbytes=nbytes, row_bytes=row_bytes, pitch=pitch,
                           request=SimpleNamespace(corr_id=1))
