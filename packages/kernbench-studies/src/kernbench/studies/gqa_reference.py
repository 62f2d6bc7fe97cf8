"""The earlier report's GQA workloads on our hardware model, with the earlier team's kernels or with ours.

The earlier report measured four headline panels and one sweep panel with its
own kernels. To tell "a different kernel" from "a different hardware model"
in every difference, each of those workloads runs here twice on the same
model: once with the earlier team's unmodified kernel files (pointer form,
earlier host spellings, ADR 0035) and once with the attention library's
kernels given the same shapes and the same mapping onto cubes and PEs.

The earlier kernels are the user's input, not part of KernBench: the folder
holding their ``_gqa_attention_<name>.py`` files is named by the environment
variable :data:`ENV`. Without it the study runs only our kernels. Each
earlier point carries the SHA-256 of its kernel file, so an edited kernel
reruns its points and the results say exactly which file made them.

The workloads, as the earlier report's results file describes them (``d`` =
``d_head``, one KV head throughout):

====================================  ============================  ==========================================
workload                              earlier kernel                mapping
====================================  ============================  ==========================================
``single_user_prefill_gqa``           ``prefill_short``             1 cube x 1 PE, 1 query head, Tq 4, S 16
``multi_user_prefill_gqa``            ``prefill_long``              ring over 4 cubes, a query head per cube
``single_user_decode_gqa``            ``decode_short``              8 PEs of one cube, 8 query heads, S 64
``multi_user_decode_gqa``             (not among the files)         4 cubes x 8 PEs, 8 query heads, S 128
``decode_c8_p8``                      ``decode_long_ctx_cube_sp_pe_sp``  8 cubes x 8 PEs, 8 query heads, S 128
``single_kv_group_prefill_gqa_c8_p8`` ``prefill_long``              ring over 8 cubes x 8 PEs, Tq = S = 1024, d 128
====================================  ============================  ==========================================

The earlier report's four-cube decode panel used a two-level reduce kernel
that is not among the earlier team's published kernel files; the nearest one,
``decode_long_ctx_cube_sp_pe_sp``, fixes its cube reduce to a 4 x 2 sub-mesh
(8 cubes), so it runs as the extra workload ``decode_c8_p8`` beside ours.

Whatever the earlier report called its panels, its "multi-user" panels hold
one KV head spread over C cubes: the C in their names is a cube count. Our
headline panels put C users on C separate groups of cubes; that workload
difference is why this module exists.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernbench.ccl import install
from kernbench.ccl.neighbours import Table, cube_ring, intercube_mesh, intra_cube, merge, snake_order
from kernbench.layers.attention import AttentionResult, gqa_decode, gqa_prefill
from kernbench.layers.attention.result import measure
from kernbench.runtime import DPPolicy, RuntimeContext
from kernbench.runtime.compat import earlier
from kernbench.studies.base import StudyError

#: The environment variable naming the folder of the earlier team's kernel files.
ENV = "KERNBENCH_EARLIER_KERNELS"


@dataclass(frozen=True)
class Workload:
    """One workload of the earlier report: its panel name, phase, earlier kernel file stem and mapping.

    ``cubes`` x ``pes`` is the part of SIP 0 it runs on; ``hq`` query heads (one KV head), ``tq`` query rows
    per head, ``s`` keys, head size ``d``. ``kernel`` None: the earlier kernel of this workload is not among
    the earlier team's files, so only ours runs.
    """

    name: str
    kind: str
    kernel: str | None
    cubes: int
    pes: int
    hq: int
    tq: int
    s: int
    d: int

    @property
    def ring(self) -> bool:
        """True for the ring prefill (a query head per cube, KV blocks rotating round the cubes)."""
        return self.kernel == "prefill_long"


WORKLOADS: tuple[Workload, ...] = (
    Workload("single_user_prefill_gqa", "prefill", "prefill_short", 1, 1, 1, 4, 16, 64),
    Workload("multi_user_prefill_gqa", "prefill", "prefill_long", 4, 1, 4, 4, 16, 64),
    Workload("single_user_decode_gqa", "decode", "decode_short", 1, 8, 8, 1, 64, 64),
    Workload("multi_user_decode_gqa", "decode", None, 4, 8, 8, 1, 128, 64),
    Workload("decode_c8_p8", "decode", "decode_long_ctx_cube_sp_pe_sp", 8, 8, 8, 1, 128, 64),
    Workload("single_kv_group_prefill_gqa_c8_p8", "prefill", "prefill_long", 8, 8, 8, 1024, 1024, 128),
)
#: The earlier report's four headline workloads.
HEADLINE = tuple(w.name for w in WORKLOADS[:4])
#: The earlier report's sweep panel.
SWEEP = WORKLOADS[-1].name
#: How each workload reads in a table, a figure or a sentence.
LABELS = {"single_user_prefill_gqa": "one-PE prefill", "multi_user_prefill_gqa": "4-cube ring prefill",
          "single_user_decode_gqa": "8-PE decode", "multi_user_decode_gqa": "4-cube decode",
          "decode_c8_p8": "8-cube decode", SWEEP: "8 x 8 ring prefill, Tq = S = 1024"}




def workload(name: str) -> Workload:
    """The workload called ``name``."""
    for w in WORKLOADS:
        if w.name == name:
            return w
    raise StudyError(f"gqa reference point: unknown workload {name!r}; use one of "
                     f"{', '.join(w.name for w in WORKLOADS)}")


# ------------------------------------------------------------------------------------------- the kernel files
def kernels_dir() -> Path | None:
    """The folder named by :data:`ENV`, or None when the variable is unset or empty."""
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def kernel_file(folder: Path, w: Workload) -> Path:
    """The earlier kernel file of ``w`` in ``folder``; a missing file is a one-line error."""
    path = Path(folder) / f"_gqa_attention_{w.kernel}.py"
    if not path.is_file():
        raise StudyError(f"{ENV}={folder}: {path.name} is not there; point {ENV} at the folder holding the "
                         f"earlier team's _gqa_attention_*.py kernel files, or unset it to run only ours")
    return path


def kernel_digest(path: Path) -> str:
    """SHA-256 of a kernel file's bytes (hex), which keys the study cache."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_kernel(path: Path, w: Workload):
    """Import ``gqa_attention_<kernel>_kernel`` from ``path`` without putting its folder on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(f"earlier_gqa_{w.kernel}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: report which one, in one line
        raise StudyError(f"{path}: importing the earlier kernel failed: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, f"gqa_attention_{w.kernel}_kernel", None)
    if fn is None:
        raise StudyError(f"{path}: no function gqa_attention_{w.kernel}_kernel")
    return fn


# ------------------------------------------------------------------------------------------------ placement
def ring_order(spec, cubes: int) -> list[int]:
    """Cubes ``0..cubes-1`` in ring order: along the first mesh row, or snaking through whole rows (every step
    one mesh hop) when they fill an even number of rows."""
    width = spec.sip.cube_mesh.w
    if cubes > width and cubes % width == 0 and (cubes // width) % 2 == 0:
        return snake_order(0, 0, width, cubes // width, width)
    return list(range(cubes))


def neighbour_table(spec, w: Workload) -> Table:
    """The PE_IPCQ links the earlier kernel of ``w`` sends over."""
    if w.ring:  # one ring through cubes 0..C-1 per PE index (the cubes the kernel's tensors are split over)
        return merge(*(cube_ring(spec, 0, ring_order(spec, w.cubes), pe=p) for p in range(w.pes)))
    table = merge(*(intra_cube(spec, 0, c) for c in range(w.cubes))) if w.pes > 1 else {}
    if w.cubes > 1:
        table = merge(table, *(intercube_mesh(spec, 0, p) for p in range(w.pes)))
    return table


def _inputs(w: Workload, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded float16 ``q (1, Hq, Tq, d)``, ``k`` and ``v`` ``(1, 1, S, d)`` (values do not change timing)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, w.hq, w.tq, w.d)).astype(np.float16)
    k = rng.standard_normal((1, 1, w.s, w.d)).astype(np.float16)
    v = rng.standard_normal((1, 1, w.s, w.d)).astype(np.float16)
    return q, k, v


def _pes_active(records) -> int:
    """PEs whose GEMM engine did work (each attends keys of its own)."""
    return len({r.component_id.rsplit(".", 1)[0] for r in records if r.component_id.endswith(".pe_gemm")})


def run_earlier(torch: RuntimeContext, w: Workload, kernel) -> AttentionResult:
    """Deploy ``w``'s tensors as the earlier kernel expects them, launch it on ``cubes x pes`` PEs and measure.

    Layouts: the ring prefill reads Q and writes O as ``(C*Tq, d)`` split over cubes (and over PEs when
    ``pes > 1``) with K and V split over cubes; the other kernels read Q ``(Tq, Hq*d)`` on every PE and K, V
    ``(S, d)`` split over cubes then PEs, and each PE owns ``Hq*Tq`` output rows. The window is the
    attention library's: first PE entering the kernel to the last leaving it.
    """
    host = earlier(torch)
    q, k, v = _inputs(w)
    split = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=w.cubes, num_pes=w.pes)
    if w.ring:
        q2 = q[0].reshape(w.hq * w.tq, w.d)
        q_dp = split if w.pes > 1 else DPPolicy(cube="row_wise", num_cubes=w.cubes, num_pes=w.pes)
        kv_dp = DPPolicy(cube="row_wise", pe="replicate", num_cubes=w.cubes, num_pes=w.pes)
        out_rows = w.hq * w.tq
    else:
        q2 = q[0].transpose(1, 0, 2).reshape(w.tq, w.hq * w.d)
        q_dp = DPPolicy(num_cubes=w.cubes, num_pes=w.pes)
        kv_dp = split
        out_rows = w.cubes * w.pes * w.hq * w.tq
    table = neighbour_table(torch.spec, w)
    ring = install(torch, table, "tcm") if table else None
    tq = host.from_numpy(q2, dp=q_dp, name="q")
    tk = host.from_numpy(k[0, 0], dp=kv_dp, name="k")
    tv = host.from_numpy(v[0, 0], dp=kv_dp, name="v")
    to = host.zeros((out_rows, w.d), dtype="f16", dp=split, name="o")
    ints = {"T_q": w.tq, "S_kv": w.s, "h_q": w.hq, "h_kv": 1, "d_head": w.d, "C": w.cubes, "P": w.pes,
            "kv_per_cube": 1}
    names = [p for p in inspect.signature(kernel).parameters
             if p not in ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "tl")]
    unknown = [p for p in names if p not in ints]
    if unknown:
        raise StudyError(f"earlier kernel {w.kernel}: parameter(s) {', '.join(unknown)} are not ones the earlier "
                         f"report's workloads set ({', '.join(ints)})")
    first = len(torch.oplog.records)
    launch = torch.wait(host.launch(f"earlier_{w.kernel}", kernel, tq, tk, tv, to, *(ints[p] for p in names)))
    records = list(torch.oplog.records[first:])
    result = measure([launch], records, out=None, kv_tensors=[tk, tv], pes_active=_pes_active(records))
    for t in (tq, tk, tv, to):
        torch.free(t)
    if ring is not None:
        ring.remove()
    return result


def run_ours(torch: RuntimeContext, w: Workload) -> AttentionResult:
    """Run ``w`` with the attention library: the same shapes and mapping, no causal mask (the earlier kernels
    have none)."""
    q, k, v = _inputs(w)
    if w.kind == "decode":
        partition = "short" if w.cubes == 1 else "cube_sp_pe_sp"
        return gqa_decode(torch, q, k, v, partition=partition, pes=w.pes, cubes=w.cubes)
    mode = "ring" if w.ring else "short"
    return gqa_prefill(torch, q, k, v, mode=mode, pes=w.pes, cubes=w.cubes, causal=False)


def run(torch: RuntimeContext, params: Mapping[str, object]) -> AttentionResult:
    """Run one reference point: ``params["workload"]`` with ``params["kernels"]`` (``ours`` or ``earlier``)."""
    w = workload(str(params["workload"]))
    which = params.get("kernels")
    if which == "ours":
        return run_ours(torch, w)
    if which != "earlier":
        raise StudyError(f"gqa reference point: kernels={which!r}; use ours or earlier")
    if w.kernel is None:
        raise StudyError(f"gqa reference point {w.name}: the earlier kernel of this workload is not among the "
                         f"earlier team's files; run it with kernels=ours")
    folder = kernels_dir()
    if folder is None:
        raise StudyError(f"gqa reference point {w.name} runs the earlier team's kernels: set {ENV} to the folder "
                         f"holding their _gqa_attention_*.py files")
    path = kernel_file(folder, w)
    want = params.get("kernel_digest")
    if want is not None and kernel_digest(path) != want:
        raise StudyError(f"{path} changed since the study's grid was made (its SHA-256 differs); rerun the study")
    return run_earlier(torch, w, load_kernel(path, w))


# ------------------------------------------------------------------------------ what the earlier report claims
@dataclass(frozen=True)
class ReferencePanel:
    """One panel as the earlier report's results file gives it (its claims, not our results): latency, ns
    (None: not reported), operation counts and summed engine busy time, ns."""

    latency_ns: float | None
    gemm: int
    ipcq_copy: int
    dma_read: int
    dma_write: int
    gemm_busy_ns: float | None = None
    math_busy_ns: float | None = None
    dma_busy_ns: float | None = None


#: The earlier report's GQA numbers, kept with the report's other quotations of it (``report/tex/reference/``).
REFERENCE_FILE = Path(__file__).parent / "report" / "tex" / "reference" / "gqa.json"


def load_reference(path: Path = REFERENCE_FILE) -> tuple[dict[str, ReferencePanel], str]:
    """The earlier report's panels (name -> :class:`ReferencePanel`) and where it states them."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    fields = {f.name for f in dataclasses.fields(ReferencePanel)}
    panels = {name: ReferencePanel(**{k: v for k, v in p.items() if k in fields})
              for name, p in doc["panels"].items()}
    return panels, "; ".join(f"{v} ({k} panels)" for k, v in doc["sources"].items())


REFERENCE, REFERENCE_SOURCE = load_reference()
