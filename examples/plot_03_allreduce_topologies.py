"""
All-reduce by SIP topology
==========================

The ``ahbm`` backend's hierarchical all-reduce over the six SIPs of the three
shipped 2×3 trays (a ring, a torus and a mesh without wrap-around links), one
rank per SIP, each rank's f16 tensor split row-wise over its cubes (PE 0 of
each), for a few small payloads so that the script runs in seconds. The full
sweep, up to 96 KiB per PE and with the α–β model beside every point, is the
:doc:`all-reduce study </studies/allreduce>`.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.runtime import DPPolicy, session

TOPOLOGIES = ("6sip_2x3_ring_1d", "6sip_2x3_torus_2d", "6sip_2x3_mesh_2d_no_wrap")  # builtin topologies
PAYLOADS = (64, 512, 4096)  # bytes per PE
SHARDS = DPPolicy(cube="row_wise", num_pes=1)


def allreduce_ns(topology: str, nbytes: int) -> float:
    """One all-reduce over every SIP of ``topology``; its span, earliest PE start to latest PE end (ns)."""
    with session(topology) as torch:
        spec = torch.graph.spec
        world, cubes = spec.system.sips.count, spec.cubes_per_sip

        def worker(rank: int) -> None:
            torch.ahbm.set_device(rank)
            torch.distributed.init_process_group(backend="ahbm")
            t = torch.empty((cubes, nbytes // 2), "float16", SHARDS)
            torch.distributed.all_reduce(t)

        torch.multiprocessing.spawn(worker, nprocs=world)
        return collective_span_ns([res for _, res in torch.distributed.results])


latency = {t: [allreduce_ns(t, b) for b in PAYLOADS] for t in TOPOLOGIES}
for t, values in latency.items():
    print(t, ", ".join(f"{b} B: {ns:.1f} ns" for b, ns in zip(PAYLOADS, values, strict=True)))

# %%
# Each point is one simulated all-reduce; the lines only join a topology's points.

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
for t, values in latency.items():
    ax.plot(PAYLOADS, [v / 1000 for v in values], marker="o", label=t.removeprefix("6sip_2x3_"))
ax.set_xscale("log", base=2)
ax.set_xticks(PAYLOADS, [f"{b} B" for b in PAYLOADS])
ax.set_xlabel("payload per PE")
ax.set_ylabel("all-reduce latency (µs)")
ax.set_title("All-reduce over 6 SIPs by SIP topology")
ax.legend(title="SIP topology")
plt.show()
