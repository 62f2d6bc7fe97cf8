"""``ccl.yaml``: which algorithm the ``ahbm`` backend runs for each collective, and its settings.

The file sits next to the topology (``topologies/ccl.yaml``); a topology
without one uses the copy shipped in this package. Layout::

    collectives:                               # one entry per collective
      all_reduce:
        algorithm: lrab_hierarchical_allreduce # an entry of 'algorithms'
        buffer_kind: tcm                       # where IPCQ receive rings live: tcm | sram | hbm
        # world_size: 6                        # optional: ranks (default: the topology's SIP count)
      # broadcast / all_gather / reduce_scatter / all_to_all / barrier: the same keys
    defaults:                                  # optional: what every collective falls back on
      buffer_kind: tcm
    algorithms:
      lrab_hierarchical_allreduce:
        module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce
        # world_size / buffer_kind here override the collective's and the defaults

A file written before ``collectives`` existed (only ``defaults`` with an
``algorithm``, and ``algorithms``) still reads the same: ``defaults`` is what
every collective falls back on, so its ``algorithm`` runs ``all_reduce``.

Each setting resolves as: the algorithm entry's, else the collective's,
else the defaults', else built in (``buffer_kind: tcm``, the world size the
topology's SIP count).

An entry's ``module`` must be a *registered* algorithm module, checked by
name before anything is imported (a ``ccl.yaml`` is data, often someone
else's, and importing a module runs its code): the modules shipped in
``kernbench.ccl.algorithms``, the modules named by the entry-point group
``kernbench.ccl_algorithms`` of an installed package (the entry point's
value is the module), and the modules a script registered with
:func:`register_algorithm` before ``init_process_group``. What an algorithm
module exposes is in :mod:`kernbench.ccl.launch_spec`.
"""

from __future__ import annotations

import pkgutil
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from types import ModuleType

from kernbench.components.pe.ipcq import BUFFER_KINDS
from kernbench.topology.errors import KernbenchError
from kernbench.topology.safe_yaml import load_yaml, quote

PACKAGED = Path(__file__).with_name("ccl.yaml")
SHIPPED_PACKAGE = "kernbench.ccl.algorithms"
ENTRY_POINT_GROUP = "kernbench.ccl_algorithms"
_REGISTERED: dict[str, ModuleType | None] = {}  # module name -> the module object given, or None (a name only)
_REGISTRY_LOCK = threading.Lock()


class CclConfigError(KernbenchError):
    """ccl.yaml is missing a field, names an unknown algorithm, or holds a bad value."""


#: the collectives a ``ccl.yaml`` may configure (:data:`IMPLEMENTED` lists those the backend runs)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "reduce", "gather",
               "scatter", "barrier")
#: the collectives the ``ahbm`` backend runs (``all_gather`` is ``all_gather_into_tensor``, ``reduce_scatter``
#: is ``reduce_scatter_tensor``, ``all_to_all`` is ``all_to_all_single``)
IMPLEMENTED = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "barrier")


@dataclass(frozen=True)
class AlgorithmConfig:
    """The resolved settings of the algorithm entry that runs ``collective``."""

    name: str
    module: str
    buffer_kind: str
    world_size: int | None
    source: str
    collective: str = "all_reduce"
    buffer_kind_given: bool = False  # set by the algorithm entry, the collective's entry or defaults


def register_algorithm(module: ModuleType | str) -> str:
    """Let a ``ccl.yaml`` name ``module`` (a module object, or a dotted module name imported only when an entry
    using it is initialised) as an algorithm module; returns the name to write under ``module:``."""
    if isinstance(module, ModuleType):
        name = module.__name__
    elif isinstance(module, str) and all(part.isidentifier() for part in module.split(".")):
        name = module
    else:
        raise CclConfigError(f"register_algorithm: expected a module or a dotted module name, got {quote(module)}")
    with _REGISTRY_LOCK:
        if isinstance(module, ModuleType) or _REGISTERED.get(name) is None:
            _REGISTERED[name] = module if isinstance(module, ModuleType) else None
    return name


def registered_module(name: str) -> ModuleType | None:
    """The module object registered under ``name`` with :func:`register_algorithm`, if one was given."""
    return _REGISTERED.get(name)


def shipped_algorithms() -> list[str]:
    """The algorithm modules shipped in ``kernbench.ccl.algorithms`` (found on disk, nothing imported)."""
    return list(_shipped())


@lru_cache(maxsize=1)
def _shipped() -> tuple[str, ...]:
    """The shipped algorithm modules, listed once per process: the installed package does not change under it."""
    folder = Path(__file__).with_name("algorithms")
    return tuple(sorted(f"{SHIPPED_PACKAGE}.{m.name}" for m in pkgutil.iter_modules([str(folder)]) if not m.ispkg))


def entry_point_algorithms() -> list[str]:
    """The modules named by the ``kernbench.ccl_algorithms`` entry points of installed packages (not imported)."""
    return sorted({ep.module for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})


def known_algorithms() -> list[str]:
    """Every module a ``ccl.yaml`` may name: shipped, declared by an entry point, or registered in this process."""
    with _REGISTRY_LOCK:
        registered = set(_REGISTERED)
    return sorted(set(shipped_algorithms()) | set(entry_point_algorithms()) | registered)


