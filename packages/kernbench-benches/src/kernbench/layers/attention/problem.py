"""The GQA problem a call describes, checked: shapes, dtype, users, heads; and the constants every plan shares."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernbench.layers.attention.errors import AttentionConfigError, AttentionShapeError

#: K/V rows (keys) per tile of the flash loops, unless the caller gives ``tile``.
DEFAULT_TILE = 64
#: Most query rows one online-softmax state covers in prefill (a row block); also bounds a reduce message.
ROW_BLOCK = 128
#: Scores below this are masked: finite, so a fully masked row never turns into ``exp(-inf + inf)``.
MASK_VALUE = -1.0e30


@dataclass(frozen=True)
class Problem:
    """Sizes of one call: ``users`` (C), query heads ``hq``, KV heads ``hkv``, query rows ``tq``, keys ``s`` and
    head dimension ``d``; ``g = hq // hkv`` query heads share a KV head."""

    users: int
    hq: int
    hkv: int
    tq: int
    s: int
    d: int

    @property
    def g(self) -> int:
        """Query heads per KV head."""
        return self.hq // self.hkv

    @property
    def scale(self) -> float:
        """The softmax scale ``1 / sqrt(d)``."""
        return 1.0 / math.sqrt(self.d)


def check_problem(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, what: str, decode: bool) -> Problem:
    """Validate ``q (C, Hq, Tq, d)``, ``k`` and ``v`` ``(C, Hkv, S, d)`` (numpy float16) and return the sizes."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        if not isinstance(a, np.ndarray):
            raise AttentionShapeError(f"{what}: {name} must be a numpy array, got {type(a).__name__}")
        if a.ndim != 4:
            raise AttentionShapeError(f"{what}: {name} has shape {a.shape}; expected 4 axes "
                                      f"({'(C, Hq, Tq, d)' if name == 'q' else '(C, Hkv, S, d)'})")
        if a.dtype != np.float16:
            raise AttentionShapeError(f"{what}: {name} is {a.dtype}; the library takes float16 arrays "
                                      f"(convert with .astype(np.float16))")
        if min(a.shape) < 1:
            raise AttentionShapeError(f"{what}: {name} has an empty axis: shape {a.shape}")
    c, hq, tq, d = q.shape
    if k.shape != v.shape:
        raise AttentionShapeError(f"{what}: k has shape {k.shape} but v has {v.shape}; they must agree")
    ck, hkv, s, dk = k.shape
    if ck != c:
        raise AttentionShapeError(f"{what}: q holds {c} users (axis 0) but k and v hold {ck}; they must agree")
    if dk != d:
        raise AttentionShapeError(f"{what}: q has head dimension {d} (axis 3) but k and v have {dk}")
    if hq % hkv:
        raise AttentionShapeError(f"{what}: Hq={hq} query heads is not a multiple of Hkv={hkv} KV heads; in GQA "
                                  f"each KV head serves Hq/Hkv query heads")
    if decode and tq != 1:
        raise AttentionShapeError(f"{what}: decode takes one query row per head (Tq=1), got Tq={tq} from q's "
                                  f"shape {q.shape}; use gqa_prefill for more rows")
    if not decode and tq > s:
        raise AttentionShapeError(f"{what}: Tq={tq} query rows exceed the S={s} keys; the last Tq keys are the "
                                  f"queries' own positions, so Tq <= S")
    return Problem(c, hq, hkv, tq, s, d)


def check_pes(spec, pes: int, *, what: str) -> None:
    """``pes`` must be 1 .. the PEs of a cube."""
    n = spec.pes_per_cube
    if isinstance(pes, bool) or not isinstance(pes, int) or not 1 <= pes <= n:
        raise AttentionConfigError(f"{what}: pes={pes!r} must be an integer in 1..{n} (PEs per cube used)")


def check_tile(tile, *, what: str) -> int:
    """The tile (keys per flash step): ``None`` for the default, else a positive integer."""
    if tile is None:
        return DEFAULT_TILE
    if isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
        raise AttentionConfigError(f"{what}: tile={tile!r} must be a positive integer (keys per step)")
    return tile
