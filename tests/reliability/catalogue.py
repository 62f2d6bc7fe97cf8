"""The bad-input catalogue behind ``docs/reliability.md`` (issue 12): every class of bad input, what the user
sees, and the test that pins it.

Two kinds of entry:

- :class:`CliCase`: a ``kernbench`` command line (with the files it needs, made in a scratch folder). Running
  the catalogue runs each one in-process through :func:`kernbench.cli.main.main` and records its exit status
  and stderr; ``tests/test_reliability.py`` pins both, and the page shows exactly what the run printed.
- :class:`ApiCase`: misuse of the Python API, pinned by a named test elsewhere; the page quotes the message
  fragment that test asserts (the doc test checks that the test exists and contains it).

Usage::

    python tests/reliability/catalogue.py            # compare docs/reliability.md with a fresh run, exit 1 if stale
    python tests/reliability/catalogue.py --write    # rewrite docs/reliability.md
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"
TMP = "<tmp>"


# ---------------------------------------------------------------------------------------------- inputs
def default_text() -> str:
    """The builtin default topology (the file ``kernbench topology --export default`` writes)."""
    from kernbench.topology.builtins import text

    return text()


def edited(*pairs: tuple[str, str], append: str = "") -> Callable[[Path], bytes]:
    """The default topology with each ``old -> new`` replaced once (and ``append`` added), as file bytes."""
    def make(_tmp: Path) -> bytes:
        body = default_text()
        for old, new in pairs:
            assert body.count(old) == 1, f"the default topology no longer holds {old!r} exactly once"
            body = body.replace(old, new)
        return (body + append).encode()
    return make


def FOLDER(_tmp: Path) -> bytes:  # a marker, used like a constant in ``files``
    """Marks a folder (created empty) in :attr:`CliCase.files`."""
    return b""


def raw(data: bytes) -> Callable[[Path], bytes]:
    """A file holding exactly ``data``."""
    return lambda _tmp: data


def bomb(levels: int = 9) -> bytes:
    lines = ["a0: &a0 [" + ", ".join(["x"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return ("\n".join(lines) + f"\ncube:\n  placement: {{m_cpu_pos_mm: *a{levels - 1}}}\n").encode()


# ---------------------------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class CliCase:
    """One command line. ``files`` maps names to file makers (created in the scratch folder, ``{tmp}`` in
    ``argv`` is that folder); ``expect`` must appear in the last line of stderr; ``code`` is the exit status."""

    id: str
    section: str
    what: str
    argv: tuple[str, ...]
    expect: str
    code: int = 2
    files: dict[str, Callable[[Path], bytes]] = field(default_factory=dict)
    lines: int = 1  # non-empty stderr lines expected (0: silent, -1: any, e.g. a traceback)
    # (regex, placeholder): parts that vary from run to run. A wall-clock timeout names the Python line it
    # interrupted only when the alarm lands in running code (not when the engine's deadline check between event
    # chunks sees it first, or the alarm lands in a garbage-collector callback), so that clause is shown optional.
    volatile: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ApiCase:
    """Misuse of the Python API: what the user sees (a message fragment) and the test that asserts it."""

    id: str
    section: str
    what: str
    sees: str
    test: str  # path::function


TOPO = "{tmp}/topology.yaml"
SEC_YAML = "Topology file: reading it"
SEC_SPEC = "Topology file: values and their bounds"
SEC_CCL = "ccl.yaml"
SEC_RUN = "kernbench run: benches, parameters, devices"
SEC_OUT = "Output paths and the terminal"
SEC_BUDGET = "Runaway simulations"
SEC_OTHER = "Other commands"
SEC_API = "Python API: sessions, tensors, handles"
SEC_DATA = "Data mode"


def topo(case_id: str, section: str, what: str, make: Callable[[Path], bytes], expect: str, *,
         command: tuple[str, ...] = ("topology", TOPO), code: int = 2) -> CliCase:
    return CliCase(case_id, section, what, command, expect, code, {"topology.yaml": make})


CLI_CASES: tuple[CliCase, ...] = (
    # ------------------------------------------------------------------ reading the file
    topo("yaml-syntax", SEC_YAML, "an unclosed flow mapping", raw(b"name: x\nsystem:\n  sips: {count: 2\n"),
         "malformed YAML at line 4, column 1"),
    topo("yaml-tab", SEC_YAML, "a tab used for indentation", raw(b"system:\n\tsips: {}\n"),
         "found character '\\t' that cannot start any token"),
    topo("yaml-not-utf8", SEC_YAML, "a Latin-1 byte (0xe9) in a comment",
         raw("name: ok  # caf\xe9\n".encode("latin-1")), "not UTF-8 text: byte 0xe9 at offset 15 (line 1)"),
    topo("yaml-nul", SEC_YAML, "a NUL byte", raw(b"name: a\x00b\n"), "character U+0000 is not allowed"),
    topo("yaml-duplicate-key", SEC_YAML, "two `cube:` sections (the second used to win silently)",
         edited(append="cube:\n  hbm: {bw_gbs: 1.0}\n"), "duplicate key 'cube' (first at line "),
    topo("yaml-alias-bomb", SEC_YAML, "an alias bomb (9 levels of 9 aliases) in a known field", raw(bomb()),
         "its aliases expand to more than 100,000 values"),
    topo("yaml-recursive-alias", SEC_YAML, "an alias to a value that contains it", raw(b"name: &a [1, *a]\n"),
         "a recursive alias"),
    topo("yaml-many-aliases", SEC_YAML, "more than 100 aliases",
         raw(b"name: &n x\nemit_views: [" + b", ".join([b"*n"] * 101) + b"]\n"), "more than 100 aliases"),
    topo("yaml-deep", SEC_YAML, "lists nested 5,000 deep", raw(b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n"),
         "nesting deeper than 64 levels"),
    topo("yaml-python-tag", SEC_YAML, "a Python tag", raw(b"name: !!python/object/apply:os.system ['true']\n"),
         "tag '!!python/object/apply:os.system' is not allowed"),
    topo("yaml-custom-tag", SEC_YAML, "an unknown tag", raw(b"name: !custom x\n"), "tag '!custom' is not allowed"),
    topo("yaml-huge-int", SEC_YAML, "an integer of 5,000 digits", raw(b"system: {sips: {count: " + b"9" * 5000
                                                                      + b"}}\n"), "an integer of 5000 digits"),
    topo("yaml-too-big", SEC_YAML, "a 2 MiB file", raw(b"# " + b"x" * (2 << 20) + b"\n"),
         "the file is 2,097,155 bytes, more than the 1,048,576 a topology may hold"),
    topo("yaml-two-documents", SEC_YAML, "two YAML documents", raw(b"name: a\n---\nname: b\n"),
         "expected a single document in the stream"),
    topo("yaml-root-list", SEC_YAML, "a list at the root", raw(b"- a\n- b\n"),
         "the document root must be a mapping of sections, got list"),
    CliCase("topology-missing", SEC_YAML, "a file that does not exist", ("topology", "{tmp}/nope.yaml"),
            "topology file not found: {tmp}/nope.yaml"),
    CliCase("topology-folder", SEC_YAML, "a folder instead of a file", ("topology", "{tmp}/dir.yaml"),
            "topology path is not a file", files={"dir.yaml": FOLDER}),
    CliCase("topology-unknown-builtin", SEC_YAML, "a builtin name that does not exist", ("topology", "nosuch"),
            "unknown builtin topology 'nosuch'; builtin topologies: default"),
    # ------------------------------------------------------------------ values
    topo("spec-unknown-field", SEC_SPEC, "a misspelt field", edited(("link_bw_gbs: 256.0", "link_bw_gb: 256.0")),
         "unknown field 'cube.noc.link_bw_gb'; did you mean 'link_bw_gbs'?"),
    topo("spec-wrong-type", SEC_SPEC, "text where a number belongs",
         edited(("link_bw_gbs: 256.0", 'link_bw_gbs: "fast"')),
         "field 'cube.noc.link_bw_gbs' = 'fast' is invalid; expected a number from 0.001 to 1000000"),
    CliCase("spec-exponent", SEC_SPEC, "`bw_gbs: 1e3` (read as text, and refused, before): now a number",
            ("topology", TOPO, "--json"), "", 0, {"topology.yaml": edited(("bw_gbs: 1024.0", "bw_gbs: 1e3"))},
            lines=0),
    topo("spec-bool", SEC_SPEC, "`true` for a count", edited(("count: 2 ", "count: true ")),
         "field 'system.sips.count' = True is invalid; expected an integer from 1 to 16"),
    topo("spec-float-for-int", SEC_SPEC, "`256.0` for a byte count", edited(("burst_bytes: 256", "burst_bytes: 256.0")),
         "field 'cube.hbm.burst_bytes' = 256.0 is invalid; expected an integer from 16 to 65536"),
    topo("spec-count-range", SEC_SPEC, "17 SIPs", edited(("count: 2 ", "count: 17 ")),
         "field 'system.sips.count' = 17 is invalid; expected an integer from 1 to 16"),
    topo("spec-denormal-bw", SEC_SPEC, "`link_bw_gbs: 1.0e-300` (reported latencies of 3e304 ns before)",
         edited(("link_bw_gbs: 256.0", "link_bw_gbs: 1.0e-300")),
         "field 'cube.noc.link_bw_gbs' = 1e-300 is invalid; expected a number from 0.001 to 1000000"),
    topo("spec-nan", SEC_SPEC, "`.nan` for a latency", edited(("latency_ns: 50.0", "latency_ns: .nan")),
         "field 'system.pcie.latency_ns' = nan is invalid; expected a number from 0 to 1000000000"),
    topo("spec-pseudo-channels", SEC_SPEC, "`pseudo_channels: 800000000` (MemoryError at 5.5 GB before)",
         edited(("pseudo_channels: 64", "pseudo_channels: 800000000")),
         "field 'cube.hbm.pseudo_channels' = 800000000 is invalid; expected an integer from 1 to 1024"),
    topo("spec-max-spacing", SEC_SPEC, "`max_spacing_mm: 0.0001` (`kernbench topology` ran past 120 s before)",
         edited(("max_spacing_mm: 3.0", "max_spacing_mm: 0.0001")),
         "field 'cube.geometry.max_spacing_mm' = 0.0001 is invalid; expected a number from 0.1 to 100"),
    topo("spec-router-columns", SEC_SPEC, "100 mm cube with `max_spacing_mm: 1`",
         edited(("w_mm: 12.0", "w_mm: 100.0"), ("max_spacing_mm: 3.0", "max_spacing_mm: 1.0")),
         "would put about 100 router columns across the 100 mm cube; expected at most 64"),
    topo("spec-cube-width", SEC_SPEC, "`w_mm: 1e6` (ran past 120 s before)", edited(("w_mm: 12.0", "w_mm: 1e6")),
         "field 'cube.geometry.w_mm' = 1000000.0 is invalid; expected a number from 1 to 100"),
    topo("spec-pe-off-die", SEC_SPEC, "`pe_inset_mm: 50` on a 12 mm die (accepted before)",
         edited(("pe_inset_mm: 1.5", "pe_inset_mm: 50")), "puts PEs outside the 12 x 12 mm cube"),
    topo("spec-hbm-gap", SEC_SPEC, "HBM rows outside the cube", edited(("hbm_gap_mm: 1.5", "hbm_gap_mm: 7")),
         "field 'cube.geometry.hbm_gap_mm' = 7 is invalid; expected below h_mm / 2 = 6"),
    topo("spec-packet-vs-control", SEC_SPEC, "`packet_bytes` below `control_bytes` (KeyError: 1 in the engine before)",
         edited(("flit_bytes: 256", "flit_bytes: 32"), ("packet_bytes: 4096", "packet_bytes: 32")),
         "field 'fabric.packet_bytes' = 32 is invalid; expected at least fabric.control_bytes = 64"),
    topo("spec-packet-vs-flit", SEC_SPEC, "a packet that is not a whole number of flits",
         edited(("packet_bytes: 4096", "packet_bytes: 1000")), "expected a multiple of fabric.flit_bytes = 256"),
    topo("spec-tiny-flit", SEC_SPEC, "1-byte flits", edited(("flit_bytes: 256", "flit_bytes: 1")),
         "field 'fabric.flit_bytes' = 1 is invalid; expected an integer from 16 to 65536"),
    topo("spec-grid", SEC_SPEC, "a torus grid that does not hold the SIPs",
         edited(("topology: ring_1d", "topology: torus_2d"), ("grid: [1, 2]", "grid: [2, 2]")),
         "holds 4 SIPs but system.sips.count = 2"),
    topo("spec-attach-cube", SEC_SPEC, "the IO chiplet on a cube outside the west column",
         edited(("attach_cube: 0", "attach_cube: 1")), "field 'sip.io.attach_cube' = 1 is invalid"),
    topo("spec-channels-per-pe", SEC_SPEC, "pseudo-channels that do not split over the PEs",
         edited(("pseudo_channels: 64", "pseudo_channels: 60")), "expected a multiple of the 8 PEs per cube"),
    topo("spec-corners", SEC_SPEC, "a corner listed twice", edited(("corners: [NW, NE, SW, SE]", "corners: [NW, NW]")),
         "field 'cube.pe_layout.corners' repeats a corner"),
    topo("spec-page", SEC_SPEC, "an MMU page that is not a power of two",
         edited(("mmu_page_bytes: 4096", "mmu_page_bytes: 3000")), "expected a power of two"),
    topo("spec-scratch", SEC_SPEC, "a scratch region larger than the TCM",
         edited(("scratch_mib: 1.0", "scratch_mib: 32.0")), "field 'pe.tcm.scratch_mib' = 32.0 exceeds"),
    topo("spec-placement", SEC_SPEC, "the M_CPU placed off the die",
         edited(("m_cpu_pos_mm: [1.5, 5.5]", "m_cpu_pos_mm: [30.0, 5.5]")), "lies outside the 12 x 12 mm cube"),
    topo("spec-address-layout", SEC_SPEC, "36 cubes per SIP (the address layout names 32)",
         edited(("cube_mesh: {w: 4, h: 4,", "cube_mesh: {w: 6, h: 6,")), "gives 36 cubes per SIP"),
    topo("spec-choice", SEC_SPEC, "an unknown SIP topology", edited(("topology: ring_1d", "topology: star")),
         "expected one of 'ring_1d', 'torus_2d', 'mesh_2d_no_wrap'"),
    topo("spec-long-value", SEC_SPEC, "a 5,000-character value (quoted to 80 characters)",
         edited(("name: ahbm-default", "name: [" + "x" * 5000 + "]")), "field 'name' = ['xxxxxx"),
    topo("spec-component-type", SEC_SPEC, "`components: {routr: forwarding}` (accepted before)",
         edited(("  router: forwarding", "  routr: forwarding")), "components: 'routr' is not a node type; "
                                                                  "did you mean 'router'?"),
    topo("spec-component-impl", SEC_SPEC, "`router: warp_drive` under `kernbench topology` (accepted before)",
         edited(("  router: forwarding", "  router: warp_drive")),
         "components.router = 'warp_drive' is an unknown component implementation"),
    topo("spec-disabled-unknown", SEC_SPEC, "disabling a link that does not exist",
         edited(append='disabled_links:\n  - ["a", "b"]\n'), "disabled_links names a → b, which is not a link"),
    topo("spec-disabled-required", SEC_SPEC, "disabling a link every PE needs",
         edited(append='disabled_links:\n  - ["sip0.cube3.pe2.pe_dma", "sip0.cube3.noc.r0c3"]\n'),
         "no link for sip0.cube3.pe2.pe_dma → sip0.cube3.noc.r0c3"),
    # ------------------------------------------------------------------ ccl.yaml beside a topology
    CliCase("ccl-not-utf8", SEC_CCL, "a byte that is not UTF-8",
            ("run", "--bench", "ccl-allreduce", "--topology", TOPO, "-p", "BYTES=64"),
            "{tmp}/ccl.yaml: not UTF-8 text: byte 0xff at offset 28 (line 2)",
            files={"topology.yaml": edited(), "ccl.yaml": raw(b"defaults:\n  algorithm: lrab_\xff\n")}),
    CliCase("ccl-duplicate-key", SEC_CCL, "two `defaults:` sections",
            ("run", "--bench", "ccl-allreduce", "--topology", TOPO, "-p", "BYTES=64"),
            "duplicate key 'defaults' (first at line 1, again at line 2)",
            files={"topology.yaml": edited(), "ccl.yaml": raw(b"defaults: {}\ndefaults: {}\n")}),
    CliCase("ccl-unknown-algorithm", SEC_CCL, "an algorithm with no entry",
            ("run", "--bench", "ccl-allreduce", "--topology", TOPO, "-p", "BYTES=64"),
            "algorithm 'nope' has no entry with a 'module' under 'algorithms'",
            files={"topology.yaml": edited(), "ccl.yaml": raw(b"defaults: {algorithm: nope}\nalgorithms: {}\n")}),
    CliCase("ccl-python-tag", SEC_CCL, "a Python tag",
            ("run", "--bench", "ccl-allreduce", "--topology", TOPO, "-p", "BYTES=64"),
            "tag '!!python/name:os.system' is not allowed",
            files={"topology.yaml": edited(), "ccl.yaml": raw(b"defaults: !!python/name:os.system\n")}),
    # ------------------------------------------------------------------ kernbench run
    CliCase("run-unknown-bench", SEC_RUN, "a bench that does not exist", ("run", "--bench", "nosuch"),
            "unknown bench 'nosuch'; valid benches: 1:all-gather, 2:all-to-all, 3:ccl-allreduce, 4:ffn"),
    CliCase("run-superscript-bench", SEC_RUN, "`--bench ²` (a digit to str.isdigit, ValueError before)",
            ("run", "--bench", "²"), "unknown bench '²'"),
    CliCase("run-superscript-device", SEC_RUN, "`--device ²` (ValueError before)",
            ("run", "--bench", "gemm-single-pe", "--device", "²"), "--device '²' is invalid; use a SIP index 0..1"),
    CliCase("run-device-range", SEC_RUN, "a SIP that does not exist", ("run", "--bench", "gemm-single-pe",
                                                                       "--device", "7"), "--device '7' is invalid"),
    CliCase("run-unknown-param", SEC_RUN, "a parameter the bench does not declare",
            ("run", "--bench", "gemm-single-pe", "-p", "Q=1"), "bench 'gemm-single-pe' has no parameter 'Q'"),
    CliCase("run-param-bounds", SEC_RUN, "`MATMUL_M=1e12` (a numpy MemoryError before)",
            ("run", "--bench", "matmul-composite", "-p", "M=1e12"),
            "M=1000000000000 is out of bounds; expected an integer from 1 to 4096"),
    CliCase("run-param-bytes", SEC_RUN, "`CCL_BYTES=16777216` (refused only after 26 s and 3.4 GB before)",
            ("run", "--bench", "ccl-allreduce", "-p", "BYTES=16777216"),
            "BYTES=16777216 is out of bounds; expected an integer from 2 to 4194304"),
    CliCase("run-param-ccl-huge", SEC_RUN, "`CCL_BYTES=1e12` (a numpy MemoryError before)",
            ("run", "--bench", "ccl-allreduce", "-p", "BYTES=1e12"),
            "BYTES=1000000000000 is out of bounds; expected an integer from 2 to 4194304"),
    CliCase("run-param-type", SEC_RUN, "text for an integer parameter", ("run", "--bench", "gemm-single-pe", "-p",
                                                                         "M=abc"), "M='abc' is not an integer"),
    CliCase("run-param-syntax", SEC_RUN, "`-p` without `=`", ("run", "--bench", "gemm-single-pe", "-p", "M"),
            "-p 'M': expected NAME=VALUE"),
    CliCase("run-bench-fails", SEC_RUN, "a value the bench itself refuses (odd byte count)",
            ("run", "--bench", "ccl-allreduce", "-p", "BYTES=3"), "BenchError: BYTES=3 must be even (f16 values)"),
    CliCase("run-debug-traceback", SEC_RUN, "`--debug` on a failing bench (no traceback before)",
            ("--debug", "run", "--bench", "ccl-allreduce", "-p", "BYTES=3"),
            "BenchError: BYTES=3 must be even (f16 values)", lines=-1),
    CliCase("list-params-unknown", SEC_RUN, "`list --params` of a bench that does not exist",
            ("list", "--params", "nosuch"), "unknown bench 'nosuch'"),
    # ------------------------------------------------------------------ outputs
    CliCase("out-trace-proc", SEC_OUT, "`--trace /proc/x` (failed after the whole run before)",
            ("run", "--bench", "gemm-single-pe", "--trace", "/proc/x"),
            "--trace /proc/x: cannot be written (No such file or directory)"),
    CliCase("out-trace-missing-folder", SEC_OUT, "`--trace` into a folder that does not exist",
            ("run", "--bench", "gemm-single-pe", "--trace", "{tmp}/no/such/t.json"),
            "folder {tmp}/no/such does not exist"),
    CliCase("out-trace-folder", SEC_OUT, "`--trace <folder>` (failed after the run before)",
            ("run", "--bench", "gemm-single-pe", "--json", "--trace", "{tmp}"), "", code=0, lines=0),
    CliCase("out-links", SEC_OUT, "`--links` below a file (its folders are created, so a missing one is fine)",
            ("run", "--bench", "gemm-single-pe", "--links", "{tmp}/file/l.json"),
            "--links {tmp}/file/l.json: {tmp}/file is a file, not a folder",
            files={"file": raw(b"x")}),
    CliCase("out-diagrams-file", SEC_OUT, "`--diagrams <an existing file>` (FileExistsError before)",
            ("topology", "--diagrams", "{tmp}/file"), "--diagrams {tmp}/file: is a file, not a folder",
            files={"file": raw(b"x")}),
    CliCase("out-heatmap", SEC_OUT, "`links --heatmap` into /proc", ("links", "{tmp}/l.json", "--heatmap",
                                                                     "/proc/x/h.svg"),
            "--heatmap /proc/x/h.svg: cannot be written (No such file or directory)", files={"l.json": raw(b"{}")}),
    CliCase("out-study", SEC_OUT, "`study --out` below an existing file", ("study", "gemm", "--out",
                                                                            "{tmp}/file/x"),
            "cannot write results to {tmp}/file/x", files={"file": raw(b"x")}),
    # ------------------------------------------------------------------ budgets
    CliCase("budget-events", SEC_BUDGET, "a run past `--max-events`", ("run", "--bench", "gemm-single-pe",
                                                                        "--max-events", "100"),
            "SimulationLimitError: simulation stopped: the run processed 106 events, more than max_events = 100"),
    CliCase("budget-sim-ns", SEC_BUDGET, "a run past `--max-sim-ns`", ("run", "--bench", "gemm-single-pe",
                                                                        "--max-sim-ns", "1000"),
            "the simulated clock reached 1,137.3 ns, beyond max_sim_ns = 1,000"),
    CliCase("budget-records", SEC_BUDGET, "a run whose op log passes `--max-records`",
            ("run", "--bench", "gemm-single-pe", "--max-records", "10"),
            "the op log holds 11 records, more than max_records = 10"),
    CliCase("budget-timeout", SEC_BUDGET, "a run past `--timeout` (wall clock)",
            ("run", "--bench", "matmul-composite", "--timeout", "0.01"),
            "the run took more than the wall-clock timeout of 0.01 s",
            volatile=((r"; (last op [^;]*|no op logged yet)", "; <the last op>"),
                      (r"; (sip\S* runs kernel [^;]*|no kernel was running)", "; <the running kernel>"),
                      (r"(; Python was executing [^;]*)?; if the run is meant",
                       "[; Python was executing <file:line in function>]; if the run is meant"))),
    CliCase("budget-matmul-4096", SEC_BUDGET, "`MATMUL_M=K=N=4096` (ran past 120 s silently before; without "
            "`--timeout 2` it now completes, in 7 min 23 s on 2 loaded cores, see ADR 0027)",
            ("run", "--bench", "matmul-composite", "-p", "M=4096", "-p", "K=4096", "-p", "N=4096", "--timeout", "2"),
            "the run took more than the wall-clock timeout of 2 s",
            volatile=((r"; (last op [^;]*|no op logged yet)", "; <the last op>"),
                      (r"; (sip\S* runs kernel [^;]*|no kernel was running)", "; <the running kernel>"),
                      (r"(; Python was executing [^;]*)?; if the run is meant",
                       "[; Python was executing <file:line in function>]; if the run is meant"))),
    CliCase("budget-bad-value", SEC_BUDGET, "`--max-events abc`", ("run", "--bench", "gemm-single-pe",
                                                                    "--max-events", "abc"),
            "--max-events 'abc' is invalid; expected a positive integer, or 'none' for no limit"),
    # ------------------------------------------------------------------ other commands
    CliCase("probe-unknown-case", SEC_OTHER, "a probe case that does not exist", ("probe", "--case", "nosuch"),
            "nosuch"),
    CliCase("links-missing", SEC_OTHER, "a links file that does not exist", ("links", "{tmp}/none.json"),
            "{tmp}/none.json"),
    CliCase("links-not-json", SEC_OTHER, "a links file that is not JSON", ("links", "{tmp}/l.json"),
            "{tmp}/l.json", files={"l.json": raw(b"\xff\xfe not json")}),
    CliCase("study-unknown", SEC_OTHER, "a study that does not exist", ("study", "nosuch", "--dry-run"),
            "nosuch"),
    CliCase("study-fidelity", SEC_OTHER, "`study --fidelity` that is neither packet nor flow (worded as `run "
            "--fidelity`)", ("study", "gemm", "--fidelity", "exact", "--dry-run"),
            "--fidelity 'exact' is invalid; use packet (every packet on every link) or flow (every transfer one flow "
            "sharing its links max-min fairly)"),
)

API_CASES: tuple[ApiCase, ...] = (
    ApiCase("api-launch-foreign-tensor", SEC_API, "launching in session 2 with a tensor of session 1 (read the "
            "other tensor's data before)", "launch 'copy': tensor float16[8, 64] belongs to {s1.name}, not to "
            "{s2.name}", "packages/kernbench-runtime/tests/test_sessions.py::"
            "test_launch_with_a_tensor_of_another_session_is_refused_before_anything_changes"),
    ApiCase("api-free-foreign-tensor", SEC_API, "`s2.free(a1)` (freed b2's HBM block, then ValueError before)",
            "free: tensor float16[8, 64] belongs to", "packages/kernbench-runtime/tests/test_sessions.py::"
            "test_free_of_another_sessions_tensor_frees_nothing"),
    ApiCase("api-read-foreign-tensor", SEC_API, "`to_numpy` / `peek` of another session's tensor",
            "belongs to {s1.name}, not to {s2.name};", "packages/kernbench-runtime/tests/test_sessions.py::"
            "test_to_numpy_and_peek_of_another_sessions_tensor"),
    ApiCase("api-wait-foreign-handle", SEC_API, "waiting in one session for another's launch",
            "wait: launch 'copy' belongs to {s1.name}, not to {s2.name};",
            "packages/kernbench-runtime/tests/test_sessions.py::test_wait_on_a_handle_of_another_session"),
    ApiCase("api-closed-session", SEC_API, "new tensors or launches after the `with session()` block (accepted "
            "before)", "is closed (its `with session(...)` block has ended); do the work", "packages/"
            "kernbench-runtime/tests/test_sessions.py::test_a_closed_session_refuses_new_work"),
    ApiCase("api-allreduce-foreign", SEC_API, "`all_reduce` of another session's tensor",
            "all_reduce: tensor float16\\\\[16, 8\\\\] belongs to session", "packages/kernbench-ccl/tests/"
            "test_backend_errors.py::test_all_reduce_refuses_a_tensor_of_another_session_before_any_state_changes"),
    ApiCase("api-zero-d", SEC_API, "a 0-d array (became shape (1,) silently before)",
            "a 0-d array has no shape to place", "packages/kernbench-runtime/tests/test_sessions.py::"
            "test_zero_d_array_is_refused_not_reshaped"),
    ApiCase("api-bad-shape", SEC_API, "a shape with a zero, a negative or a fractional size",
            "shape (0, 4) is invalid", "packages/kernbench-runtime/tests/test_sessions.py::test_bad_shapes"),
    ApiCase("api-zeros-huge", SEC_API, "`zeros` of 4 PB (built a host array first before)", "AllocationError",
            "packages/kernbench-runtime/tests/test_sessions.py::"
            "test_zeros_beyond_the_device_fails_before_allocating_host_memory"),
    ApiCase("api-runaway-tl-loop", SEC_BUDGET, "a kernel `while True: tl.cycles(1)` (5.8 GB of op log, then "
            "MemoryError before)", "simulation stopped: the run processed 20,00",
            "packages/kernbench-runtime/tests/test_budgets.py::test_event_budget_stops_a_kernel_looping_on_tl_calls"),
    ApiCase("api-runaway-python", SEC_BUDGET, "a kernel `while True: pass` (hung before)",
            "the run took more than the wall-clock timeout of 0.5 s", "packages/kernbench-runtime/tests/"
            "test_budgets.py::test_wall_clock_watchdog_stops_pure_python_spinning"),
    ApiCase("api-runaway-records", SEC_BUDGET, "a kernel looping on `tl.cycles(1)` with the event budget off",
            "records, more than max_records = 5,000", "packages/kernbench-runtime/tests/test_budgets.py::"
            "test_op_log_budget_bounds_the_memory_of_a_runaway"),
    ApiCase("api-runaway-sim-time", SEC_BUDGET, "a kernel that only ever waits (`tl.cycles(10**6)` in a loop)",
            "beyond max_sim_ns = 50,000,000", "packages/kernbench-runtime/tests/test_budgets.py::"
            "test_simulated_time_budget"),
    ApiCase("api-budget-values", SEC_BUDGET, "`max_events=0`, a NaN or a text budget", "is invalid; expected a "
            "positive", "packages/kernbench-runtime/tests/test_budgets.py::test_defaults_and_validation"),
    ApiCase("api-to-numpy-timing", SEC_DATA, "`to_numpy` without data mode", "to_numpy needs real numerics",
            "packages/kernbench-runtime/tests/test_context.py::test_to_numpy_needs_data_mode"),
    ApiCase("data-timing", SEC_DATA, "`--data` changing latency_ns (ccl-allreduce 24,447 vs 28,406 ns before)",
            "data mode changes", "tests/test_golden.py::test_data_mode_never_changes_timing_for_any_registered_bench"),
    ApiCase("mesh-cache-truncated", SEC_YAML, "a truncated cube-mesh cache entry (KeyError in every later run "
            "before)", "is unusable", "packages/kernbench-topology/tests/test_mesh_and_compile.py::"
            "test_a_corrupt_cache_entry_is_regenerated_with_a_warning[truncated]"),
    ApiCase("mesh-cache-binary", SEC_YAML, "a binary cube-mesh cache entry (UnicodeDecodeError before)",
            "is unusable", "packages/kernbench-topology/tests/test_mesh_and_compile.py::"
            "test_a_corrupt_cache_entry_is_regenerated_with_a_warning[binary]"),
    ApiCase("broken-pipe", SEC_OUT, "`kernbench list | head -c1` (BrokenPipeError before)", "(nothing)",
            "tests/test_reliability.py::test_broken_pipe_exits_quietly"),
    ApiCase("fuzz", SEC_YAML, "random mutations of a valid topology and of ccl.yaml (numbers, types, keys, nesting, "
            "bytes, aliases)", "a valid compile or a one-line KernbenchError", "tests/test_fuzz_topology.py::"
            "test_fuzz_topology_loader_200_examples"),
)


# ---------------------------------------------------------------------------------------------- running
@dataclass
class Outcome:
    """What one command line did: exit status and stderr (scratch folder replaced by ``<tmp>``)."""

    code: int
    stderr: str
    volatile: tuple[tuple[str, str], ...] = ()

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]

    @property
    def shown(self) -> str:
        """The line a user reads (the last non-empty stderr line, or ``(nothing)``), with the parts that vary from
        run to run replaced by placeholders."""
        line = self.lines[-1] if self.lines else "(nothing)"
        for pattern, placeholder in self.volatile:
            line = re.sub(pattern, placeholder, line)
        return line


def run_case(case: CliCase, scratch: Path) -> Outcome:
    """Run ``case`` in-process in its own folder under ``scratch``."""
    from kernbench.cli.main import main

    folder = scratch / case.id
    folder.mkdir(parents=True, exist_ok=True)
    for name, make in case.files.items():
        path = folder / name
        if make is FOLDER:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make(folder))
    argv = [a.replace("{tmp}", str(folder)) for a in case.argv]
    out, err = io.StringIO(), io.StringIO()
    saved = warnings.showwarning
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    warnings.showwarning = saved
    text = err.getvalue().replace(str(folder), TMP).replace(str(ROOT), "<repo>")
    return Outcome(code, text, case.volatile)


def run_all(scratch: Path | None = None) -> dict[str, Outcome]:
    """Every CLI case, in catalogue order, with the mesh cache in a private folder."""
    with tempfile.TemporaryDirectory(prefix="kb-reliability-") as tmp:
        root = Path(scratch or tmp)
        old = os.environ.get("KERNBENCH_CACHE_DIR")
        os.environ["KERNBENCH_CACHE_DIR"] = str(root / "cache")
        try:
            return {c.id: run_case(c, root) for c in CLI_CASES}
        finally:
            if old is None:
                os.environ.pop("KERNBENCH_CACHE_DIR", None)
            else:
                os.environ["KERNBENCH_CACHE_DIR"] = old


# ---------------------------------------------------------------------------------------------- the page
SECTIONS = (SEC_YAML, SEC_SPEC, SEC_CCL, SEC_RUN, SEC_OUT, SEC_BUDGET, SEC_DATA, SEC_API, SEC_OTHER)

INTRO = """\
# Reliability: what bad input does

