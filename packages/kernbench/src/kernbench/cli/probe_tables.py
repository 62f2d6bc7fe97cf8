"""Human-readable probe tables (not a parsing contract; use ``--json``)."""

from __future__ import annotations

from kernbench.cli.probe import ProbeResult


def print_probe(result: ProbeResult, *, verbose: bool = False) -> None:
    """Print the case table (units in the headers), the utilisation sweep and the invariants; with ``verbose``
    also every case's route, hop by hop."""
    print(f"kernbench probe: {result.nbytes} bytes per case; formula = overhead + wire + fill + drain (ns)")
    head = (f"{'case':24s} {'actual ns':>10s} {'formula ns':>10s} {'ovhd ns':>8s} {'wire ns':>8s} {'fill ns':>8s} "
            f"{'drain ns':>9s} {'BN GB/s':>8s} {'eff GB/s':>8s} {'util %':>6s} {'hops':>4s}")
    print(head)
    for c in result.cases:
        print(f"{c.name:24s} {c.actual_ns:10.1f} {c.formula_ns:10.1f} {c.overhead_ns:8.1f} {c.wire_ns:8.1f} "
              f"{c.fill_ns:8.1f} {c.drain_ns:9.1f} {c.bottleneck_bw_gbs:8.0f} {c.eff_bw_gbs:8.1f} "
              f"{c.util_pct:6.1f} {c.hops:4d}")
        if c.flows and verbose:
            print(f"{'':24s} flows finish at " + ", ".join(f"{fl['actual_ns']:.1f}" for fl in c.flows) + " ns")
    if result.sweep and verbose:
        sizes = sorted({r["nbytes"] for r in result.sweep})
        print("\nutilisation % of the bottleneck bandwidth, by payload")
        print(f"{'case':24s}" + "".join(f"{_size(s):>9s}" for s in sizes))
        rows: dict[str, dict[int, float]] = {}
        for r in result.sweep:
            rows.setdefault(r["name"], {})[r["nbytes"]] = r["util_pct"]
        for name, vals in rows.items():
            print(f"{name:24s}" + "".join(f"{vals[s]:9.1f}" for s in sizes))
    if verbose:
        print("\nroute detail (first packet: node  t_in -> t_out ns; <BN> marks the bottleneck link)")
        for c in result.cases:
            print(f"  {c.name}:")
            for leg, node, t_in, t_out in c.hop_times:
                mark = ""
                if node == c.bottleneck_edge[0] and leg != "read_data":
                    mark = f"  <BN:{c.bottleneck_bw_gbs:.0f}GB/s>"
                print(f"    {leg:9s} {node:34s} {t_in:8.1f} -> {t_out:8.1f}{mark}")
    print("invariants:")
    for inv in result.invariants:
        print(f"  [{'v' if inv['pass'] else 'x'}] {'PASS' if inv['pass'] else 'FAIL'}  {inv['name']}: {inv['detail']}")
    if not verbose:
        print("(utilisation sweep and route detail: kernbench probe --verbose; machine-readable: --json)")


def _size(n: int) -> str:
    return f"{n // 1048576}MiB" if n >= 1048576 else f"{n // 1024}KiB"
