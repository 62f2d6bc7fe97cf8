"""Behaviour the mutation run (tests/mutation/mutate.py) found untested in kernbench-ccl.

The inter-SIP exchange of the hierarchical all-reduce streams each rank's vector both ways round a ring of ``n``
ranks: east for ``ceil((n - 1) / 2)`` steps and west for ``floor((n - 1) / 2)`` (the algorithm's module
docstring). On an even ring the rank opposite is reached either way with the very same vector, so the sums (and
their bits) cannot tell the two directions apart; the messages each rank sends in each direction can.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from kernbench.runtime import DPPolicy, RuntimeContext

ONE_CUBE = DPPolicy(num_cubes=1, num_pes=1)


def _global_sends(graph, n_elem: int = 64) -> Counter:
    """``{(sip, direction): messages}`` of every ``global_*`` IPCQ send of one all-reduce of a one-cube tensor."""
    torch = RuntimeContext(graph)
    world = graph.spec.system.sips.count

    def worker(rank: int) -> None:
        torch.distributed.init_process_group(backend="ahbm")
        t = torch.from_numpy(np.zeros((1, n_elem), np.float16), ONE_CUBE)
        torch.distributed.all_reduce(t)
        torch.distributed.destroy_process_group()

    torch.multiprocessing.spawn(worker, nprocs=world)
    sends = Counter()
    for rec in torch.oplog.records:
        if rec.op_name == "ipcq_send" and rec.params["dir"].startswith("global_"):
            sends[(int(rec.component_id.split(".")[0].removeprefix("sip")), rec.params["dir"])] += 1
    return sends


@pytest.mark.parametrize(("topo", "east", "west"), [("6sip_2x3_ring_1d", 3, 2), ("topology", 1, 0)])
def test_the_ring_exchange_streams_the_longer_half_eastwards(load_graph, topo, east, west):
    """Six ranks: 3 messages east and 2 west from every rank (5 = 3 + 2 other ranks); two ranks: 1 east, 0 west."""
    graph = load_graph(topo)
    sends = _global_sends(graph)
    world = graph.spec.system.sips.count
    want = Counter({(r, "global_E"): east for r in range(world)})
    want.update({(r, "global_W"): west for r in range(world) if west})
    assert sends == want
