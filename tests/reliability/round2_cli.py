"""Round 2 of the bad-input catalogue, command line and host API: what a hostile user found in the second round,
and what it does now (``tests/test_hostile_cli_round2.py`` pins each one).

``catalogue.py`` calls :func:`extend` once, at its end, with itself, like ``round2.py``: the entries below join
its ``CLI_CASES`` and ``API_CASES``.

Findings, one or more entries each:

1. accepted silently: an empty, comment-only or ``~`` topology file (compiled as the default); ``ring_1d`` with a
   grid that does not hold the SIPs; non-ASCII digits in ``-p``; a ``-p`` given twice; ``kernbench topology NAME
   --list`` and ``--export ... --diagrams DIR`` (the extra arguments ignored); a link utilisation above 1 (shown as
   750 %); a negative latency in a ``web --run`` file;
2. tracebacks or "internal error": ``--timeout`` below a millisecond or past a year, a bench index or a JSON
   integer of 5,000 digits, JSON nested 100,000 deep, ``capacity_gib: 1e300``, a component bound to the wrong node
   type, a lone surrogate in a name, ``~nosuchuser/`` paths, a malformed ``--scheduler`` address, the dask extra
   missing when every point was cached, ``from_numpy`` of a 128 GiB broadcast view;
3. hangs and orphans: no wall-clock limit on ``session()``, study pool workers outliving a killed parent,
   ``--timeout`` not covering topology compilation.
"""

from __future__ import annotations

from types import ModuleType

TESTS = "tests/test_hostile_cli_round2.py::"


def _links_file(utilisation: float) -> bytes:
    record = ('{"src": "a", "dst": "b", "kind": "k", "bw_gbs": 1, "latency_ns": 1, "bytes": 10, "packets": 1, '
              f'"messages": 1, "busy_ns": 750, "utilisation": {utilisation}, "max_wait_ns": 0}}')
    return ('{"schema": "kernbench.links/2", "window_ns": 100, "run": {}, "fabric": {}, "edges": 1, '
            f'"links": [{record}]}}\n').encode()


