"""Human-readable probe tables (not a parsing contract; use ``--json``)."""

from __future__ import annotations

from kernbench.cli.probe import ProbeResult


def print_probe(result: ProbeResult) -> None:
    """Print the summary table, sweep, route detail and invariants."""
    print(f"kernbench probe — {result.nbytes} bytes per case; formula = overhead + wire + fill + drain")
    head = (f"{'case':26s} {'Actual':>9s} {'Formula':>9s} {'Ovhd':>7s} {'Wire':>7s} {'Fill':>6s} {'Drain':>8s} "
            f"{'BN.BW':>6s} {'Eff.BW':>7s} {'Util%':>6s} {'hops':>4s}")
    print(head)
    print("-" * len(head))
    cat = None
    for c in result.cases:
        if c.category != cat:
            cat = c.category
            print(f"[{cat}]")
        print(f"{c.name:26s} {c.actual_ns:9.1f} {c.formula_ns:9.1f} {c.overhead_ns:7.1f} {c.wire_ns:7.1f} "
              f"{c.fill_ns:6.1f} {c.drain_ns:8.1f} {c.bottleneck_bw_gbs:6.0f} {c.eff_bw_gbs:7.1f} "
              f"{c.util_pct:6.1f} {c.hops:4d}")
        for fl in c.flows:
            print(f"    flow {fl['flow']}: {fl['actual_ns']:9.1f} ns  {fl['eff_bw_gbs']:6.1f} GB/s")
    if result.sweep:
        sizes = sorted({r["nbytes"] for r in result.sweep})
        print("\nutilisation sweep (Util% = Eff.BW / BN.BW)")
        print(f"{'case':26s}" + "".join(f"{_size(s):>9s}" for s in sizes))
        rows: dict[str, dict[int, float]] = {}
        for r in result.sweep:
            rows.setdefault(r["name"], {})[r["nbytes"]] = r["util_pct"]
        for name, vals in rows.items():
            print(f"{name:26s}" + "".join(f"{vals[s]:8.1f}%" for s in sizes))
    print("\nroute detail (first packet: node  t_in → t_out ns; <BN> marks the bottleneck link)")
    for c in result.cases:
        print(f"  {c.name}:")
        for leg, node, t_in, t_out in c.trace:
            mark = ""
            if node == c.bottleneck_edge[0] and leg != "read_data":
                mark = f"  <BN:{c.bottleneck_bw_gbs:.0f}GB/s>"
            print(f"    {leg:9s} {node:34s} {t_in:8.1f} → {t_out:8.1f}{mark}")
    print("\ninvariants")
    for inv in result.invariants:
        print(f"  [{'v' if inv['pass'] else 'x'}] {'PASS' if inv['pass'] else 'FAIL'}  {inv['name']}: {inv['detail']}")


def _size(n: int) -> str:
    return f"{n // 1048576}MiB" if n >= 1048576 else f"{n // 1024}KiB"
