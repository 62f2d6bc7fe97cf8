"""Round 2 of the bad-input catalogue: what a hostile user found after the first round, and what it does now.

``catalogue.py`` calls :func:`extend` once, at its end, with itself: the entries below join its ``CLI_CASES`` and
``API_CASES`` (the same :class:`CliCase` / :class:`ApiCase` classes, run and rendered the same way), and a section
for kernels joins its ``SECTIONS``. One first-round entry changes meaning: ``out-trace-missing-folder`` was refused
("folder does not exist"), but every output now creates its missing folders like ``--links`` and ``--diagrams``
always did, so it is replaced in place by what it does now.

Findings, one or more entries each:

1. a ``SimulationLimitError`` caught inside the ``with session(...)`` block was raised again when the block ended;
2. a kernel argument kept after ``torch.free`` (or taken into another session) wrote into, or read, someone else's
   tensor;
3. ``kernbench run`` outputs overwrote inputs and each other, Ctrl-C left a 0-byte file, ``--trace DIR/`` did not
   create its folder, ``--trace ''`` was ignored;
4. kernels that silently did nothing or worse: generator and ``async def`` kernels, negative shapes, block slices
   past the tensor, ``torch.*`` host calls inside a kernel, misused scratch scopes, ``SystemExit`` /
   ``KeyboardInterrupt`` raised in a kernel.
"""

from __future__ import annotations

from types import ModuleType

SEC_KERNEL = "Kernels and the tl language"

RUNTIME_TESTS = "packages/kernbench-runtime/tests/"
TL_TESTS = "packages/kernbench-components/tests/test_kernel_misuse.py::"