Every class of bad input we know of, what `kernbench` (or the Python API) does with it, and the test that pins
that behaviour. The rule ([invariant I5](design.md) of the design): bad input never crashes, hangs or corrupts
anything; it ends in one line on stderr, `kernbench: error: <what>, <where>, <how to fix it>`, and exit status
2, before anything half-done reaches the engine. `--debug` (before or after the command) adds the Python
traceback, bench failures included. A value is quoted to at most 80 characters. Errors the machine causes (a
full disk, no memory) also end in one line and exit 2; an unexpected Python exception is a bug and says so, on
one line, with exit status 1.

The command-line rows were produced by running each command on the builtin default topology, edited as
described, in a scratch folder shown as `<tmp>`: the page is regenerated by
`python tests/reliability/catalogue.py --write`, and `tests/test_reliability.py` fails when it is stale.
The exit status is 2 unless the row says otherwise.
"""

OUTRO = """\
## Limits worth knowing

- Topology and `ccl.yaml` files: at most 1 MiB, 100 aliases, 100,000 values once aliases are expanded, 64
  levels of nesting, integers of at most 40 digits; plain YAML data only (no tags). `1e3` is a number.
- Every numeric field of the topology has a range, listed on the
  [spec fields page](reference/spec_fields.md) and in its error message.