def check_registered(module: str, name: str, source: str) -> None:
    """Refuse, by name and before any import, an algorithm module that is not registered."""
    if module in _shipped():  # the common case, without scanning every installed package's entry points
        return
    with _REGISTRY_LOCK:
        if module in _REGISTERED:
            return
    known = known_algorithms()
    if module in known:
        return
    raise CclConfigError(f"{source}: algorithm {quote(name)} names module {quote(module)}, which is not a registered "
                         f"algorithm module, so it is not imported (known: {', '.join(known)}); register your own "
                         f"with kernbench.ccl.register_algorithm(module) before init_process_group, or in the "
                         f"{quote(ENTRY_POINT_GROUP)} entry-point group of an installed package")


def config_path(topology_source: str) -> Path:
    """``ccl.yaml`` beside the topology file, else the packaged default."""
    source = Path(topology_source) if topology_source else None
    if source is None or not source.is_file():  # a topology built in code has no folder to look in
        return PACKAGED
    beside = source.parent / "ccl.yaml"
    return beside if beside.is_file() else PACKAGED


@lru_cache(maxsize=32)
def _parse(data: bytes, source: str) -> object:
    """A ``ccl.yaml`` document parsed (``{}`` when empty), memoised by its bytes: every rank of every process group
    reads the same file, and a changed file has other bytes. Callers only read the result."""
    return load_yaml(data, source, CclConfigError) or {}


def load(path: Path | str, algorithm: str | None = None, collective: str = "all_reduce") -> AlgorithmConfig:
    """Read ``path`` and resolve the algorithm that runs ``collective``: ``algorithm`` when given, else the
    collective's ``algorithm``, else ``defaults.algorithm``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CclConfigError(f"{path}: cannot read the collective configuration: {exc.strerror}") from None
    raw = _parse(data, str(path))
    if not isinstance(raw, dict):
        raise CclConfigError(f"{path}: expected a mapping with 'collectives' (or 'defaults') and 'algorithms'")
    collectives = raw.get("collectives") or {}
    defaults = raw.get("defaults") or {}
    algos = raw.get("algorithms") or {}
    if not all(isinstance(part, dict) for part in (collectives, defaults, algos)):
        raise CclConfigError(f"{path}: 'collectives', 'defaults' and 'algorithms' must be mappings")
    for key, value in collectives.items():
        if key not in COLLECTIVES:
            raise CclConfigError(f"{path}: collectives: {quote(key)} is not a collective; use one of "
                                 f"{', '.join(COLLECTIVES)}")
        if value is not None and not isinstance(value, dict):
            raise CclConfigError(f"{path}: collectives.{key} must be a mapping (algorithm, buffer_kind, world_size)")
    if collective not in COLLECTIVES:
        raise CclConfigError(f"{path}: {quote(collective)} is not a collective; use one of {', '.join(COLLECTIVES)}")
    chosen = collectives.get(collective) or {}

    def setting(key: str, default: object = None) -> object:
        return chosen.get(key, defaults.get(key, default))

    name = algorithm or setting("algorithm")
    if not name:
        raise CclConfigError(f"{path}: no algorithm chosen for {collective}; set collectives.{collective}.algorithm "
                             f"(or defaults.algorithm) or pass algorithm=")
    if not isinstance(name, str):
        raise CclConfigError(f"{path}: the algorithm name {quote(name)} is not text; name an entry of 'algorithms'")
    entry = algos.get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("module"), str):
        known = ", ".join(quote(a) for a in algos) or "none"
        raise CclConfigError(f"{path}: algorithm {quote(name)} has no entry with a 'module' under 'algorithms' "
                             f"(known: {known})")
    world = entry.get("world_size", setting("world_size"))
    if world is not None and (isinstance(world, bool) or not isinstance(world, int) or world < 1):
        raise CclConfigError(f"{path}: world_size must be a positive integer, got {quote(world)}")
    given = entry.get("buffer_kind", setting("buffer_kind"))
    kind = "tcm" if given is None else given
    if kind not in BUFFER_KINDS:
        raise CclConfigError(f"{path}: buffer_kind {quote(kind)} is not one of {', '.join(BUFFER_KINDS)}")
    check_registered(entry["module"], name, str(path))
    return AlgorithmConfig(name, entry["module"], kind, world, str(path), collective, given is not None)


def algorithm_entries(path: Path | str) -> set[str]:
    """The names under ``algorithms:`` in ``path``."""
    raw = _parse(Path(path).read_bytes(), str(path))
    algos = raw.get("algorithms") if isinstance(raw, dict) else None
    return set(algos) if isinstance(algos, dict) else set()


def configured_collectives(path: Path | str) -> set[str]:
    """The collectives ``path`` chooses an algorithm for: those under ``collectives:`` with an ``algorithm``,
    and ``all_reduce`` when ``defaults`` names one (the shape of files written before ``collectives``)."""
    raw = _parse(Path(path).read_bytes(), str(path))
    if not isinstance(raw, dict):
        return set()
    collectives = raw.get("collectives") or {}
    found = {k for k, v in collectives.items() if isinstance(v, dict) and v.get("algorithm")} \
        if isinstance(collectives, dict) else set()
    defaults = raw.get("defaults") or {}
    if isinstance(defaults, dict) and defaults.get("algorithm"):
        found.add("all_reduce")
    return found
