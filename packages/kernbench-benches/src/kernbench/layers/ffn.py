"""A dense feed-forward layer (SwiGLU), tensor-parallel over the PEs and cubes of a SIP and over SIPs.

``Z = (silu(X Wg) * (X Wu)) Wd`` with ``silu(a) = a * sigmoid(a)``: ``X`` is ``[M, H]`` (tokens by model
width), ``Wg`` and ``Wu`` are ``[H, F]`` and ``Wd`` is ``[F, H]``. The feed-forward width ``F`` splits into
``t = world * cubes * pes`` equal column blocks: the shard holding block ``s`` computes
``(silu(X Wg[:, s]) * (X Wu[:, s])) Wd[s, :]``, a partial ``Z``, and the partials sum to ``Z`` (Megatron's
column- then row-parallel split, so no communication is needed before the sum).

Inside a SIP every PE of the ``cubes x pes`` group runs one kernel: three composite GEMMs (gate, up, down) and the
SiLU and product on the math engine, in TCM. The partials are then summed over the PE_IPCQ in the kernel: along
each row of a cube's PE grid (2 x 4 by default) to its first column, down that column to PE 0, then along each row
of the cube group to its first column and down to cube 0, which stores ``Z``. With several SIPs, each rank's sum
is copied into an all-reduce buffer on PE 0 of its first cube and ``torch.distributed.all_reduce`` adds the ranks'
sums (so every rank ends with the whole ``Z``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernbench.ccl import install
from kernbench.ccl.lines import reduce_line
from kernbench.ccl.neighbours import intercube_mesh, intra_cube, merge, pe_grid_cols
from kernbench.components.launch import LaunchResult
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.topology.errors import KernbenchError


class FfnConfigError(KernbenchError):
    """An FFN layer's shapes or placement do not fit the tensor-parallel split or the topology."""


@dataclass(frozen=True)
class FfnResult:
    """The outcome of :func:`swiglu_ffn` on one SIP: ``out`` (``[M, H]`` float32 in data mode, else None),
    ``latency_ns`` (first PE entering the FFN kernel to the last leaving it), and the kernel's launch result."""

    out: np.ndarray | None
    latency_ns: float
    launch: LaunchResult


def _grid(n: int, width: int, what: str) -> tuple[int, int]:
    """(columns, rows) of ``n`` units laid row-major ``width`` to a row: a prefix of one row, or whole rows."""
    if n <= width:
        return n, 1
    if n % width:
        raise FfnConfigError(f"{what} = {n}: use at most {width} or a multiple of {width} (whole rows of the grid)")
    return width, n // width


def _ffn_kernel(tl, x, wg, wu, wd, z, grid_cols, pe_cols, pe_rows, cube_cols, cube_rows) -> None:
    """One shard's SwiGLU partial, then the in-SIP sum of the partials to PE 0 of cube 0 (see the module)."""
    pe, cube = tl.program_id(0), tl.program_id(1)
    xs = tl.load(tl.ref(x))
    gate = tl.composite(xs, tl.ref(wg))
    up = tl.composite(xs, tl.ref(wu))
    hidden = gate * tl.sigmoid(gate) * up
    acc = tl.composite(hidden, tl.ref(wd))
    buf = tl.zeros(acc.shape, "float32")
    row, col = divmod(pe, grid_cols)
    reduce_line(tl, acc, buf, col, pe_cols, 0, "intra_E", "intra_W")
    if col == 0:
        reduce_line(tl, acc, buf, row, pe_rows, 0, "intra_S", "intra_N")
    if pe != 0:
        return
    cy, cx = divmod(cube, cube_cols)
    reduce_line(tl, acc, buf, cx, cube_cols, 0, "E", "W")
    if cx == 0:
        reduce_line(tl, acc, buf, cy, cube_rows, 0, "S", "N")
    if cube == 0:
        tl.store(tl.ref(z), acc)


def _copy_kernel(tl, dst, src) -> None:
    tl.store(tl.ref(dst), tl.load(tl.ref(src)))


