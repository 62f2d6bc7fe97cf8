"""``ccl.yaml``: which collective algorithm the ``ahbm`` backend runs, and its settings.

The file sits next to the topology (``topologies/ccl.yaml``); a topology
without one uses the copy shipped in this package. Layout::

    defaults:
      algorithm: lrab_hierarchical_allreduce   # the algorithm entry used by default
      buffer_kind: tcm                         # where IPCQ receive rings live: tcm | sram | hbm
      # world_size: 6                          # optional: ranks (default: the topology's SIP count)
    algorithms:
      lrab_hierarchical_allreduce:
        module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce
        # world_size / buffer_kind here override the defaults for this algorithm

World size resolution: the algorithm's ``world_size``, else the defaults',
else the topology's SIP count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernbench.components.pe.ipcq import BUFFER_KINDS
from kernbench.topology.errors import KernbenchError
from kernbench.topology.safe_yaml import load_yaml, quote

PACKAGED = Path(__file__).with_name("ccl.yaml")


class CclConfigError(KernbenchError):
    """ccl.yaml is missing a field, names an unknown algorithm, or holds a bad value."""


@dataclass(frozen=True)
class AlgorithmConfig:
    """The resolved settings of one algorithm entry."""

    name: str
    module: str
    buffer_kind: str
    world_size: int | None
    source: str


def config_path(topology_source: str) -> Path:
    """``ccl.yaml`` beside the topology file, else the packaged default."""
    source = Path(topology_source) if topology_source else None
    if source is None or not source.is_file():  # a topology built in code has no folder to look in
        return PACKAGED
    beside = source.parent / "ccl.yaml"
    return beside if beside.is_file() else PACKAGED


def load(path: Path | str, algorithm: str | None = None) -> AlgorithmConfig:
    """Read ``path`` and resolve ``algorithm`` (default: ``defaults.algorithm``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CclConfigError(f"{path}: cannot read the collective configuration: {exc.strerror}") from None
    raw = load_yaml(data, str(path), CclConfigError) or {}
    if not isinstance(raw, dict):
        raise CclConfigError(f"{path}: expected a mapping with 'defaults' and 'algorithms'")
    defaults = raw.get("defaults") or {}
    algos = raw.get("algorithms") or {}
    if not isinstance(defaults, dict) or not isinstance(algos, dict):
        raise CclConfigError(f"{path}: 'defaults' and 'algorithms' must be mappings")
    name = algorithm or defaults.get("algorithm")
    if not name:
        raise CclConfigError(f"{path}: no algorithm chosen; set defaults.algorithm or pass algorithm=")
    if not isinstance(name, str):
        raise CclConfigError(f"{path}: the algorithm name {quote(name)} is not text; name an entry of 'algorithms'")
    entry = algos.get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("module"), str):
        known = ", ".join(quote(a) for a in algos) or "none"
        raise CclConfigError(f"{path}: algorithm {quote(name)} has no entry with a 'module' under 'algorithms' "
                             f"(known: {known})")
    world = entry.get("world_size", defaults.get("world_size"))
    if world is not None and (isinstance(world, bool) or not isinstance(world, int) or world < 1):
        raise CclConfigError(f"{path}: world_size must be a positive integer, got {quote(world)}")
    kind = entry.get("buffer_kind", defaults.get("buffer_kind", "tcm"))
    if kind not in BUFFER_KINDS:
        raise CclConfigError(f"{path}: buffer_kind {quote(kind)} is not one of {', '.join(BUFFER_KINDS)}")
    return AlgorithmConfig(name, entry["module"], kind, world, str(path))
