"""A tolerance-based fingerprint of a tensor's values, for golden checks that must hold on any CPU.

Data mode computes real numbers through numpy, whose BLAS and SIMD kernels are
chosen per CPU: the same run gives results that differ in their last bits on
another machine (ADR 0029). An exact hash of those bytes fails there, so the
golden digests hash only exact quantities (times, counters, addresses, shapes,
the count of non-finite values) and keep a small numeric *sketch* of each
tensor's values, compared within a tolerance scaled to the tensor's dtype.

The sketch of a flattened tensor ``x`` (as float64, non-finite values set to 0)
is a list of linear functionals ``f(x) = Σ wᵢ xᵢ``, each stored with its
magnitude ``Σ |wᵢ xᵢ|``:

- ``BLOCKS`` block sums over contiguous, nearly equal slices (a wrong value in
  one region moves its block);
- ``PROJECTIONS`` random projections with fixed-seed weights in [-1, 1] (a
  permutation or sign error inside a block moves them);
- the L1 norm (weights ``sign(xᵢ)``, its own magnitude).

Two sketches agree when every functional differs by at most ``rtol`` times the
larger of its two magnitudes: rounding every element by ``δ`` relative moves a
functional by at most ``δ`` times its magnitude, so ``rtol`` a few times the
dtype's unit roundoff passes any BLAS while a real change of the values (a
scale, a masked row, a swapped operand) fails.
"""

from __future__ import annotations

import math

import numpy as np

BLOCKS = 16
PROJECTIONS = 4
#: Relative tolerance per dtype, in units of the format's machine epsilon: 4 for the 16-bit formats (a result
#: that rounds the other way moves by one unit at most), 64 for float32 and float64, whose results come out of
#: long accumulations whose order each BLAS kernel chooses. ADR 0029 records the spread measured between
#: OpenBLAS core types on every golden case (at most 0.35 of the float32 tolerance that 8 units would give).
RTOL = {"float16": 4 * 2.0**-10, "float32": 64 * 2.0**-23, "float64": 64 * 2.0**-52}
#: Floor for functionals whose magnitude is ~0 (an all-zero block stays all-zero on every CPU).
ATOL = 1e-30


def _weights(n: int, k: int) -> np.ndarray:
    """Projection ``k``'s weights for ``n`` values: the same on every machine (PCG64 integers, exact scaling)."""
    return np.random.default_rng(0x5EED + k).uniform(-1.0, 1.0, n)


def sketch(values: np.ndarray) -> dict:
    """The fingerprint of one array: exact facts (``dtype``, ``n``, non-finite counts) and the functionals
    ``[value, magnitude]`` described in the module docstring. Integer and boolean arrays get an exact hash
    of their bytes instead (``exact``)."""
    arr = np.ascontiguousarray(values)
    out: dict = {"dtype": str(arr.dtype), "n": int(arr.size)}
    if arr.dtype.kind not in "fc":
        import hashlib

        out["exact"] = hashlib.sha256(arr.tobytes()).hexdigest()
        return out
    x = arr.astype(np.float64).reshape(-1)
    finite = np.isfinite(x)
    out["nan"] = int(np.isnan(x).sum())
    out["posinf"] = int(np.isposinf(x).sum())
    out["neginf"] = int(np.isneginf(x).sum())
    x = np.where(finite, x, 0.0)
    ax = np.abs(x)
    blocks = min(BLOCKS, max(x.size, 1))
    funcs = [[float(part.sum()), float(mag.sum())]
             for part, mag in zip(np.array_split(x, blocks), np.array_split(ax, blocks), strict=True)]
    for k in range(PROJECTIONS):
        w = _weights(x.size, k)
        funcs.append([float((w * x).sum()), float(np.abs(w * x).sum())])
    total = float(ax.sum())
    funcs.append([total, total])
    out["f"] = funcs
    return out


def _exact_part(s: dict) -> dict:
    return {k: v for k, v in s.items() if k != "f"}


def compare(want: dict, got: dict) -> str | None:
    """None when the two sketches agree within the dtype's tolerance, else what differs (first offender)."""
    if _exact_part(want) != _exact_part(got):
        return f"exact facts differ: {_exact_part(want)} -> {_exact_part(got)}"
    if "f" not in want:
        return None
    rtol = RTOL.get(want["dtype"], 64 * float(np.finfo(want["dtype"]).eps))
    if len(want["f"]) != len(got["f"]):
        return f"{len(want['f'])} functionals -> {len(got['f'])}"
    for i, ((v0, m0), (v1, m1)) in enumerate(zip(want["f"], got["f"], strict=True)):
        bound = rtol * max(m0, m1) + ATOL
        if not (math.isfinite(v1) and abs(v1 - v0) <= bound and abs(m1 - m0) <= bound):
            return f"functional {i}: {v0!r} (|.| {m0!r}) -> {v1!r} (|.| {m1!r}), bound {bound:.3g}"
    return None


def spread(want: dict, got: dict) -> float:
    """The largest ``|Δ| / magnitude`` over the functionals of two sketches of the same tensor (0 when exact):
    how close a pair came to the tolerance, in the same units as :data:`RTOL`."""
    worst = 0.0
    for (v0, m0), (v1, m1) in zip(want.get("f", []), got.get("f", []), strict=True):
        scale = max(m0, m1)
        if scale > 0:
            worst = max(worst, abs(v1 - v0) / scale, abs(m1 - m0) / scale)
    return worst