def _check(torch: RuntimeContext, x, wg, wu, wd, world: int, pes: int, cubes: int) -> tuple[int, int, int, int]:
    spec = torch.spec
    if x.ndim != 2 or wg.ndim != 2 or wu.ndim != 2 or wd.ndim != 2:
        raise FfnConfigError("swiglu_ffn: x, w_gate, w_up and w_down must be 2-D arrays")
    m, h = x.shape
    if wg.shape != wu.shape or wg.shape[0] != h or wd.shape != (wg.shape[1], h):
        raise FfnConfigError(f"swiglu_ffn: shapes do not chain: x {x.shape}, w_gate {wg.shape}, w_up {wu.shape}, "
                             f"w_down {wd.shape}; need [M, H], [H, F], [H, F], [F, H]")
    if not 1 <= pes <= spec.pes_per_cube:
        raise FfnConfigError(f"swiglu_ffn: pes = {pes}; use 1 to {spec.pes_per_cube}")
    if not 1 <= cubes <= spec.cubes_per_sip:
        raise FfnConfigError(f"swiglu_ffn: cubes = {cubes}; use 1 to {spec.cubes_per_sip}")
    pe_cols, pe_rows = _grid(pes, pe_grid_cols(spec), "pes")
    cube_cols, cube_rows = _grid(cubes, spec.sip.cube_mesh.w, "cubes")
    shards = world * cubes * pes
    if wg.shape[1] % shards:
        raise FfnConfigError(f"swiglu_ffn: the FFN width F = {wg.shape[1]} does not split into {shards} equal "
                             f"blocks ({world} rank(s) x {cubes} cube(s) x {pes} PE(s)); use a multiple of {shards}")
    slot = spec.pe.ipcq.slot_bytes
    if m * h * 4 > slot:
        raise FfnConfigError(f"swiglu_ffn: a partial output of {m} x {h} float32 values ({m * h * 4} B) does not fit "
                             f"one PE_IPCQ slot ({slot} B); use fewer tokens or a narrower model")
    return pe_cols, pe_rows, cube_cols, cube_rows


def swiglu_ffn(torch: RuntimeContext, x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray, *,
               pes: int = 1, cubes: int = 1) -> FfnResult:
    """Run the SwiGLU FFN on this SIP's first ``cubes`` cubes and their first ``pes`` PEs (numpy float16 inputs,
    whole weights: each shard takes its own block). Inside a process group of ``world`` ranks, rank ``r`` takes the
    ``r``-th ``1/world`` of ``F`` and the result is all-reduced, so every rank returns the whole ``Z``."""
    dist = getattr(torch, "distributed", None)
    grouped = dist is not None and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if grouped else (0, 1)
    pe_cols, pe_rows, cube_cols, cube_rows = _check(torch, x, w_gate, w_up, w_down, world, pes, cubes)
    f_rank = w_gate.shape[1] // world
    cols = slice(rank * f_rank, (rank + 1) * f_rank)
    m, h = x.shape
    sip = torch.device
    replicated = DPPolicy(num_cubes=cubes, num_pes=pes)
    by_column = DPPolicy(cube="column_wise", pe="column_wise", num_cubes=cubes, num_pes=pes)
    by_row = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=cubes, num_pes=pes)
    spec = torch.spec
    # a process group has already linked PE 0 of every cube to its mesh neighbours; add the in-cube links to it
    table = merge(*(intra_cube(spec, sip, c) for c in range(cubes) if pes > 1),
                  intercube_mesh(spec, sip, 0) if cubes > 1 and not grouped else {})
    ring = install(torch, table, "tcm", extend=grouped) if table else None
    owned = [torch.from_numpy(x, replicated),
             torch.from_numpy(np.ascontiguousarray(w_gate[:, cols]), by_column),
             torch.from_numpy(np.ascontiguousarray(w_up[:, cols]), by_column),
             torch.from_numpy(np.ascontiguousarray(w_down[cols, :]), by_row),
             torch.zeros((cubes * pes * m, h), "float32", by_row)]
    try:
        launch = torch.wait(torch.launch("swiglu_ffn", _ffn_kernel, *owned, pe_grid_cols(spec), pe_cols, pe_rows,
                                           cube_cols, cube_rows))
        latency = _window(launch)
        result = owned[-1]
        if grouped and world > 1:
            total = torch.empty((m, h), "float32", DPPolicy(num_cubes=1, num_pes=1))
            owned.append(total)
            torch.wait(torch.launch("swiglu_ffn_gather", _copy_kernel, total, owned[-2]))
            dist.all_reduce(total)
            result = total
        out = torch.peek(result)[:m].astype(np.float32) if torch.data else None  # no transfer: timing as without
    finally:
        for t in owned:
            torch.free(t)
        if ring is not None:
            ring.remove()
    return FfnResult(out, latency, launch)


def _window(launch: LaunchResult) -> float:
    reports = list(launch.reports.values())
    return max(r.exec_start_ns + r.exec_ns for r in reports) - min(r.exec_start_ns for r in reports)


def swiglu_reference(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """``(silu(X Wg) * (X Wu)) Wd`` in float32."""
    x32 = x.astype(np.float32)
    g = x32 @ w_gate.astype(np.float32)
    u = x32 @ w_up.astype(np.float32)
    return (g / (1.0 + np.exp(-g)) * u) @ w_down.astype(np.float32)
