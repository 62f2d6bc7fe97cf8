"""The topologies that ship inside the package, usable from any folder.

``builtin("default")`` compiles the default topology; ``names()`` lists them
(``kernbench topology --list``); :func:`resolve` turns what a user typed (a
file path, a builtin name, or nothing) into a compiled graph;
:func:`export` writes a copy to edit. Packaged files are read through
:mod:`importlib.resources`, so they work from a wheel as well as a clone.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from kernbench.topology.compiler import compile_spec, load_topology
from kernbench.topology.errors import SpecError
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec_loader import expand_user, spec_from_yaml

PACKAGE = "kernbench.topology.topologies"
DEFAULT = "default"


def names() -> list[str]:
    """The builtin topology names, sorted (``default`` first)."""
    found = sorted(p.name[:-5] for p in resources.files(PACKAGE).iterdir() if p.name.endswith(".yaml"))
    return sorted(found, key=lambda n: (n != DEFAULT, n))


def text(name: str = DEFAULT) -> str:
    """The YAML text of builtin topology ``name``."""
    if name not in names():
        raise SpecError(f"unknown builtin topology {name!r}; builtin topologies: {', '.join(names())} "
                        f"(or give the path of a topology YAML file)")
    return resources.files(PACKAGE).joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def builtin(name: str = DEFAULT) -> TopologyGraph:
    """Compile builtin topology ``name`` (its cube mesh cached in the user cache directory)."""
    return compile_spec(spec_from_yaml(text(name), f"builtin:{name}"), cache=True)


def resolve(arg: str | Path | None = None) -> TopologyGraph:
    """A compiled topology from a file path, a builtin name, or (None) the builtin default.

    An existing file wins over a builtin of the same name; a name that is
    neither raises :class:`SpecError` listing the builtins.
    """
    if arg is None:
        return builtin(DEFAULT)
    if str(arg).startswith("builtin:"):  # the source a builtin records (spec.source)
        return builtin(str(arg)[len("builtin:"):])
    path = expand_user(arg)
    if path.exists() or path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        return load_topology(path)
    return builtin(str(arg))


def export(name: str, path: str | Path) -> Path:
    """Write builtin topology ``name`` to ``path`` (a file, or a folder to put ``<name>.yaml`` in); refuses to
    overwrite an existing file."""
    body = text(name)
    dest = expand_user(path)
    if dest.is_dir():
        dest = dest / f"{name}.yaml"
    if dest.exists():
        raise SpecError(f"{dest} already exists; choose another path or remove it first")
    try:  # "x" is O_CREAT|O_EXCL: no overwrite, and a symlink put there after the check is not followed
        with open(dest, "x", encoding="utf-8") as fh:
            fh.write(body)
    except FileExistsError:
        raise SpecError(f"{dest} already exists (or is a symbolic link); choose another path or remove it first") \
            from None
    except OSError as exc:
        raise SpecError(f"cannot write {dest}: {exc.strerror}; choose a writable path") from None
    return dest


#: The repository file name of each builtin topology (``topologies/<file>`` in a clone).
REPO_FILES = {DEFAULT: "topology.yaml"}


def topologies_folder(start: str | Path) -> Path:
    """A folder of the shipped topologies under their repository names (``topology.yaml``,
    ``6sip_2x3_torus_2d.yaml``, ...): the repository's ``topologies/`` above ``start`` when there is one (a
    clone; its files are the editable source), else a folder in the user cache directory holding the packaged
    copies (an unpacked sdist or an installed wheel).

    The cache folder is named by a digest of the packaged files, so every run of the same installed version
    reuses one folder (nothing is left behind per run) and another version gets its own; a file that is
    missing or differs from the packaged copy is rewritten atomically, so concurrent runs agree.
    """
    for parent in Path(start).resolve().parents:
        candidate = parent / "topologies"
        if (candidate / "topology.yaml").is_file():
            return candidate
    import hashlib

    from kernbench.topology.files import atomic_write_text, cache_root

    files = {REPO_FILES.get(name, f"{name}.yaml"): text(name) for name in names()}
    digest = hashlib.sha256()
    for fname, body in sorted(files.items()):
        digest.update(f"{fname}\0{len(body)}\0".encode() + body.encode())
    folder = cache_root() / "topologies" / digest.hexdigest()[:16]
    try:
        for fname, body in files.items():
            path = folder / fname
            if not path.is_file() or path.read_text(encoding="utf-8") != body:
                atomic_write_text(path, body)
    except OSError as exc:
        raise SpecError(f"cannot write the shipped topologies into {folder}: {exc.strerror or exc}; set "
                        f"KERNBENCH_CACHE_DIR to a writable folder") from None
    return folder