- Simulation budgets (`kernbench run --max-events/--max-sim-ns/--max-records/--timeout`,
  `session(max_events=, max_sim_ns=, max_records=, timeout_s=)`): 200,000,000 events, 10^10 simulated ns,
  10,000,000 op-log records, and for `kernbench run` 600 s of wall-clock time; `none` switches one off. The
  largest shipped run, the GQA study's long-context point `cube_repl_pe_tp` at 131,072 keys, uses 11,562,969
  events and 8.77 ms of simulated time; the most op-log records, 857,056, come from `cube_repl_pe_sp` at the
  same length (`python benchmarks/bench_budgets.py`, ADR 0027).
- The op log keeps about 170 bytes per record: 10 million records take 1.74 GB of resident memory
  (`python benchmarks/bench_oplog.py --records 10000000 --method rss`).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """``text`` as inline code in a table cell (a double-backtick span when it holds a backtick)."""
    text = _cell(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def render(outcomes: dict[str, Outcome]) -> str:
    """The whole page."""
    parts = [INTRO]
    n = 0
    for section in SECTIONS:
        rows = [c for c in CLI_CASES if c.section == section]
        api = [c for c in API_CASES if c.section == section]
        if not rows and not api:
            continue
        parts.append(f"## {section}\n")
        parts.append("| # | bad input | what the user sees | pinned by |")
        parts.append("|---|---|---|---|")
        for c in rows:
            n += 1
            o = outcomes[c.id]
            status = "" if o.code == 2 else f" (exit {o.code})"
            cmd = "kernbench " + " ".join(a.replace("{tmp}", TMP) for a in c.argv)
            parts.append(f"| {n} | {_cell(c.what)}: {_code(cmd)} | {_code(o.shown)}{status} | "
                         f"`tests/test_reliability.py::test_cli_case[{c.id}]` |")
        for c in api:
            n += 1
            sees = c.sees.replace("\\\\", "")
            parts.append(f"| {n} | {_cell(c.what)} | {_code(sees)} | `{c.test}` |")
        parts.append("")
    parts.append(OUTRO)
    return "\n".join(parts)


def count() -> int:
    """Entries in the catalogue."""
    return len(CLI_CASES) + len(API_CASES)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite docs/reliability.md")
    args = ap.parse_args(argv)
    page = render(run_all())
    if args.write:
        PAGE.write_text(page)
        print(f"wrote {PAGE.relative_to(ROOT)} ({count()} cases)")
        return 0
    stale = PAGE.read_text() != page if PAGE.exists() else True
    print("docs/reliability.md is stale: run with --write" if stale else "docs/reliability.md is current")
    return 1 if stale else 0


for _round in sorted(Path(__file__).parent.glob("round*.py")):  # later rounds: each module adds its entries
    __import__("runpy").run_path(str(_round))["extend"](sys.modules[__name__])

if __name__ == "__main__":
    sys.exit(main())


__all__ = ["API_CASES", "CLI_CASES", "ApiCase", "CliCase", "Outcome", "render", "run_all", "run_case"]