def extend(cat: ModuleType) -> None:
    """Add the round-2 entries to the catalogue module ``cat`` (its ``CLI_CASES``, ``API_CASES`` and ``SECTIONS``)."""
    cli, api = cat.CliCase, cat.ApiCase
    topo, sec_out, sec_api, sec_budget = cat.TOPO, cat.SEC_OUT, cat.SEC_API, cat.SEC_BUDGET
    run = ("run", "--bench", "gemm-single-pe")

    replaced = {
        "out-trace-missing-folder": cli(
            "out-trace-missing-folder", sec_out, "`--trace` into a folder that does not exist (refused before; now "
            "created, as for every output)", (*run, "--trace", "{tmp}/no/such/t.json"), "", code=0, lines=0),
    }
    new_cli = (
        cli("out-trace-is-topology", sec_out, "`--trace` naming the topology file the run reads (overwrote it, exit 0, "
            "before)", (*run, "--topology", topo, "--trace", topo),
            "--trace {tmp}/topology.yaml: is the topology file (--topology {tmp}/topology.yaml), which this command "
            "reads; writing it would destroy it, so choose another path", files={"topology.yaml": cat.edited()}),
        cli("out-links-is-ccl", sec_out, "`--links` naming the ccl.yaml beside the topology",
            (*run, "--topology", topo, "--links", "{tmp}/ccl.yaml"),
            "--links {tmp}/ccl.yaml: is the ccl.yaml beside the topology, which this command reads",
            files={"topology.yaml": cat.edited(), "ccl.yaml": cat.raw(b"defaults: {}\n")}),
        cli("out-links-is-trace", sec_out, "`--links F --trace F` (one output lost before)",
            (*run, "--links", "{tmp}/f.json", "--trace", "{tmp}/f.json"),
            "--links {tmp}/f.json: is also the --trace file; give each output its own path"),
        cli("out-links-is-trace-in-folder", sec_out, "`--trace DIR/` and `--links DIR/<bench>.trace.json`",
            (*run, "--trace", "{tmp}/out/", "--links", "{tmp}/out/gemm-single-pe.trace.json"),
            "--links {tmp}/out/gemm-single-pe.trace.json: is also the --trace file"),
        cli("out-trace-empty", sec_out, "`--trace ''` (ignored before)", (*run, "--trace", ""),
            "--trace '': the path is empty; give a file or a folder"),
        cli("out-links-empty", sec_out, "`--links ''` (ignored before)", (*run, "--links", ""),
            "--links '': the path is empty; give a file name"),
        cli("out-trace-new-folder", sec_out, "`--trace DIR/` for a folder that does not exist (refused before, while "
            "`--links` and `--diagrams` created theirs)", (*run, "--json", "--trace", "{tmp}/new/"), "", code=0,
            lines=0),
    )
    outputs = "tests/test_outputs.py::"
    stale = RUNTIME_TESTS + "test_stale_handles.py::"
    stopped = RUNTIME_TESTS + "test_stopped_sessions.py::"
    new_api = (
        api("out-same-file", sec_out, "an output that is an input by another name: a hard link, a symlink, `sub/..`",
            "which this command reads; writing it would destroy it",
            outputs + "test_the_same_file_by_another_name_is_refused_too"),
        api("out-interrupted", sec_out, "Ctrl-C while `--trace` / `--links` is written (left a 0-byte file before): "
            "the old file is kept, exit 130", "kernbench: interrupted",
            outputs + "test_an_interrupted_write_keeps_the_old_file"),
        api("api-limit-caught", sec_budget, "a `SimulationLimitError` caught inside the `with session()` block (raised "
            "again when the block ended before); the session refuses more work, the next one is unaffected",
            "cannot go on, so open a new session for more work",
            stopped + "test_a_caught_limit_error_is_not_raised_again_when_the_block_ends"),
        api("api-session-threads", sec_api, "four threads sharing one session (KeyError: 3 or a RoutingError before): "
            "each other thread is refused and nothing is simulated for it; the owner carries on",
            "a session drives one simulation and is not thread-safe; open", RUNTIME_TESTS + "test_session_threads.py::"
            "test_other_threads_are_refused_and_the_owner_carries_on"),
        api("api-stale-arg-freed", sec_api, "a kernel writing through a `TensorArg` kept after `torch.free` (wrote "
            "into the tensor that took the memory over before)", "was freed, so its memory may now hold another tensor",
            stale + "test_a_kept_argument_of_a_freed_tensor_fails_the_kernel_and_writes_nothing"),
        api("api-stale-ref-mid-kernel", sec_api, "the host frees a tensor while a kernel holding `tl.ref(arg)` (or a "
            "block of it, or `tl.global_ref`) is still running, and a new tensor takes its memory (the kernel read "
            "the new tensor's data before)", "which was freed while the kernel ran, so its",
            stale + "test_a_reference_made_before_the_host_frees_its_tensor_dies_with_it"),
        api("api-stale-arg-foreign", sec_api, "a kernel using a `TensorArg` kept from a kernel of another session "
            "(read that session's data before)",
            "but this kernel runs in {s2.name}; pass this session's tensors as launch arguments",
            stale + "test_an_argument_kept_from_another_session_is_refused_and_reads_nothing"),
        api("kernel-generator", SEC_KERNEL, "a generator kernel (`yield` in its body; \"ran\" in 0 ns before)",
            "is a generator function (its body contains yield)",
            stopped + "test_generator_and_async_kernels_are_refused_at_launch"),
        api("kernel-async", SEC_KERNEL, "an `async def` kernel (\"ran\" in 0 ns before)",
            "is an async def function, so calling it would only create a",
            stopped + "test_generator_and_async_kernels_are_refused_at_launch"),
        api("kernel-negative-shape", SEC_KERNEL, "`tl.full((-8, 64))` (filled nothing, or a numpy ValueError out of "
            "the engine in data mode, before)", "tl.full: shape (-8, 64) is invalid;",
            TL_TESTS + "test_a_negative_shape_fails_the_kernel_on_a_pe"),
        api("kernel-slice-range", SEC_KERNEL, "`tl.ref(x)[0:1000, 60:200]` on an 8 x 64 tensor (clamped to (8, 4) "
            "silently before)", "block [0:1000, 60:200] is out of range for a tensor of shape (8, 64)",
            TL_TESTS + "test_an_out_of_range_slice_fails_the_kernel_on_a_pe"),
        api("kernel-host-call", SEC_KERNEL, "`torch.from_numpy` (any `torch.*` host call) inside a kernel (drove the "
            "simulator re-entrantly before)", "which runs on a simulated PE; host calls (torch.*) cannot",
            stopped + "test_host_calls_inside_a_kernel_are_refused"),
        api("kernel-scope-reused", SEC_KERNEL, "one `tl.scratch_scope()` entered twice (AttributeError from contextlib "
            "before)", "this scope was already entered; a scope serves one `with` block",
            TL_TESTS + "test_a_scratch_scope_entered_twice_is_refused"),
        api("kernel-scope-never-entered", SEC_KERNEL, "`tl.scratch_scope()` called without `with` (released nothing, "
            "silently, before)", "was never entered, so it released nothing",
            TL_TESTS + "test_a_scratch_scope_never_entered_is_reported_when_the_kernel_ends"),
        api("kernel-system-exit", SEC_KERNEL, "`SystemExit` raised in a kernel (escaped `torch.wait` and wedged the "
            "session before): the launch fails, the session goes on", "SystemExit(3); a kernel cannot end the program",
            stopped + "test_a_kernel_raising_system_exit_fails_its_launch_and_the_session_goes_on"),
        api("kernel-keyboard-interrupt", SEC_KERNEL, "`KeyboardInterrupt` raised in a kernel (wedged the session "
            "before): it still interrupts; the session then refuses work and closes without simulating",
            "KeyboardInterrupt interrupted the simulation at",
            stopped + "test_keyboard_interrupt_in_a_kernel_interrupts_and_the_session_refuses_more_work"),
    )
    cat.CLI_CASES = tuple(replaced.get(c.id, c) for c in cat.CLI_CASES) + new_cli
    cat.API_CASES = (*cat.API_CASES, *new_api)
    if SEC_KERNEL not in cat.SECTIONS:
        at = cat.SECTIONS.index(cat.SEC_API) + 1
        cat.SECTIONS = (*cat.SECTIONS[:at], SEC_KERNEL, *cat.SECTIONS[at:])
