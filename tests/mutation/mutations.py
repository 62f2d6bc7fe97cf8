"""The curated mutation list run by ``tests/mutation/mutate.py``.

Each :class:`Mutation` is one realistic one-line bug: the repository-relative
``file`` it lives in, the exact ``original`` text (which must occur exactly
once in that file, so the script knows where to apply it), the
``replacement`` text, a one-line ``description`` of the bug, and the small
pytest ``selection`` (node ids or paths, relative to the repository root)
that should fail while the bug is in place. A snippet may span a few lines to
pin its place, but only one line of behaviour changes.

``issue`` marks the mutations the mutation-testing issue names explicitly
(their killing tests are written separately; they may survive for a while).
"""

from __future__ import annotations

from dataclasses import dataclass

LAYERS = "packages/kernbench-benches/src/kernbench/layers"
STUDIES = "packages/kernbench-studies/src/kernbench/studies"
CCL = "packages/kernbench-ccl/src/kernbench/ccl"
COMPONENTS = "packages/kernbench-components/src/kernbench/components"
RUNTIME = "packages/kernbench-runtime/src/kernbench/runtime"
SIM = "packages/kernbench-sim/src/kernbench/sim"
TOPOLOGY = "packages/kernbench-topology/src/kernbench/topology"
CLI = "packages/kernbench/src/kernbench/cli"

BENCHES_TESTS = "packages/kernbench-benches/tests"
STUDIES_TESTS = "packages/kernbench-studies/tests"
CCL_TESTS = "packages/kernbench-ccl/tests"
COMPONENTS_TESTS = "packages/kernbench-components/tests"
RUNTIME_TESTS = "packages/kernbench-runtime/tests"
SIM_TESTS = "packages/kernbench-sim/tests"
TOPOLOGY_TESTS = "packages/kernbench-topology/tests"
CLI_TESTS = "packages/kernbench/tests"

#: The eight Python distributions, keyed by the folder under ``packages/`` (every one must have a mutation).
PACKAGES = ("kernbench-topology", "kernbench-sim", "kernbench-components", "kernbench-runtime", "kernbench-ccl",
            "kernbench-benches", "kernbench-studies", "kernbench")
#: Distributions whose behaviour is compiled code, which the runner cannot rebuild per mutation: kernbench-accel's
#: guard is its equivalence with the pure-Python calendar (packages/kernbench-sim/tests/test_accel_calendar.py).
COMPILED = ("kernbench-accel",)


@dataclass(frozen=True)
class Mutation:
    """One mutation: where, what it replaces, why it is a plausible bug, and which tests should catch it."""

    id: str
    file: str
    original: str
    replacement: str
    description: str
    selection: tuple[str, ...]
    issue: bool = False

    @property
    def package(self) -> str:
        """The folder under ``packages/`` that holds the mutated file."""
        return self.file.split("/")[1]


