"""The report's hardware table, generated from a topology file (every row names the YAML field it shows)."""

from __future__ import annotations

import re

from kernbench.studies.report.grounding import DATA_BEGIN, DATA_END
from kernbench.studies.report.numbers import tex_escape
from kernbench.topology import TopologySpec

#: (group, quantity, spec field path, unit); a path may be a computed property of the spec.
ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("Hierarchy", "SIPs in the tray", "system.sips.count", ""),
    ("Hierarchy", "cubes per SIP (mesh width)", "sip.cube_mesh.w", ""),
    ("Hierarchy", "cubes per SIP (mesh height)", "sip.cube_mesh.h", ""),
    ("Hierarchy", "PEs per cube", "pes_per_cube", ""),
    ("PE", "clock", "pe.clock_ghz", "GHz"),
    ("PE", "GEMM peak", "pe.gemm.peak_tflops", "TFLOP/s"),
    ("PE", "GEMM tile M", "pe.gemm.tile_m", "elements"),
    ("PE", "GEMM tile K", "pe.gemm.tile_k", "elements"),
    ("PE", "GEMM tile N", "pe.gemm.tile_n", "elements"),
    ("PE", "math lanes", "pe.math_lanes", "elements/cycle"),
    ("PE", "TCM capacity", "pe.tcm.capacity_mib", "MiB"),
    ("PE", "TCM read bandwidth", "pe.tcm.read_bw_gbs", "GB/s"),
    ("PE", "TCM write bandwidth", "pe.tcm.write_bw_gbs", "GB/s"),
    ("PE", "kernel scratch in TCM", "pe.tcm.scratch_mib", "MiB"),
    ("PE", "DMA read / write channels", "pe.dma.read_channels", ""),
    ("PE", "CPU issue overhead", "pe.cpu_overhead_ns", "ns"),
    ("PE", "scheduler overhead", "pe.scheduler_overhead_ns", "ns"),
    ("PE", "dispatch cost, fixed part", "pe.cost_model.fixed_cycles", "cycles"),
    ("PE", "dispatch cost per descriptor byte", "pe.cost_model.r_cycles_per_byte", "cycles/B"),
    ("PE", "composite descriptor cap", "pe.cost_model.max_composite_logical_bytes", "B"),
    ("PE", "IPCQ ring depth", "pe.ipcq.depth", "slots"),
    ("PE", "IPCQ slot size", "pe.ipcq.slot_kib", "KiB"),
    ("PE", "IPCQ overhead", "pe.ipcq.overhead_ns", "ns"),
    ("Cube", "HBM capacity", "cube.hbm.capacity_gib", "GiB"),
    ("Cube", "HBM bandwidth (aggregate)", "cube.hbm.bw_gbs", "GB/s"),
    ("Cube", "HBM pseudo-channels", "cube.hbm.pseudo_channels", ""),
    ("Cube", "HBM burst", "cube.hbm.burst_bytes", "B"),
    ("Cube", "HBM controller overhead", "cube.hbm.ctrl_overhead_ns", "ns"),
    ("Cube", "SRAM capacity", "cube.sram.capacity_mib", "MiB"),
    ("Cube", "SRAM link bandwidth", "cube.sram.link_bw_gbs", "GB/s"),
    ("Cube", "NoC link bandwidth", "cube.noc.link_bw_gbs", "GB/s"),
    ("Cube", "router overhead", "cube.noc.router_overhead_ns", "ns"),
    ("SIP", "UCIe bandwidth", "sip.ucie.bw_gbs", "GB/s"),
    ("SIP", "UCIe latency", "sip.ucie.latency_ns", "ns"),
    ("SIP", "IO NoC bandwidth", "sip.io.noc_bw_gbs", "GB/s"),
    ("Tray", "PCIe bandwidth", "system.pcie.bw_gbs", "GB/s"),
    ("Tray", "PCIe latency", "system.pcie.latency_ns", "ns"),
    ("Tray", "PCIe switch overhead", "system.pcie.switch_overhead_ns", "ns"),
    ("Fabric", "flit", "fabric.flit_bytes", "B"),
    ("Fabric", "packet (interleave granule)", "fabric.packet_bytes", "B"),
    ("Fabric", "control message", "fabric.control_bytes", "B"),
)


def spec_value(spec: TopologySpec, path: str) -> object:
    """The value at a dotted field path of ``spec`` (or a spec property such as ``pes_per_cube``)."""
    value: object = spec
    for part in path.split("."):
        value = getattr(value, part)
    return value


_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):(?P<value>[^#]*)(?:#(?P<comment>.*))?$")


def assumed_fields(yaml_text: str) -> frozenset[str]:
    """The dotted field paths that a topology file marks as modelling choices: a value whose comment says
    ``assumed``. On a line holding an inline mapping (``dma: {read_channels: 1, overhead_ns: 2.0}``) a comment
    that starts with "assumed" marks every key of the mapping; otherwise only the keys named in the part of the
    comment that says "assumed" (``# 1 read + 1 write DMA; overhead assumed`` marks ``overhead_ns``)."""
    out: set[str] = set()
    stack: list[tuple[int, str]] = []
    for line in yaml_text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        indent, key = len(m["indent"]), m["key"]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        comment, value = (m["comment"] or "").strip().lower(), m["value"].strip()
        if not value:
            stack.append((indent, key))
        if "assumed" not in comment:
            continue
        inner = re.findall(r"(\w+)\s*:", value) if value.startswith("{") else []
        if not inner:
            out.add(path)
            continue
        if comment.startswith("assumed"):
            out.update(f"{path}.{k}" for k in inner)
            continue
        said = " ".join(part for part in comment.split(";") if "assumed" in part)
        out.update(f"{path}.{k}" for k in inner if k.split("_")[0] in said)
    return frozenset(out)


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def hardware_table(spec: TopologySpec, source: str, assumed: frozenset[str] = frozenset()) -> str:
    """A ``table`` environment listing :data:`ROWS` for ``spec`` (read from ``source``); the fields in ``assumed``
    (:func:`assumed_fields` of the file) carry a dagger."""
    lines = [
        "% Generated by kernbench report from " + source + "; do not edit.",
        r"\begin{table}[tbp]",
        r"\centering\footnotesize\setlength{\tabcolsep}{4pt}",
        r"\caption{The modelled hardware: every value as \texttt{" + tex_escape(source) + r"} sets it (the YAML "
        r"field on the right). Values marked $^\dagger$ are marked assumed in the file: modelling choices, not "
        r"measured hardware.}",
        r"\label{tab:hardware}",
        r"\begin{tabular}{@{}llrll@{}}",
        r"\toprule",
        r"Level & Quantity & Value & Unit & YAML field \\",
        r"\midrule",
        DATA_BEGIN,  # the rows show topology fields: numbers by design, exempt from the grounding check
    ]
    group = None
    for g, label, path, unit in ROWS:
        if group is not None and g != group:
            lines.append(r"\addlinespace")
        shown = g if g != group else ""
        group = g
        mark = r"$^\dagger$" if path in assumed else ""
        lines.append(f"{shown} & {tex_escape(label)} & {_fmt(spec_value(spec, path))}{mark} & {tex_escape(unit)} & "
                     rf"\texttt{{\footnotesize {tex_escape(path)}}} \\")
    lines += [DATA_END, r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