def extend(cat: ModuleType) -> None:
    """Add this round's command-line and API entries to the catalogue module ``cat``."""
    cli, api, raw, edited = cat.CliCase, cat.ApiCase, cat.raw, cat.edited
    topo = cat.TOPO
    sec_yaml, sec_spec, sec_run, sec_out = cat.SEC_YAML, cat.SEC_SPEC, cat.SEC_RUN, cat.SEC_OUT
    sec_budget, sec_other, sec_api = cat.SEC_BUDGET, cat.SEC_OTHER, cat.SEC_API
    run = ("run", "--bench", "gemm-single-pe")
    nothing = "the file holds no topology (it is empty, only comments, or null)"
    deep = b"[" * 100_000 + b"]" * 100_000
    huge = b'{"a": ' + b"9" * 5000 + b"}"

    def yaml(case_id: str, section: str, what: str, body: bytes, expect: str) -> object:
        return cli(case_id, section, what, ("topology", topo), expect, files={"topology.yaml": raw(body)})

    new_cli = (
        yaml("yaml-empty-file", sec_yaml, "an empty topology file (compiled as the default before)", b"", nothing),
        yaml("yaml-comment-only", sec_yaml, "a topology file holding only a comment (the default before)",
             b"# nothing yet\n", nothing),
        yaml("yaml-null-document", sec_yaml, "a topology file holding `~` (the default before)", b"~\n", nothing),
        cli("spec-ring-grid", sec_spec, "`ring_1d` with `grid: [3, 5]` and 2 SIPs (accepted before; a grid left "
            "out is still fine)", ("topology", topo),
            "field 'system.sips.grid' = [3, 5] holds 15 SIPs but system.sips.count = 2; ring_1d does not use the grid",
            files={"topology.yaml": edited(("grid: [1, 2]", "grid: [3, 5]"))}),
        yaml("spec-capacity-overflow", sec_spec, "`capacity_gib: 1e300` (OverflowError before)",
             b"cube:\n  hbm: {capacity_gib: 1e300}\n",
             "cube.hbm.capacity_gib gives over 1e308 HBM bytes per cube, more than the physical address layout"),
        cli("spec-component-wrong-type", sec_spec, "`pe_gemm: pe_math` (KeyError: 'lanes' in the engine before)",
            ("topology", topo), "components.pe_gemm = 'pe_math' is an implementation for pe_math nodes, not pe_gemm "
            "nodes; implementations for pe_gemm: pe_gemm",
            files={"topology.yaml": edited(("pe_gemm: pe_gemm", "pe_gemm: pe_math"))}),
        cli("spec-component-router-sram", sec_spec, "`router: sram` (ran silently before)",
            (*run, "--topology", topo), "components.router = 'sram' is an implementation for sram nodes, not router "
            "nodes; implementations for router: forwarding",
            files={"topology.yaml": edited(("router: forwarding", "router: sram"))}),
        yaml("spec-lone-surrogate", sec_spec, "a lone surrogate (`\"a\\udc80b\"`) in the name (diagrams and the "
             "viewer failed on it before)", b'name: "a\\udc80b"\n',
             "field 'name' holds the lone surrogate U+DC80 (in 'a\\udc80b'), which is not a character"),
        cli("topology-unknown-home", sec_yaml, "`~nosuchuser/x.yaml` (RuntimeError before)",
            (*run, "--topology", "~nosuchuser9/x.yaml"),
            "topology path '~nosuchuser9/x.yaml': ~nosuchuser9 names no user with a home folder on this machine"),
        cli("param-arabic-digits", sec_run, "`-p M=٦٤` (Arabic-Indic digits, read as 64 before)",
            (*run, "-p", "M=٦٤"), "M='٦٤' holds characters other than ASCII; write the number with the digits 0-9"),
        cli("param-fullwidth-digits", sec_run, "`-p M=６４` (full-width digits, read as 64 before)",
            (*run, "-p", "M=６４"), "M='６４' holds characters other than ASCII; write the number with the digits 0-9"),
        cli("param-repeated", sec_run, "`-p M=64 -p M=128` (the last one won silently before)",
            (*run, "-p", "M=64", "-p", "M=128"),
            "-p 'M=128': parameter M is already set by -p 'M=64'; give each parameter once"),
        cli("timeout-tiny", sec_budget, "`--timeout 1e-300` (the alarm fired before the watchdog was ready: "
            "traceback before)", (*run, "--timeout", "1e-300"),
            "--timeout '1e-300' is invalid; expected from 0.001 to 31,536,000 seconds (a year), or no limit"),
        cli("timeout-huge", sec_budget, "`--timeout 1e300` (OverflowError from setitimer before)",
            (*run, "--timeout", "1e300"),
            "--timeout '1e300' is invalid; expected from 0.001 to 31,536,000 seconds (a year), or no limit"),
        cli("topology-list-with-name", sec_other, "`kernbench topology nosuch --list` (the name ignored before)",
            ("topology", "nosuch", "--list"),
            "--list only lists the builtin topologies, so the topology 'nosuch' would be ignored"),
        cli("topology-export-with-diagrams", sec_other, "`kernbench topology --export default F --diagrams /proc/x` "
            "(--diagrams ignored before)", ("topology", "--export", "default", "{tmp}/x.yaml", "--diagrams", "/proc/x"),
            "--export only writes a builtin topology, so --diagrams /proc/x would be ignored"),
        cli("links-utilisation-above-one", sec_other, "a links file with `utilisation: 7.5` (shown as 750 % before)",
            ("links", "{tmp}/l.json"), "links[0].utilisation is 7.5 (a → b); expected a fraction from 0 to 1",
            files={"l.json": raw(_links_file(7.5))}),
        cli("links-heatmap-over-input", sec_out, "`kernbench links l.svg --heatmap l.svg` (the links file was "
            "overwritten by its own heatmap before, and a failed draw left half a file)", ("links", "{tmp}/l.svg",
            "--heatmap", "{tmp}/l.svg"), "--heatmap {tmp}/l.svg: is the links file, which this command reads",
            files={"l.svg": raw(_links_file(0.5))}),
        cli("links-deep-json", sec_other, "a links file nested 100,000 deep (RecursionError before)",
            ("links", "{tmp}/l.json"), "links file {tmp}/l.json nests lists or objects more than 64 levels deep",
            files={"l.json": raw(deep)}),
        cli("links-huge-int", sec_other, "a links file with a 5,000-digit integer (ValueError before)",
            ("links", "{tmp}/l.json"), "links file {tmp}/l.json holds an integer of 5,000 digits (at most 40 are read)",
            files={"l.json": raw(huge)}),
        cli("web-run-deep-json", sec_other, "`web --run` of a file nested 100,000 deep (RecursionError before)",
            ("web", "--run", "{tmp}/r.json", "--export", "{tmp}/w"),
            "run file {tmp}/r.json nests lists or objects more than 64 levels deep", files={"r.json": raw(deep)},
            lines=-1),
        cli("web-links-deep-json", sec_other, "`web --links` of a file nested 100,000 deep (RecursionError before)",
            ("web", "--links", "{tmp}/l.json", "--export", "{tmp}/w"),
            "links file {tmp}/l.json nests lists or objects more than 64 levels deep", files={"l.json": raw(deep)},
            lines=-1),
        cli("web-run-negative-latency", sec_other, "`web --run` of a run with `latency_ns: -5` (shown before)",
            ("web", "--run", "{tmp}/r.json", "--export", "{tmp}/w"),
            "run file {tmp}/r.json: latency_ns is -5, expected a non-negative number of ns",
            files={"r.json": raw(b'{"bench": "x", "latency_ns": -5}')}, lines=-1),
        cli("study-scheduler-malformed", sec_other, "`--scheduler 'tcp://[::1'` (ValueError from urlparse before)",
            ("study", "gemm", "--scheduler", "tcp://[::1", "--out", "{tmp}/s"),
            "--scheduler 'tcp://[::1' is not a scheduler address; give tcp://HOST:PORT"),
    )
    new_api = (
        api("bench-huge-index", sec_run, "a 5,000-digit `--bench` or `-p M=` value (ValueError from int() before; "
            "a command line too long to show here)", "(5,000 characters) is not a bench name or index",
            TESTS + "test_a_bench_or_parameter_of_thousands_of_digits_is_one_line"),
        api("api-dask-extra-missing", sec_other, "a `--scheduler` study whose points are all cached, without the "
            "dask extra (ModuleNotFoundError: distributed before)",
            "--executor dask needs the dask extra: pip install 'kernbench-studies[dask]'",
            TESTS + "test_a_missing_dask_extra_is_one_line_even_when_every_point_is_cached"),
        api("api-from-numpy-broadcast", cat.SEC_DATA, "`torch.from_numpy` of a 128 GiB broadcast view (made "
            "contiguous, 128 GiB of host memory, before the device check): the device refuses it first",
            "cannot allocate 137438953472 bytes aligned to 256 bytes in HBM",
            TESTS + "test_from_numpy_checks_the_device_before_making_a_view_contiguous"),
        api("api-session-default-timeout", sec_budget, "`while True: pass` in a kernel under `session()` (ran "
            "forever before): a `session()` block has a default wall-clock limit of an hour "
            "(`DEFAULT_SESSION_TIMEOUT_S`; `timeout_s=None` switches it off). A bare `RuntimeContext` has none, "
            "because it has no block to bound: give it `limits=Limits(timeout_s=...)` (the engine enforces it) or use "
            "`session()`",
            "the run took more than the wall-clock timeout of", TESTS + "test_session_has_a_default_wall_clock_limit"),
        api("api-study-orphans", sec_budget, "`kernbench study` killed by SIGTERM or SIGKILL (its pool workers ran "
            "on, orphaned, before): each worker watches its parent and exits within a second of its death; the "
            "worker processes of `--executor dask`'s local cluster end with it too (checked for SIGKILL)",
            "assert not any(_alive(p) for p in pids)", TESTS + "test_study_pool_workers_exit_when_the_parent_dies"),
        api("api-timeout-covers-compile", sec_budget, "`--timeout 2` on the largest valid topology (took 78 s: the "
            "clock started after compilation): `--timeout` now counts from before the topology is compiled, and "
            "each run gets what is left", "compiling the topology took more than the wall-clock timeout of 0.3 s",
            TESTS + "test_the_cli_timeout_covers_compiling_the_topology"),
        api("api-limits-timeout-range", sec_budget, "`Limits(timeout_s=1e-300)` or `1e300` (a traceback from the "
            "alarm, or an OverflowError, before)", "is invalid; expected from 0.001 to 31,536,000",
            TESTS + "test_limits_refuse_a_timeout_the_alarm_cannot_take"),
    )
    # `--timeout 0.01` now runs out while the topology compiles (the clock starts before compilation): the
    # first-round entry for a run past its timeout takes a run long enough for a clock that has already begun.
    first = next(c for c in cat.CLI_CASES if c.id == "budget-timeout")
    replaced = {"budget-timeout": cli(
        "budget-timeout", first.section, "a run past `--timeout` (wall clock, counted from before the topology is "
        "compiled)", ("run", "--bench", "matmul-composite", "-p", "M=2048", "-p", "K=2048", "-p", "N=2048",
                      "--timeout", "1.5"),
        "the run took more than the wall-clock timeout of 1.5 s", volatile=first.volatile)}
    cat.CLI_CASES = (*(replaced.get(c.id, c) for c in cat.CLI_CASES), *new_cli)
    cat.API_CASES = (*cat.API_CASES, *new_api)
    assert sec_out in cat.SECTIONS and sec_api in cat.SECTIONS
