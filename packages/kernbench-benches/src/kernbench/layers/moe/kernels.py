"""The kernels of the MoE layer: router GEMM, token permutation, experts and combine (see
:mod:`kernbench.layers.moe.layer` for the flow). Every run of rows and every chunk is decided on the host; the
kernels only follow the plans they are given (they never branch on tensor values)."""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.ccl.lines import accumulate, reduce_line

Runs = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ExpertChunk:
    """Rows one expert job computes in one pass: ``rows`` gathered from its source by ``src_runs`` and written to
    its output by ``out_runs`` (both ``(start, count)`` runs covering ``rows`` rows)."""

    rows: int
    src_runs: Runs
    out_runs: Runs


@dataclass(frozen=True)
class ExpertJob:
    """One expert (or one tensor-parallel part of it) on one PE: its weight ``block`` in the PE's shard of the
    stacked weights, its position ``part`` of ``tp`` in the group, the source (0: the rank's tokens, 1: the
    tokens the dispatch delivered) and output (0: routed outputs, 1: the shared expert's) and its chunks."""

    block: int
    part: int
    tp: int
    source: int
    output: int
    chunks: tuple[ExpertChunk, ...]


def split_runs(runs: Runs, limit: int) -> list[Runs]:
    """Cut ``runs`` into consecutive pieces of at most ``limit`` rows each (the last may be shorter)."""
    pieces: list[Runs] = []
    cur: list[tuple[int, int]] = []
    room = limit
    for start, count in runs:
        while count:
            take = min(count, room)
            cur.append((start, take))
            start, count, room = start + take, count - take, room - take
            if room == 0:
                pieces.append(tuple(cur))
                cur, room = [], limit
    if cur:
        pieces.append(tuple(cur))
    return pieces


def router_kernel(tl, x, w_router, logits) -> None:
    """``logits = x @ w_router`` on one PE (a composite GEMM, float32 out)."""
    tl.store(tl.ref(logits), tl.composite(tl.load(tl.ref(x)), tl.ref(w_router)))


def permute_kernel(tl, send, x, pieces) -> None:
    """Copy the tokens to the send buffer in dispatch order: each piece gathers runs of ``x``'s rows into the
    TCM and writes them as one block of ``send`` from row ``start``."""
    src, dst = tl.ref(x), tl.ref(send)
    for runs, start, rows in pieces:
        with tl.scratch_scope():
            tl.store_rows(dst, ((start, rows),), tl.load_rows(src, runs))


def expert_kernel(tl, w_gate, w_up, w_down, tokens, received, routed_out, shared_out, plan, hidden, width) -> None:
    """Every job of this PE in ``plan[(cube, pe)]``: per chunk, gather its rows, run the SwiGLU expert (three
    composite GEMMs, SiLU and product on the math engine), sum a tensor-parallel group's partials over the
    PE_IPCQ to its first PE, which scatters the rows to the output."""
    jobs = plan.get((tl.program_id(1), tl.program_id(0)), ())
    if not jobs:
        return
    sources = (tl.global_ref(tokens), tl.global_ref(received))
    outputs = (tl.global_ref(routed_out), tl.global_ref(shared_out))
    gates, ups, downs = tl.ref(w_gate), tl.ref(w_up), tl.ref(w_down)
    for job in jobs:
        b = job.block
        wg = gates[b * hidden:(b + 1) * hidden, :]
        wu = ups[b * hidden:(b + 1) * hidden, :]
        wd = downs[b * width:(b + 1) * width, :]
        for chunk in job.chunks:
            with tl.scratch_scope():
                xs = tl.load_rows(sources[job.source], chunk.src_runs)
                gate = tl.composite(xs, wg)
                up = tl.composite(xs, wu)
                acc = tl.composite(gate * tl.sigmoid(gate) * up, wd)
                if job.tp > 1:
                    reduce_line(tl, acc, tl.zeros(acc.shape, "float32"), job.part, job.tp, 0, "intra_E", "intra_W")
                if job.part == 0:
                    tl.store_rows(outputs[job.output], chunk.out_runs, acc)


def combine_kernel(tl, z, gathered, weights, shared_out, blocks, tokens, shared) -> None:
    """``z = sum_j weights[slot j] * gathered[rows of slot j]`` (plus the shared expert's rows), one block of
    tokens at a time: ``blocks`` holds, per block, its first token, its size and each slot's runs (None when the
    layer kept no rows at all). ``weights`` is ``[k * tokens, 1]``, slot-major; a dropped slot weighs 0."""
    out, w = tl.ref(z), tl.ref(weights)
    for t0, rows, slot_runs in blocks:
        with tl.scratch_scope():
            acc = tl.zeros((rows, out.shape[1]), "float32")
            for j, runs in enumerate(slot_runs):
                if runs is None:
                    continue
                with tl.scratch_scope():
                    wj = tl.load(w[j * tokens + t0:j * tokens + t0 + rows, :])
                    accumulate(tl, acc, tl.load_rows(tl.global_ref(gathered), runs) * wj)
            if shared:
                with tl.scratch_scope():
                    accumulate(tl, acc, tl.load(tl.ref(shared_out)[t0:t0 + rows, :]))
            tl.store(out[t0:t0 + rows, :], acc)
