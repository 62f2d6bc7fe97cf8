"""Data-parallel placement of a tensor inside one SIP: :class:`DPPolicy` and shard resolution.

A tensor is placed on a contiguous range of the SIP's cubes and, inside
each cube, on its first ``num_pes`` PEs. Placement works on the tensor's
2-D view: the last axis is the columns, every leading axis is flattened
into the rows (a 1-D tensor is one row, a 0-D tensor one element).

Two levels compose. The cube axis acts first: ``row_wise`` splits the rows
over the cubes, ``column_wise`` the columns, ``replicate`` gives each cube
the whole view. The PE axis then treats each cube's part the same way.
Splits are as even as possible, with the first parts one row/column larger
when the size does not divide (``numpy.array_split`` order). The policy
never crosses SIPs; which SIP a tensor lives on is the caller's choice
(one SIP is one rank of the launcher).

Sizes are in bytes; row and column ranges are half-open element indices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernbench.topology.errors import KernbenchError
from kernbench.topology.spec import TopologySpec

MODES = ("replicate", "row_wise", "column_wise")
"""Allowed values of :attr:`DPPolicy.cube` and :attr:`DPPolicy.pe`."""


class PolicyError(KernbenchError):
    """A placement policy is invalid, or cannot place a given tensor on the topology."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class DPPolicy:
    """How a tensor is spread over the cubes of one SIP and the PEs of each cube.

    ``cube`` and ``pe`` are each one of ``"replicate"``, ``"row_wise"``,
    ``"column_wise"``. ``num_cubes`` cubes starting at cube ``cube_start``
    are used (``None``: every cube from ``cube_start`` to the last), and the
    first ``num_pes`` PEs of each (``None``: all of them).
    """

    cube: str = "replicate"
    pe: str = "replicate"
    num_cubes: int | None = None
    num_pes: int | None = None
    cube_start: int = 0

    def __post_init__(self) -> None:
        allowed = ", ".join(repr(m) for m in MODES)
        for name in ("cube", "pe"):
            value = getattr(self, name)
            if value not in MODES:
                raise PolicyError(f"DPPolicy field '{name}' = {value!r} is invalid; expected one of {allowed}")
        for name in ("num_cubes", "num_pes"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise PolicyError(f"DPPolicy field '{name}' = {value!r} is invalid; expected None (use all) "
                                  f"or an integer >= 1")
        if not _is_int(self.cube_start) or self.cube_start < 0:
            raise PolicyError(f"DPPolicy field 'cube_start' = {self.cube_start!r} is invalid; expected an "
                              f"integer >= 0 (the first cube of the SIP to use)")


@dataclass(frozen=True)
class Shard:
    """The part of a tensor held by one PE.

    ``sip``, ``cube`` and ``pe`` locate the PE (``cube`` is the SIP-wide
    cube index, ``pe`` the index inside the cube). ``rows`` and ``cols``
    are half-open ``(start, stop)`` ranges of the tensor's 2-D view;
    ``nbytes`` is the shard's size in bytes.
    """

    sip: int
    cube: int
    pe: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    nbytes: int


def _split(span: tuple[int, int], parts: int, axis: str, dim: str, where: str) -> list[tuple[int, int]]:
    """Cut ``span`` into ``parts`` contiguous ranges, the first ones one larger if it does not divide."""
    start, stop = span
    size = stop - start
    if parts > size:
        count = "cubes (num_cubes)" if axis == "cube" else "PEs (num_pes)"
        raise PolicyError(
            f"cannot split the {dim} dimension (size {size}) of {where} into {parts} {axis} parts: "
            f"{parts - size} part(s) would be empty; use at most {size} {count}, or replicate along "
            f"the {axis} axis")
    base, extra = divmod(size, parts)
    out = []
    for i in range(parts):
        n = base + (1 if i < extra else 0)
        out.append((start, start + n))
        start += n
    return out


def _divide(rows: tuple[int, int], cols: tuple[int, int], mode: str, parts: int, axis: str,
            where: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Apply one level of the policy: ``parts`` (rows, cols) pieces of a 2-D block."""
    if mode == "replicate":
        return [(rows, cols)] * parts
    if mode == "row_wise":
        return [(r, cols) for r in _split(rows, parts, axis, "row", where)]
    return [(rows, c) for c in _split(cols, parts, axis, "column", where)]


def resolve_shards(shape: tuple[int, ...], itemsize: int, policy: DPPolicy, spec: TopologySpec,
                   sip: int) -> list[Shard]:
    """The shards of a tensor of ``shape`` (elements of ``itemsize`` bytes) placed on SIP ``sip`` by ``policy``.

    Returns one :class:`Shard` per (cube, PE) used, ordered by cube then PE.
    Replicated axes repeat data, so the shard bytes add up to the tensor's
    bytes times the replication factor. Raises :class:`PolicyError` when the
    SIP or cube range does not exist, or a split would leave a part empty.
    """
    shape = tuple(shape)
    if not all(_is_int(d) and d >= 1 for d in shape):
        raise PolicyError(f"tensor shape {shape} is invalid for placement; every dimension must be an "
                          f"integer >= 1")
    if not _is_int(itemsize) or itemsize < 1:
        raise PolicyError(f"itemsize {itemsize!r} is invalid; expected the dtype's size in bytes (>= 1)")
    if not isinstance(policy, DPPolicy):
        raise PolicyError(f"expected a DPPolicy, got {policy!r}")
    n_sips = spec.system.sips.count
    if not _is_int(sip) or not 0 <= sip < n_sips:
        raise PolicyError(f"SIP {sip!r} does not exist; the topology has {n_sips} SIPs (0..{n_sips - 1})")
    cubes_per_sip = spec.cubes_per_sip
    start = policy.cube_start
    if start >= cubes_per_sip:
        raise PolicyError(f"DPPolicy cube_start = {start} is beyond the {cubes_per_sip} cubes of a SIP; "
                          f"use a cube_start below {cubes_per_sip}")
    num_cubes = policy.num_cubes if policy.num_cubes is not None else cubes_per_sip - start
    if start + num_cubes > cubes_per_sip:
        raise PolicyError(f"DPPolicy cubes [{start}, {start + num_cubes}) run past the {cubes_per_sip} cubes "
                          f"of a SIP; use num_cubes <= {cubes_per_sip - start} for cube_start = {start}")
    pes_per_cube = spec.pes_per_cube
    num_pes = policy.num_pes if policy.num_pes is not None else pes_per_cube
    if num_pes > pes_per_cube:
        raise PolicyError(f"DPPolicy num_pes = {num_pes} exceeds the {pes_per_cube} PEs of a cube; "
                          f"use num_pes <= {pes_per_cube}")

    n_cols = shape[-1] if shape else 1
    n_rows = math.prod(shape[:-1])
    view = f"the tensor's {n_rows}x{n_cols} 2-D view"
    shards: list[Shard] = []
    cube_parts = _divide((0, n_rows), (0, n_cols), policy.cube, num_cubes, "cube", view)
    for i, (c_rows, c_cols) in enumerate(cube_parts):
        cube = start + i
        where = f"cube {cube}'s {c_rows[1] - c_rows[0]}x{c_cols[1] - c_cols[0]} part"
        for pe, (rows, cols) in enumerate(_divide(c_rows, c_cols, policy.pe, num_pes, "PE", where)):
            nbytes = (rows[1] - rows[0]) * (cols[1] - cols[0]) * itemsize
            shards.append(Shard(sip, cube, pe, rows, cols, nbytes))
    return shards


__all__ = ["MODES", "DPPolicy", "PolicyError", "Shard", "resolve_shards"]
