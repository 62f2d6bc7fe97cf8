"""The dense SwiGLU feed-forward layer (:mod:`kernbench.layers.ffn`), tensor-parallel over PEs, cubes and SIPs.

Parameters (``-p NAME=VALUE`` or the environment variable):

- ``PRESET`` (``FFN_PRESET``): a shape of :data:`PRESETS` (``small``, the default; ``mixtral``; ``deepseek``) that
  sets ``TOKENS``, ``HIDDEN`` and ``FFN`` unless they are given;
- ``TOKENS`` (``FFN_TOKENS``), ``HIDDEN`` (``FFN_HIDDEN``), ``FFN`` (``FFN_FFN``): rows of X, model width H and
  feed-forward width F (0: the preset's);
- ``PES`` (``FFN_PES``) and ``CUBES`` (``FFN_CUBES``): the PEs and cubes of each SIP the layer is split over;
- ``SIPS`` (``FFN_SIPS``): ``1`` runs on SIP 0 alone, ``all`` (the default) splits F over every SIP of the
  topology as well and all-reduces the result.

The model presets keep the ratio of their real layer (Mixtral-8x7B-like: H 4096, F 14336; DeepSeek-V3-like
dense layer: H 7168, F 18432) scaled down by :data:`SCALE` in both widths, so that a partial output fits one
PE_IPCQ slot and a run takes seconds; the scaled shape is printed in the metrics. ``F`` must split into
``SIPs x CUBES x PES`` equal blocks: the ``small`` shape's 768 does on the shipped 2-, 6- and 16-SIP topologies at
the default placement; a preset that does not gives a one-line error naming the sizes. Reported metrics:
``ffn_ns`` (first PE entering the FFN kernel to the last leaving it, the in-SIP reduction included; the largest
over the ranks), ``allreduce_ns`` (the cross-SIP all-reduce, 0 on one SIP), and the shape. With ``--data`` every
rank's output is checked against numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import kernbench.ccl  # noqa: F401  (adds torch.distributed and torch.multiprocessing)
from kernbench.ccl import collective_span_ns
from kernbench.layers.ffn import FfnConfigError, swiglu_ffn, swiglu_reference
from kernbench.runtime.bench import BenchError, bench
from kernbench.runtime.params import Param


@dataclass(frozen=True)
class Preset:
    """A layer shape: tokens, model width H, feed-forward width F (after scaling)."""

    tokens: int
    hidden: int
    ffn: int


#: Both widths of the model presets are divided by this.
SCALE = 16
PRESETS = {
    "small": Preset(16, 64, 768),
    "mixtral": Preset(8, 4096 // SCALE, 14336 // SCALE),
    "deepseek": Preset(8, 7168 // SCALE, 18432 // SCALE),
}
PARAMS = (
    Param("PRESET", str, "small", "layer shape preset", choices=tuple(PRESETS), env="FFN_PRESET"),
    Param("TOKENS", int, 0, "rows of X (0: the preset's)", lo=0, hi=4096, env="FFN_TOKENS"),
    Param("HIDDEN", int, 0, "model width H (0: the preset's)", lo=0, hi=16384, env="FFN_HIDDEN"),
    Param("FFN", int, 0, "feed-forward width F (0: the preset's)", lo=0, hi=65536, env="FFN_FFN"),
    Param("PES", int, 8, "PEs per cube the layer is split over", lo=1, hi=64, env="FFN_PES"),
    Param("CUBES", int, 2, "cubes per SIP the layer is split over", lo=1, hi=64, env="FFN_CUBES"),
    Param("SIPS", str, "all", "1: SIP 0 alone; all: every SIP, with an all-reduce", choices=("1", "all"),
          env="FFN_SIPS"),
)


@bench(name="ffn", description="dense SwiGLU FFN, tensor-parallel over PEs, cubes and SIPs", params=PARAMS)
def run(torch, p):
    """Run the layer once (on every rank with ``SIPS=all``) and report its time; check it against numpy in data
    mode."""
    preset = PRESETS[p.PRESET]
    m, h, f = p.TOKENS or preset.tokens, p.HIDDEN or preset.hidden, p.FFN or preset.ffn
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((m, h)) * 0.5).astype(np.float16)
    wg, wu = ((rng.standard_normal((h, f)) / np.sqrt(h)).astype(np.float16) for _ in range(2))
    wd = (rng.standard_normal((f, h)) / np.sqrt(f)).astype(np.float16)
    results = {}

    def layer():
        try:
            return swiglu_ffn(torch, x, wg, wu, wd, pes=p.PES, cubes=p.CUBES)
        except FfnConfigError as exc:
            raise BenchError(f"ffn: {exc}") from None

    if p.SIPS == "1":
        results[0] = layer()
        allreduce = 0.0
    else:
        def worker(rank: int) -> None:
            torch.distributed.init_process_group(backend="ahbm")
            results[rank] = layer()

        torch.multiprocessing.spawn(worker, nprocs=torch.spec.system.sips.count)
        allreduce = collective_span_ns([res for _, res in torch.distributed.results])
    torch.report_metric("ffn_ns", max(r.latency_ns for r in results.values()))
    torch.report_metric("allreduce_ns", allreduce)
    for name, value in (("tokens", m), ("hidden", h), ("ffn", f)):
        torch.report_metric(name, value)
    if torch.data:
        want = swiglu_reference(x, wg, wu, wd)
        for rank, r in results.items():
            err = float(np.abs(r.out - want).max())
            if err > 1e-3 * max(1.0, float(np.abs(want).max())):
                raise BenchError(f"ffn: rank {rank} differs from numpy by {err:.3g}")
