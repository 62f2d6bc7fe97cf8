"""``torch.install_ipcq(algorithm=..., ccl_yaml=...)``, the earlier simulator's spelling: it installs exactly the
neighbour table (and ring kind) the configured algorithm's process group installs, and nothing half-done on error."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.ccl  # noqa: F401  (the runtime extensions)
from kernbench.ccl import CclConfigError
from kernbench.ccl.neighbours import intercube_multisip, sip_strategy
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology import compile_spec, spec_from_dict

SMALL = {"system": {"sips": {"count": 2}}, "sip": {"cube_mesh": {"w": 2, "h": 1}}}


@pytest.fixture(scope="module")
def graph():
    return compile_spec(spec_from_dict(SMALL))


def test_the_algorithm_spelling_installs_what_the_process_group_installs(graph, tmp_path):
    spec = graph.spec
    by_name = RuntimeContext(graph).install_ipcq(algorithm="lrab_hierarchical_allreduce")
    assert by_name.table == intercube_multisip(spec, 2, sip_strategy(spec.system.sips.topology))
    assert by_name.buffer_kind == "tcm" and by_name.rings
    grouped = RuntimeContext(graph)
    grouped.distributed.init_process_group(backend="ahbm")
    assert grouped.distributed._group.installation.table == by_name.table
    # the ring kind comes from the ccl.yaml given
    cfg = tmp_path / "ccl.yaml"
    cfg.write_text("collectives: {all_reduce: {algorithm: lrab_hierarchical_allreduce, buffer_kind: sram}}\n"
                   "algorithms: {lrab_hierarchical_allreduce: "
                   "{module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce}}\n")
    in_sram = RuntimeContext(graph).install_ipcq(ccl_yaml=str(cfg))
    assert in_sram.buffer_kind == "sram" and in_sram.table == by_name.table
    assert {kind for kind, _, _ in in_sram.rings} == {"sram"}


def test_a_kernel_sends_over_the_installed_table(graph):
    torch = RuntimeContext(graph, data=True)
    torch.install_ipcq(algorithm="lrab_hierarchical_allreduce")
    t = torch.from_numpy(np.arange(2 * 64, dtype=np.float16).reshape(2, 64), DPPolicy(cube="row_wise", num_pes=1))

    def shift(tl, x):  # cube 0 sends its row east; cube 1 adds it to its own
        if tl.pe[1] == 0:
            tl.send("E", tl.load(x))
        else:
            tl.store(x, tl.load(x) + tl.recv("W", (1, 64), "float16"))

    torch.wait(torch.launch("shift", shift, t))
    rows = np.arange(2 * 64, dtype=np.float16).reshape(2, 64)
    np.testing.assert_array_equal(torch.to_numpy(t), np.stack([rows[0], rows[0] + rows[1]]))


def test_wrong_use_is_one_line_and_installs_nothing(graph):
    torch = RuntimeContext(graph)
    table = {(0, 0, 0): {"E": (0, 1, 0)}, (0, 1, 0): {"W": (0, 0, 0)}}
    with pytest.raises(CclConfigError, match="give a neighbour table, or algorithm=/ccl_yaml=, not both"):
        torch.install_ipcq(table, algorithm="lrab_hierarchical_allreduce")
    with pytest.raises(CclConfigError, match="nosuch"):
        torch.install_ipcq(algorithm="nosuch")
    assert torch.install_ipcq(table).table == table  # nothing was left installed by the refused calls
