"""The study result cache: one JSON file per simulated point under the user cache directory.

A point's key is the SHA-256 of its study name, its params, the SHA-256 of
every topology file it reads (absent files count as absent), its spec
overrides, a digest of the source of every kernbench module its study
imports (:func:`source_digest`), and the network fidelity it runs in. Change
any of them and the point reruns; change a figure or the report and nothing
reruns.

The fidelity enters the key as a part of its own, ``"fidelity": "flow"``,
and only in flow fidelity: a packet point's key is made of exactly what it
was made of before flow fidelity existed, so packet entries stay valid. The
``fidelity`` param of a fidelity-panel point is not part of the key's params
(it only says which fidelity the point runs in), so a panel point and the
same point of a ``--fidelity flow`` run share one entry.

Entries are written atomically (a temporary file in the same folder, then
``os.replace``). Each entry holds the SHA-256 of its content (key, values,
wall time). An entry that cannot be read or parsed (random bytes included),
whose key, content hash or shape is wrong, or whose values break the study's
declared fields (a value of the wrong type, not finite, out of range, or
without a field) is *corrupt*: it is recomputed with a one-line
:class:`~kernbench.topology.mesh_gen.CacheWarning`, never served. The cache
folder is ``$KERNBENCH_CACHE_DIR`` when set, else ``platformdirs``' user
cache directory for ``kernbench`` (``~/.cache/kernbench`` on Linux).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kernbench.studies.base import Scalar, Study, StudyError, point_fidelity, simulation_params
from kernbench.studies.results import check_record
from kernbench.topology.files import atomic_write_text, cache_root
from kernbench.topology.mesh_gen import CacheWarning

CACHE_FORMAT = 2  # 2: entries hold the SHA-256 of their content
#: Packages whose modules register implementations or import each other dynamically: a module of one of them
#: brings in the whole package's source.
WHOLE_PACKAGES = ("kernbench.topology", "kernbench.sim", "kernbench.components", "kernbench.tl",
                  "kernbench.runtime", "kernbench.ccl")


def cache_dir() -> Path:
    """The cache folder (``$KERNBENCH_CACHE_DIR`` or the platform's user cache directory)."""
    return cache_root()


# --------------------------------------------------------------------------- source digest


def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _imports(name: str, path: Path) -> set[str]:
    """kernbench modules named by the import statements of module ``name`` (file ``path``)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # a submodule, when the name is one
    return {m for m in found if m == "kernbench" or m.startswith("kernbench.")}


def _package_root(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StudyError(f"cannot locate the source of package {package}")
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=32)
def source_files(modules: tuple[str, ...]) -> tuple[tuple[str, Path], ...]:
    """``(name, file)`` of every kernbench source the modules import, transitively; a module of a
    :data:`WHOLE_PACKAGES` package brings in its whole package (whose imports are followed in turn). The
    ``__init__`` of a parent package counts with its own bytes, but its re-exports are not followed: the studies
    package re-exports the runner and figures, which no point runs."""
    seen: set[str] = set()
    todo = list(modules)
    files: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name.startswith("__init__:"):  # a parent package: its own file counts, its re-exports are not followed
            name = name.removeprefix("__init__:")
            path = _module_file(name)
            if path is not None and not any(name == p or name.startswith(p + ".") for p in WHOLE_PACKAGES):
                files[name] = path
            continue
        if name in seen:
            continue
        seen.add(name)
        owner = next((p for p in WHOLE_PACKAGES if name == p or name.startswith(p + ".")), None)
        if owner:
            if owner in seen and owner != name:
                continue
            seen.add(owner)
            root = _package_root(owner)
            for path in sorted(root.rglob("*.py")):
                rel = path.relative_to(root).with_suffix("")
                parts = [p for p in rel.parts if p != "__init__"]
                mod = ".".join([owner, *parts])
                files[f"{owner}/{path.relative_to(root).as_posix()}"] = path
                todo.extend(_imports(mod, path))
            continue
        path = _module_file(name)
        if path is None:
            continue
        files[name] = path
        parent = name.rpartition(".")[0]
        if parent:
            todo.append(f"__init__:{parent}")  # importing a.b.c runs a/b/__init__.py
        todo.extend(_imports(name, path))
    return tuple(sorted(files.items()))


@lru_cache(maxsize=32)
def source_digest(modules: tuple[str, ...]) -> str:
    """SHA-256 over the names and bytes of :func:`source_files` (hex)."""
    h = hashlib.sha256()
    for name, path in source_files(modules):
        h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


# --------------------------------------------------------------------------- keys


def file_digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes (hex), or None when it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StudyError(f"cannot read {path}: {exc}") from None


@dataclass(frozen=True)
class KeyParts:
    """What a point's key is made of (kept in the cache index to explain why a point reruns)."""

    study: str
    params: Mapping[str, Scalar]
    files: Mapping[str, str | None]
    overrides: Mapping[str, Scalar]
    source: str
    fidelity: str = "packet"

    def key(self) -> str:
        """The SHA-256 (hex) of the parts."""
        return hashlib.sha256(canonical(self.as_json()).encode()).hexdigest()

    def as_json(self) -> dict:
        """The parts as a JSON-ready dict (``fidelity`` only when it is not ``packet``, so that packet keys are
        what they were before the part existed)."""
        out = {"format": CACHE_FORMAT, "study": self.study, "params": dict(self.params), "files": dict(self.files),
               "overrides": dict(self.overrides), "source": self.source}
        if self.fidelity != "packet":
            out["fidelity"] = self.fidelity
        return out


def canonical(value: object) -> str:
    """Compact JSON with sorted keys: the one text a value hashes as."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def key_parts(study: Study, params: Mapping[str, Scalar], topology_dir: Path, fidelity: str = "packet") -> KeyParts:
    """The key parts of one point of ``study`` in a run of ``fidelity`` (the point's own ``fidelity`` param, when
    it has one, wins: :func:`~kernbench.studies.base.point_fidelity`)."""
    mode = point_fidelity(params, fidelity)
    params = simulation_params(params)
    files = {name: file_digest(Path(topology_dir) / name) for name in study.files(params)}
    return KeyParts(study.name, params, files, study.overrides(params), source_digest(study.modules), mode)


def params_id(study: str, params: Mapping[str, Scalar], fidelity: str = "packet") -> str:
    """A point's identity across code and topology changes (study + params, + fidelity when not packet), hex
    SHA-256."""
    ident: dict = {"study": study, "params": dict(params)}
    if fidelity != "packet":
        ident["fidelity"] = fidelity
    return hashlib.sha256(canonical(ident).encode()).hexdigest()


# --------------------------------------------------------------------------- store


def content_hash(key: str, values: object, wall_s: object) -> str:
    """The SHA-256 (hex) an entry stores of its own content: its key, values and wall time."""
    return hashlib.sha256(canonical({"key": key, "values": values, "wall_s": wall_s}).encode()).hexdigest()


def entry_problem(entry: object, key: str, study: Study | None = None) -> str | None:
    """Why a parsed cache entry cannot be served for ``key`` (None when it can): its format, key, content hash,
    wall time, and its values against ``study``'s declared fields (types, finiteness, ranges)."""
    if not isinstance(entry, dict):
        return f"it is a {type(entry).__name__}, not an object"
    if entry.get("format") != CACHE_FORMAT:
        return f"format {entry.get('format')!r}, expected {CACHE_FORMAT}"
    if entry.get("key") != key:
        return "it holds another key"
    values, wall = entry.get("values"), entry.get("wall_s")
    try:
        digest = content_hash(key, values, wall)
    except (TypeError, ValueError):  # NaN/inf or a value JSON cannot hold
        return "its content cannot be hashed (a value is not finite)"
    if entry.get("sha256") != digest:
        return "its content does not match its SHA-256 (edited or damaged)"
    if isinstance(wall, bool) or not isinstance(wall, int | float) or not math.isfinite(wall) or wall < 0:
        return f"wall_s {wall!r} is not a finite number of seconds at least 0"
    if not isinstance(values, dict) or not values:
        return "it holds no values"
    units = study.units() if study is not None else {k: "1" if isinstance(v, int | float) and not isinstance(
        v, bool) else "" for k, v in values.items()}
    return check_record(values, units, "value")


class ResultCache:
    """Point results by key, plus an index of the last key parts of each point (to explain reruns)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_dir()

    def _entry(self, key: str) -> Path:
        return self.root / "studies" / key[:2] / f"{key}.json"

    def _index(self, study: str, pid: str) -> Path:
        return self.root / "index" / study / f"{pid}.json"

    def get(self, key: str, study: Study | None = None) -> tuple[str, dict | None, float]:
        """``(status, values, wall_s)``: status is ``hit``, ``missing`` or ``corrupt`` (values None unless hit).
        A corrupt entry (unreadable, unparsable, edited, or breaking ``study``'s fields: :func:`entry_problem`)
        is reported with one :class:`CacheWarning` line and never served."""
        path = self._entry(key)
        try:
            entry = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return "missing", None, 0.0
        except OSError as exc:
            problem: str | None = f"it cannot be read ({exc.strerror or exc})"
        except UnicodeDecodeError:
            problem = "it is not UTF-8 text"
        except (ValueError, RecursionError):
            problem = "it is not valid JSON"
        else:
            problem = entry_problem(entry, key, study)
        if problem is not None:
            name = f"study {study.name} " if study is not None else "study "
            warnings.warn(f"{name}cache entry {path} is corrupt ({problem}); recomputing the point", CacheWarning,
                          stacklevel=2)
            return "corrupt", None, 0.0
        return "hit", entry["values"], float(entry["wall_s"])

    def put(self, parts: KeyParts, values: dict, wall_s: float) -> None:
        """Store a point's values (atomically) and remember its key parts in the index."""
        key = parts.key()
        entry = {"format": CACHE_FORMAT, "key": key, "parts": parts.as_json(), "values": values, "wall_s": wall_s,
                 "sha256": content_hash(key, values, wall_s)}
        atomic_write_text(self._entry(key), json.dumps(entry, sort_keys=True, allow_nan=False) + "\n")
        atomic_write_text(self._index(parts.study, params_id(parts.study, parts.params, parts.fidelity)),
                          canonical(parts.as_json()))

    def why(self, parts: KeyParts) -> str:
        """Why a point without a valid entry runs: what changed since its last run, or that it never ran."""
        path = self._index(parts.study, params_id(parts.study, parts.params, parts.fidelity))
        try:
            last = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            return "it has not run before"
        now = parts.as_json()
        if not isinstance(last, dict) or not isinstance(last.get("files"), dict):
            return "its cache index entry is unreadable"
        changed = [f"topology file {name} changed" for name in sorted(now["files"])
                   if last.get("files", {}).get(name) != now["files"][name]]
        if last.get("source") != now["source"]:
            changed.append("kernbench source changed")
        if last.get("overrides") != now["overrides"]:
            changed.append("spec overrides changed")
        return ", ".join(changed) or "its cache entry is missing"
