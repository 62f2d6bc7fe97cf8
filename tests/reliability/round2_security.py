"""Round 2 of the bad-input catalogue, security findings: what a hostile user (or a hostile file, page or client)
could make ``kernbench`` do, and what it does now.

``catalogue.py`` calls :func:`extend` once with itself, like ``round2.py``: the entries below join its
``CLI_CASES`` and ``API_CASES``, and a section for the web viewer joins its ``SECTIONS``.

Findings:

1. ``ccl.yaml``'s ``module:`` imported any installed module (its import side effects ran: ``module: this`` printed
   the Zen of Python into ``--json`` output); now only registered algorithm modules are accepted, by name, before
   any import;
2. ``kernbench web --host 127.1`` (or ``::ffff:127.0.0.1``) listened on loopback but switched the Host check off;
   two Host headers were judged by the first;
3. the web server had no read timeout and no connection cap, answered nothing to 2,000 nested ``[`` (a
   ``RecursionError`` on the console), and printed tracebacks for connection resets;
4. terminal escape sequences in topology names and links-file fields were printed raw;
5. ``kernbench topology --export NAME PATH`` followed a dangling symlink and created its target.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

SEC_WEB = "kernbench web: the viewer server"

WEB = "tests/test_web_hostile.py::"
ESC = "tests/test_cli_escapes.py::"
REGISTRY = "packages/kernbench-ccl/tests/test_algorithm_registry.py::"


def dangling_link(name: str, target: str) -> Callable[[Path], bytes]:
    """A file maker that, as it runs, makes ``name`` a symbolic link to ``target`` (which does not exist) in the
    case's folder; the file it is given for holds a note."""
    def make(tmp: Path) -> bytes:
        (tmp / name).unlink(missing_ok=True)
        (tmp / name).symlink_to(tmp / target)
        return b"the case's folder holds a dangling symbolic link\n"
    return make


def extend(cat: ModuleType) -> None:
    """Add the round-2 security entries to the catalogue module ``cat`` (``CLI_CASES``, ``API_CASES``,
    ``SECTIONS``)."""
    cli, api = cat.CliCase, cat.ApiCase
    ccl_run = ("run", "--bench", "ccl-allreduce", "--topology", cat.TOPO, "-p", "BYTES=64", "--json")
    new_cli = (
        cli("ccl-module-unregistered", cat.SEC_CCL, "`module: this` (imported it before: its side effect printed "
            "the Zen of Python into the `--json` output); refused by name before any import",
            ccl_run, "{tmp}/ccl.yaml: algorithm 'z' names module 'this', which is not a registered algorithm module, "
            "so it is not imported (known: kernbench.ccl.algorithms.grid_all_gather, "
            "kernbench.ccl.algorithms.grid_all_to_all_hierarchical, kernbench.ccl.algorithms.grid_all_to_all_pairwise, "
            "kernbench.ccl.algorithms.grid_barrier, kernbench.ccl.algorithms.grid_broadcast, "
            "kernbench.ccl.algorithms.grid_reduce_scatter, "
            "kernbench.ccl.algorithms.lrab_hierarchical_allreduce); register your own "
            "with kernbench.ccl.register_algorithm(module) before init_process_group, or in the "
            "'kernbench.ccl_algorithms' entry-point group of an installed package",
            files={"topology.yaml": cat.edited(),
                   "ccl.yaml": cat.raw(b"defaults: {algorithm: z}\nalgorithms: {z: {module: this}}\n")}),
        cli("export-dangling-symlink", cat.SEC_OUT, "`topology --export default LINK` where LINK is a dangling "
            "symbolic link (created the link's target before)", ("topology", "--export", "default", "{tmp}/link.yaml"),
            "--export {tmp}/link.yaml: is a symbolic link to {tmp}/elsewhere.yaml, which does not exist; writing "
            "through it would create that file, so remove the link or choose another path",
            files={"note.txt": dangling_link("link.yaml", "elsewhere.yaml")}),
    )
    new_api = (
        api("ccl-module-registered-only", cat.SEC_CCL, "a `ccl.yaml` naming a module that is not a registered "
            "algorithm (shipped in `kernbench.ccl.algorithms`, in the `kernbench.ccl_algorithms` entry-point group, "
            "or passed to `kernbench.ccl.register_algorithm`): the module is never imported",
            "which is not a registered algorithm module",
            REGISTRY + "test_an_unregistered_module_is_refused_by_name_and_never_imported"),
        api("web-loopback-spellings", SEC_WEB, "`--host 127.1`, `0x7f.0.0.1` or `::ffff:127.0.0.1` (listened on "
            "loopback with the Host check off before: `Host: evil.example` got 200); now 421",
            "this viewer answers loopback host names only",
            WEB + "test_the_host_check_holds_for_every_loopback_spelling"),
        api("web-two-hosts", SEC_WEB, "a request with two `Host` headers (judged by the first before)",
            "a request may carry one Host header only", WEB + "test_two_host_headers_are_refused"),
        api("web-slow-clients", SEC_WEB, "idle connections and half-sent requests (500 stuck threads before): each "
            "connection has a 10 s read timeout, at most 32 are served at once, the next get a 503 and are closed",
            "HTTP/1.0 503 Service Unavailable",
            WEB + "test_idle_and_half_sent_connections_time_out_and_the_cap_answers_503"),
        api("web-nested-json", SEC_WEB, "a run request of 2,000 nested `[` (no answer and a `RecursionError` on the "
            "console before); the depth is measured before parsing", "the run request nests deeper than",
            WEB + "test_deeply_nested_json_is_a_400_not_a_silent_recursion_error"),
        api("web-connection-reset", SEC_WEB, "a client resetting its connection mid-request (a traceback on the "
            "console before)", "leaves nothing on the console",
            WEB + "test_a_connection_reset_mid_request_is_forgotten_quietly"),
        api("terminal-escapes-links", cat.SEC_OUT, "ESC, BEL and bidi overrides in a links file's bench name, link "
            "names and kinds (`kernbench links`; printed raw before)", r"print as \x1b, \x07 and \u202e",
            ESC + "test_links_file_fields_are_printed_escaped"),
        api("terminal-escapes-topology", cat.SEC_OUT, "terminal escape sequences in a topology's `name` "
            "(`kernbench topology`, `kernbench web`)", r"prints as 'evil\x1b[2J\x07'",
            ESC + "test_a_topology_name_with_escapes_is_printed_escaped"),
    )
    cat.CLI_CASES = (*cat.CLI_CASES, *new_cli)
    cat.API_CASES = (*cat.API_CASES, *new_api)
    if SEC_WEB not in cat.SECTIONS:
        at = cat.SECTIONS.index(cat.SEC_OTHER) + 1 if cat.SEC_OTHER in cat.SECTIONS else len(cat.SECTIONS)
        cat.SECTIONS = (*cat.SECTIONS[:at], SEC_WEB, *cat.SECTIONS[at:])