MUTATIONS: tuple[Mutation, ...] = (
    # ------------------------------------------------------------------ named by the issue
    Mutation(
        "benches-ring-causal-skip",
        f"{LAYERS}/attention/ring_kernel.py",
        "if config.causal and a.k0 > rb.pmax:",
        "if config.causal and a.k0 >= rb.pmax:",
        "ring prefill skips a KV tile whose first key sits exactly at the block's last row position",
        (f"{BENCHES_TESTS}/test_gqa_prefill.py",),
        issue=True,
    ),
    Mutation(
        "benches-results-accept-nonfinite",
        f"{STUDIES}/results.py",
        "if isinstance(value, float) and not math.isfinite(value):",
        "if isinstance(value, int) and not math.isfinite(value):",
        "results.load checks the wrong type, so NaN and inf float values pass validation",
        (f"{STUDIES_TESTS}/test_studies_report.py::test_results_round_trip_and_csv",
         f"{STUDIES_TESTS}/test_studies_report.py::test_a_bad_results_file_is_a_schema_error",
         f"{STUDIES_TESTS}/test_studies_report.py::test_a_non_finite_point_value_is_refused_by_name",
         f"{STUDIES_TESTS}/test_studies_report.py::test_missing_or_broken_results_files"),
        issue=True,
    ),
    Mutation(
        "benches-grounding-escaped-percent",
        f"{STUDIES}/report/grounding.py",
        '_COMMENT = re.compile(r"(?<!\\\\)%.*$", re.MULTILINE)',
        '_COMMENT = re.compile(r"%.*$", re.MULTILINE)',
        "the grounding check treats an escaped \\% as a comment and hides the numbers after it",
        (f"{STUDIES_TESTS}/test_studies_report.py::test_the_report_sections_contain_no_hand_typed_number",
         f"{STUDIES_TESTS}/test_studies_report.py::test_grounding_catches_a_planted_latency",
         f"{STUDIES_TESTS}/test_studies_report.py::test_grounding_allow_list",
         f"{STUDIES_TESTS}/test_studies_report.py::test_grounding_tells_an_escaped_percent_from_a_comment"),
        issue=True,
    ),
    Mutation(
        "benches-allreduce-model-drops-alpha",
        f"{STUDIES}/allreduce_model.py",
        "fixed = self.c + self.o + wr.alpha_ns + rd.alpha_ns",
        "fixed = self.c + self.o + rd.alpha_ns",
        "the α–β model's message term drops the write route's latency α_w",
        (f"{STUDIES_TESTS}/test_studies_allreduce.py",),
        issue=True,
    ),
    Mutation(
        "topology-heatmap-colourbar-100",
        f"{TOPOLOGY}/heatmap.py",
        "ScalarMappable(Normalize(0.0, 100.0 * vmax), cmap)",
        "ScalarMappable(Normalize(0.0, 100.0), cmap)",
        "the heatmap colour bar runs to 100 % instead of the run's busiest link",
        (f"{TOPOLOGY_TESTS}/test_heatmap.py",),
        issue=True,
    ),
    Mutation(
        "cli-web-host-prefix",
        f"{CLI}/web/server.py",
        "            if host in allowed_hosts:",
        "            if any(host.startswith(h) for h in allowed_hosts):",
        "the web server's Host check accepts any header that merely starts with a loopback name:port",
        ("tests/test_web_server.py",),
        issue=True,
    ),
    Mutation(
        "topology-yaml-alias-off-by-one",
        f"{TOPOLOGY}/safe_yaml.py",
        "if self.aliases > self.max_aliases:",
        "if self.aliases >= self.max_aliases:",
        "the safe YAML reader refuses a document holding exactly max_aliases aliases",
        (f"{TOPOLOGY_TESTS}/test_safe_yaml.py",),
        issue=True,
    ),
    Mutation(
        "runtime-launch-checks-first-tensor-only",
        f"{RUNTIME}/launching.py",
        "        for t in tensors:\n            self._live(t, f\"launch {name!r}\")",
        "        for t in tensors[:1]:\n            self._live(t, f\"launch {name!r}\")",
        "launch checks session ownership (and liveness) of its first tensor argument only",
        (f"{RUNTIME_TESTS}/test_sessions.py",),
        issue=True,
    ),
    Mutation(
        "sim-max-sim-ns-after-last-event",
        f"{SIM}/engine.py",
        "        except EmptySchedule:\n            check(self)\n",
        "        except EmptySchedule:\n            pass\n",
        "the budgets (max_sim_ns among them) are not checked once the run's last event has been processed",
        (f"{RUNTIME_TESTS}/test_budgets.py", f"{SIM_TESTS}/test_engine_api.py", f"{SIM_TESTS}/test_engine_budgets.py"),
        issue=True,
    ),
    Mutation(
        "components-dispatch-cycles-times-clock",
        f"{COMPONENTS}/pe/cpu.py",
        "cost = cycles / self.clock_ghz",
        "cost = cycles * self.clock_ghz",
        "PE_CPU dispatch cost multiplies cycles by the clock (GHz) instead of dividing",
        (f"{COMPONENTS_TESTS}/test_dispatch_cost.py",),
        issue=True,
    ),
    Mutation(
        "cli-web-asset-traversal",
        f"{CLI}/web/server.py",
        "            elif path == \"/api/benches\" and state.allow_runs:\n"
        "                self._guard(lambda: self._json(HTTPStatus.OK, state.benches()))\n",
        "            elif path == \"/api/benches\" and state.allow_runs:\n"
        "                self._guard(lambda: self._json(HTTPStatus.OK, state.benches()))\n"
        "            elif os.path.isfile(p := os.path.join(os.path.dirname(__file__), \"assets\", "
        "path.lstrip(\"/\"))):\n"
        "                self._send(HTTPStatus.OK, Path(p).read_bytes(), TYPES.get(Path(p).suffix, \"text/plain\"))\n",
        "a static-file fallback joins the request path onto the assets folder, so ../ reads files outside it",
        ("tests/test_web_server.py",),
        issue=True,
    ),
    # ------------------------------------------------------------------ topology
    Mutation(
        "topology-corridor-entry-leg-reversed",
        f"{TOPOLOGY}/routing.py",
        "legs.append((b.sip, io, b.cube))",
        "legs.append((b.sip, b.cube, io))",
        "the XY corridor into a SIP is walked from the destination cube, i.e. Y before X from the IO cube",
        (f"{TOPOLOGY_TESTS}/test_routing.py",),
    ),
    Mutation(
        "topology-resolve-range-end-off-by-one",
        f"{TOPOLOGY}/resolver.py",
        "end = a.offset + max(nbytes, 1) - 1",
        "end = a.offset + max(nbytes, 1)",
        "address resolution takes one byte past a range's end, refusing transfers that end exactly at a slice end",
        (f"{TOPOLOGY_TESTS}/test_address.py",),
    ),
    Mutation(
        "topology-decode-cube-mask",
        f"{TOPOLOGY}/address.py",
        "cube = (addr >> CUBE_SHIFT) & ((1 << CUBE_BITS) - 1)",
        "cube = (addr >> CUBE_SHIFT) & ((1 << TYPE_BITS) - 1)",
        "decode masks the cube field with the 3-bit type width, losing cubes 8 and above",
        (f"{TOPOLOGY_TESTS}/test_address.py",),
    ),
    Mutation(
        "topology-spec-attach-cube-bound",
        f"{TOPOLOGY}/spec_loader.py",
        "if attach >= spec.cubes_per_sip or attach % spec.sip.cube_mesh.w:",
        "if attach > spec.cubes_per_sip or attach % spec.sip.cube_mesh.w:",
        "spec validation accepts sip.io.attach_cube equal to the cube count (one past the last cube)",
        (f"{TOPOLOGY_TESTS}/test_spec.py",),
    ),
    Mutation(
        "topology-dijkstra-tie-break",
        f"{TOPOLOGY}/routing.py",
        "if nd < get(nb, inf):",
        "if nd <= get(nb, inf):",
        "Dijkstra lets a later equal-length path replace the first one, so ties no longer follow edge order",
        (f"{TOPOLOGY_TESTS}/test_routing.py", f"{TOPOLOGY_TESTS}/test_routing_search.py"),
    ),
    # ------------------------------------------------------------------ sim
    Mutation(
        "sim-wormhole-head-skips-first-flit",
        f"{SIM}/fabric.py",
        "        head = start + flit_ns\n",
        "        head = start\n",
        "a multi-flit packet's head leaves a wire before its first flit has been serialised",
        (f"{SIM_TESTS}/test_fabric_timing.py",),
    ),
    Mutation(
        "sim-flit-catchup-sign",
        f"{SIM}/fabric.py",
        "d_in = pkt.delta - wait / (m - 1) if m > 1 else 0.0",
        "d_in = pkt.delta + wait / (m - 1) if m > 1 else 0.0",
        "a packet that queued spreads its flits further apart instead of catching up (wrong sign)",
        (f"{SIM_TESTS}/test_flit_catchup.py",),
    ),
    Mutation(
        "sim-busy-counts-serialisation-only",
        f"{SIM}/fabric.py",
        "wire.busy_ns += end - start",
        "wire.busy_ns += serial",
        "a wire's busy time counts bytes/bw only, not the flit spacing a slower upstream link imposed",
        (f"{SIM_TESTS}/test_links.py", f"{SIM_TESTS}/test_fabric_timing.py", f"{SIM_TESTS}/test_mutation_gaps.py"),
    ),
    Mutation(
        "sim-link-bytes-padded-to-flits",
        f"{SIM}/fabric.py",
        "    wire.busy_ns += end - start\n    wire.bytes += nbytes\n",
        "    wire.busy_ns += end - start\n    wire.bytes += m * round(wire.flit_ns * wire.bw)\n",
        "a wire's byte counter adds whole flits, counting the padding of a short last flit as payload",
        (f"{SIM_TESTS}/test_links.py",),
    ),
    Mutation(
        "sim-split-packets-floor-flits",
        f"{SIM}/fabric.py",
        "out.append(Packet(transfer, index, n, -(-n // flit_bytes), offset))",
        "out.append(Packet(transfer, index, n, n // flit_bytes, offset))",
        "a packet's flit count rounds down, so a short last flit is lost (and a sub-flit packet has none)",
        (f"{SIM_TESTS}/test_fabric_timing.py",),
    ),
    # ------------------------------------------------------------------ components
    Mutation(
        "components-dma-channel-overcommit",
        f"{COMPONENTS}/pe/dma.py",
        "if self.busy[channel] < self.capacity[channel]:",
        "if self.busy[channel] <= self.capacity[channel]:",
        "a DMA channel starts one more command than it has channels",
        (f"{COMPONENTS_TESTS}/test_composite.py::test_more_dma_read_channels_speed_up_streaming",
         f"{COMPONENTS_TESTS}/test_lazy_and_scopes.py", f"{COMPONENTS_TESTS}/test_kernel_exec.py"),
    ),
    Mutation(
        "components-math-drops-ceil",
        f"{COMPONENTS}/pe/engines.py",
        "return math.ceil(elements / self.lanes) * self.ns_per_step",
        "return elements / self.lanes * self.ns_per_step",
        "the vector engine charges fractional cycles for a partly filled lane group",
        (f"{COMPONENTS_TESTS}/test_kernel_exec.py", f"{COMPONENTS_TESTS}/test_composite.py",
         f"{COMPONENTS_TESTS}/test_mutation_gaps.py"),
    ),
    Mutation(
        "components-gemm-macs-not-flops",
        f"{COMPONENTS}/tiling.py",
        "return 2.0 * tm * tn * tk / (peak_tflops * 1e3)",
        "return tm * tn * tk / (peak_tflops * 1e3)",
        "GEMM tile time counts MACs against a FLOP/s peak (drops the factor 2)",
        (f"{COMPONENTS_TESTS}/test_tiling.py",),
    ),
    Mutation(
        "components-tcm-ignores-tail-flit",
        f"{COMPONENTS}/pe/tcm.py",
        "end = max(pkt.t_tail, start + pkt.nbytes / self.write_bw)",
        "end = start + pkt.nbytes / self.write_bw",
        "the TCM finishes absorbing a packet before its last flit has even arrived",
        (f"{COMPONENTS_TESTS}/test_datapath.py", f"{COMPONENTS_TESTS}/test_ipcq.py",
         f"{COMPONENTS_TESTS}/test_mutation_gaps.py"),
    ),
    Mutation(
        "components-ipcq-extra-credit",
        f"{COMPONENTS}/pe/ipcq.py",
        "deque(range(self.depth))",
        "deque(range(self.depth + 1))",
        "a sender starts with one credit more than the peer's ring has slots",
        (f"{COMPONENTS_TESTS}/test_ipcq.py",),
    ),
    Mutation(
        "components-bias-sliced-by-rows",
        f"{COMPONENTS}/pe/math_kinds.py",
        "return x + operand[c0:c0 + x.shape[1]]",
        "return x + operand[r0:r0 + x.shape[1]]",
        "the bias epilogue slices its vector by the block's row offset instead of its column offset",
        (f"{COMPONENTS_TESTS}/test_composite.py::test_epilogue_scopes_match_numpy",
         f"{COMPONENTS_TESTS}/test_flat_ops.py"),
    ),
    # ------------------------------------------------------------------ runtime
    Mutation(
        "runtime-free-adjacent-rejected",
        f"{RUNTIME}/allocator.py",
        "if (prev_end is not None and prev_end > offset) or (has_next and starts[i] < end):",
        "if (prev_end is not None and prev_end >= offset) or (has_next and starts[i] < end):",
        "freeing a range that starts right where a free block ends is taken for a double free",
        (f"{RUNTIME_TESTS}/test_allocator.py",),
    ),
    Mutation(
        "runtime-split-remainder-to-last",
        f"{RUNTIME}/placement.py",
        "n = base + (1 if i < extra else 0)",
        "n = base + (1 if i >= parts - extra else 0)",
        "an uneven split gives the extra rows/columns to the last parts instead of the first (array_split order)",
        (f"{RUNTIME_TESTS}/test_placement.py",),
    ),
    Mutation(
        "runtime-cube-range-boundary",
        f"{RUNTIME}/placement.py",
        "if start + num_cubes > cubes_per_sip:",
        "if start + num_cubes >= cubes_per_sip:",
        "a placement that ends on the SIP's last cube is refused as running past it",
        (f"{RUNTIME_TESTS}/test_placement.py",),
    ),
    # ------------------------------------------------------------------ ccl
    Mutation(
        "ccl-allreduce-root-right-of-centre",
        f"{CCL}/algorithms/lrab_hierarchical_allreduce.py",
        "rx, ry = (cube_w - 1) // 2, (cube_h - 1) // 2",
        "rx, ry = cube_w // 2, cube_h // 2",
        "the all-reduce roots the mesh one cube right/below the centre on even meshes (another reduction order)",
        (f"{CCL_TESTS}/test_allreduce_order.py",),
    ),
    Mutation(
        "ccl-exchange-steps-swapped",
        f"{CCL}/algorithms/lrab_hierarchical_allreduce.py",
        "steps_e, steps_w = n // 2, (n - 1) // 2",
        "steps_e, steps_w = (n - 1) // 2, n // 2",
        "the inter-SIP ring exchange streams the longer half westwards instead of eastwards",
        (f"{CCL_TESTS}/test_allreduce_order.py", f"{CCL_TESTS}/test_mutation_gaps.py"),
    ),
    Mutation(
        "ccl-global-s-uses-rows",
        "packages/kernbench-topology/src/kernbench/topology/sip_topologies/base.py",
        "else pos * cols + x",
        "else pos * rows + x",
        "the global_S neighbour is computed with the row count as the row stride (wrong on non-square grids)",
        (f"{CCL_TESTS}/test_neighbours.py",),
    ),
    Mutation(
        "ccl-intra-cube-row-wrap",
        f"{CCL}/neighbours.py",
        "if x + 1 < cols and p + 1 < n:",
        "if p + 1 < n:",
        "intra_E links the last PE of a cube row to the first PE of the next row",
        (f"{CCL_TESTS}/test_neighbours.py",),
    ),
    # ------------------------------------------------------------------ benches
    Mutation(
        "benches-gemm-model-pipeline-count",
        f"{STUDIES}/gemm_model.py",
        "sum(first[:s]) + totals[s]",
        "sum(first[:s + 1]) + totals[s]",
        "the GEMM pipeline bound counts the first tile's time at the bottleneck stage twice (fill and service)",
        (f"{STUDIES_TESTS}/test_gemm_model.py", f"{STUDIES_TESTS}/test_studies_gemm.py"),
    ),
    Mutation(
        "benches-cache-digest-ignores-bytes",
        f"{STUDIES}/cache.py",
        'h.update(name.encode() + b"\\0" + hashlib.sha256(path.read_bytes()).digest())',
        'h.update(name.encode() + b"\\0")',
        "the study cache's source digest hashes file names only, so an edited source reuses stale results",
        (f"{STUDIES_TESTS}/test_studies_runner.py", f"{STUDIES_TESTS}/test_mutation_gaps.py"),
    ),
    Mutation(
        "benches-runner-out-dir-swapped",
        f"{STUDIES}/runner.py",
        "return Path(options.out) / study.name if several else Path(options.out)",
        "return Path(options.out) / study.name if not several else Path(options.out)",
        "--out gets a per-study subfolder for one study and none when several studies share it",
        (f"{STUDIES_TESTS}/test_studies_runner.py", f"{STUDIES_TESTS}/test_mutation_gaps.py"),
    ),
    # ------------------------------------------------------------------ cli
    Mutation(
        "cli-probe-write-drain-drops-burst",
        f"{CLI}/probe.py",
        "drain = s + max((n_flits - 1) * d, ((n_flits - 1) % k) * d + ((n_flits - 1) // k) * s)",
        "drain = max((n_flits - 1) * d, ((n_flits - 1) % k) * d + ((n_flits - 1) // k) * s)",
        "the probe's write formula forgets the last burst's service time at the HBM controller",
        (f"{CLI_TESTS}/test_probe_unit.py",),
    ),
    Mutation(
        "cli-run-device-off-by-one",
        f"{CLI}/run_cmd.py",
        "int(arg) >= sips:",
        "int(arg) > sips:",
        "kernbench run accepts --device N for N equal to the SIP count",
        (f"{CLI_TESTS}/test_cli_unit.py::test_devices", f"{CLI_TESTS}/test_cli_unit.py::test_bad_devices",
         "tests/test_cli_run.py"),
    ),
)
