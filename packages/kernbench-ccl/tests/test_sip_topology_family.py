"""A new SIP topology family is one module plus its registration: nothing else changes.

The module below is written to a temporary folder, as a user's would be: it
registers a 2-D mesh that wraps around along its rows only. With it imported,
a topology naming it loads and compiles, the collectives build its neighbour
table, and the ahbm all-reduce gives every rank the exact sum over it. Without
it, the name is refused and the error lists the registered families.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401
from kernbench.ccl.neighbours import NeighbourError, inter_sip, intercube_multisip, sip_grid
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology import SpecError, compile_spec, spec_from_dict
from kernbench.topology import naming as nm
from kernbench.topology.sip_topologies import get_sip_topology, sip_topology_names, unregister_sip_topology

NAME = "mesh_2d_row_wrap"
FAMILY = f'''
"""{NAME}: SIPs on the grid, E/W wrapping around along each row, N/S not along columns."""

from kernbench.topology.sip_topologies import SipTopology, register_sip_topology

ROW_WRAP = register_sip_topology(SipTopology({NAME!r}, "rows", 7, wrap_rows=True, wrap_cols=False))
'''
SYSTEM = {"sips": {"count": 6, "topology": NAME, "grid": [2, 3]}}
SMALL = {"system": SYSTEM, "sip": {"cube_mesh": {"w": 2, "h": 1}}}


@pytest.fixture
def family(tmp_path, monkeypatch):
    """Import the family's module from a temporary folder; forget the family afterwards."""
    (tmp_path / "kb_row_wrap_family.py").write_text(textwrap.dedent(FAMILY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kb_row_wrap_family", raising=False)
    import kb_row_wrap_family

    yield kb_row_wrap_family.ROW_WRAP
    unregister_sip_topology(NAME)


def test_an_unregistered_family_is_refused_with_the_registered_names():
    assert NAME not in sip_topology_names()
    with pytest.raises(SpecError) as exc:
        spec_from_dict({"system": SYSTEM})
    msg = str(exc.value)
    assert "system.sips.topology" in msg and all(repr(n) in msg for n in sip_topology_names())
    with pytest.raises(NeighbourError, match="registered: ring_1d, torus_2d, mesh_2d_no_wrap"):
        sip_grid(spec_from_dict({}), 2, NAME)


def test_a_registered_family_compiles_and_gives_its_neighbour_table(family):
    assert get_sip_topology(NAME) is family and NAME in sip_topology_names()
    spec = spec_from_dict(SMALL)
    graph = compile_spec(spec)
    assert {f"sip{s}" for s in range(6)} <= {n.split(".")[0] for n in graph.nodes}
    # laid out on the 2x3 grid: SIP 4 one row below SIP 1
    (x1, y1), (x4, y4) = ((graph.nodes[nm.io_noc(s)].x_mm, graph.nodes[nm.io_noc(s)].y_mm) for s in (1, 4))
    assert x1 == x4 and y4 > y1
    table = inter_sip(spec, 6, NAME, cube=0)
    peers = {r: {d: p[0] for d, p in table[(r, 0, 0)].items()} for r in range(6)}
    assert peers[0] == {"global_E": 1, "global_W": 2, "global_S": 3}  # the row wraps, the column does not
    assert peers[5] == {"global_E": 3, "global_W": 4, "global_N": 2}
    assert set(intercube_multisip(spec, 6, NAME)) == {(s, c, 0) for s in range(6) for c in range(2)}
    with pytest.raises(SpecError, match="make rows\\*cols equal the count"):
        spec_from_dict({"system": {"sips": {**SYSTEM["sips"], "grid": [3, 3]}}})


def test_the_all_reduce_runs_over_a_registered_family(family):
    torch = RuntimeContext(compile_spec(spec_from_dict(SMALL)), data=True)
    shards = DPPolicy(cube="row_wise", num_pes=1)
    out = {}

    def values(rank):
        return ((np.arange(2 * 8).reshape(2, 8) + 3 * rank) % 7).astype(np.float16)

    def worker(rank):
        torch.distributed.init_process_group(backend="ahbm")
        t = torch.from_numpy(values(rank), shards)
        torch.distributed.all_reduce(t)
        out[rank] = torch.to_numpy(t)

    torch.multiprocessing.spawn(worker, nprocs=6)
    total = sum(values(r).astype(np.float64).sum(axis=0) for r in range(6))
    assert sorted(out) == list(range(6))
    assert all((got.astype(np.float64) == total).all() for got in out.values())
