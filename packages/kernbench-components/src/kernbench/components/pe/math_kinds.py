"""The math op kinds a composite command can carry: their operand slots, result shape and numeric effect.

This is the PE's vector-engine instruction set as the scheduler sees it. It
knows op kinds, never recipes: a recipe (``kernbench.tl.recipes``) is
expanded by the kernel language into these kinds before the command is
issued.

Three families, by where an op sits relative to the composite's driver (see
``composite_cmd``):

* **standalone** ops (before the driver, or in a composite without one) read
  named TCM operands and write their ``out`` tensor: ``copy exp sigmoid relu
  abs sqrt scale`` (slot ``src``), the row reductions ``rmax rsum`` (slot
  ``src``, extra ``axis``, the reduced axis kept with size 1), and the
  elementwise ``max_elem exp_diff mul_bcast`` (``src_a``, ``src_b``;
  ``exp_diff`` is ``exp(a - b)``) and ``fma`` (``a * b + c``), all with numpy
  broadcasting;
* **epilogue** ops (after the driver) transform the result block ``x``:
  ``scale`` (extra ``value``), ``bias`` (operand ``vector``, one value per
  output column), ``add`` (operand ``other``, a tensor of the output's
  shape), ``relu sigmoid exp``;
* **head** ops drive an elementwise composite tile by tile over the operand
  ``x``: ``copy exp sigmoid relu abs sqrt``.

Arithmetic is f32 on f32 inputs (f16 values are widened first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x,
    "exp": np.exp,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0),
    "abs": np.abs,
    "sqrt": np.sqrt,
}


@dataclass(frozen=True, slots=True)
class StandaloneKind:
    """A standalone op kind: its operand slots (in call order), required extras, and whether it reduces."""

    slots: tuple[str, ...]
    fn: Callable[..., np.ndarray]
    extras: tuple[str, ...] = ()
    reduces: bool = False


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> StandaloneKind:
    return StandaloneKind(("src",), lambda x: fn(x))


STANDALONE: dict[str, StandaloneKind] = {
    **{name: _unary(fn) for name, fn in UNARY.items()},
    "scale": StandaloneKind(("src",), lambda x, value: x * np.float32(value), ("value",)),
    "rmax": StandaloneKind(("src",), lambda x, axis: x.max(axis=axis, keepdims=True), ("axis",), True),
    "rsum": StandaloneKind(("src",), lambda x, axis: x.sum(axis=axis, keepdims=True), ("axis",), True),
    "max_elem": StandaloneKind(("src_a", "src_b"), np.maximum),
    "exp_diff": StandaloneKind(("src_a", "src_b"), lambda a, b: np.exp(a - b)),
    "mul_bcast": StandaloneKind(("src_a", "src_b"), lambda a, b: a * b),
    "fma": StandaloneKind(("src_a", "src_b", "src_c"), lambda a, b, c: a * b + c),
}

#: Epilogue op kinds: required tensor operand (or None) and required extras.
EPILOGUE: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "scale": (None, ("value",)),
    "bias": ("vector", ()),
    "add": ("other", ()),
    "relu": (None, ()),
    "sigmoid": (None, ()),
    "exp": (None, ()),
}

#: Elementwise kinds that can drive a composite's tile loop.
HEADS: tuple[str, ...] = tuple(UNARY)


def standalone_shape(kind: str, shapes: tuple[tuple[int, ...], ...], extra: dict) -> tuple[int, ...]:
    """Result shape of a standalone op over operands of ``shapes`` (numpy broadcasting; reductions keep the
    reduced axis with size 1). Raises ValueError when the shapes do not broadcast or the axis is invalid."""
    spec = STANDALONE[kind]
    if spec.reduces:
        (shape,) = shapes
        axis = extra["axis"]
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"axis {axis} is out of range for shape {shape}")
        ax = axis % len(shape)
        return tuple(1 if i == ax else s for i, s in enumerate(shape))
    return tuple(np.broadcast_shapes(*shapes))


def run_standalone(kind: str, inputs: list[np.ndarray], extra: dict) -> np.ndarray:
    """The numeric result of a standalone op on f32 inputs."""
    spec = STANDALONE[kind]
    return spec.fn(*inputs, **{name: extra[name] for name in spec.extras})


def apply_epilogue(x: np.ndarray, kind: str, extra: dict, operand: np.ndarray | None, r0: int, c0: int
                   ) -> np.ndarray:
    """The numeric effect of one epilogue op on the block ``x`` whose top-left element is output (r0, c0).

    ``operand`` is the op's whole tensor operand (f32) when it has one: a
    bias vector is sliced by the block's columns, an ``add`` tensor by the
    block's rows and columns.
    """
    if kind == "scale":
        return x * np.float32(extra["value"])
    if kind == "bias":
        return x + operand[c0:c0 + x.shape[1]]
    if kind == "add":
        return x + operand[r0:r0 + x.shape[0], c0:c0 + x.shape[1]]
    return UNARY[kind](x)
