"""The package chain, read from where it is written once: the ``kernbench-*`` dependencies in each package's
``pyproject.toml``.

``noxfile.py`` (which siblings a package's tests install), ``test_architecture.py`` (which way imports may
point) and ``test_packaging.py`` (which distributions exist) all ask this module, so adding a package, or moving
one in the chain, is an edit of its ``pyproject.toml`` alone.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower()


@cache
def _direct() -> dict[str, frozenset[str]]:
    """Distribution -> the project's distributions it depends on directly."""
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        found[project["name"]] = {_requirement_name(r) for r in project.get("dependencies", [])}
    return {name: frozenset(deps & found.keys()) for name, deps in found.items()}


@cache
def _optional() -> dict[str, frozenset[str]]:
    """Distribution -> the project's distributions it names in an optional extra only."""
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        found[project["name"]] = {_requirement_name(r) for reqs in project.get("optional-dependencies", {}).values()
                                  for r in reqs}
    direct = _direct()
    return {name: frozenset(deps & direct.keys()) for name, deps in found.items()}


@cache
def addons() -> dict[str, tuple[str, ...]]:
    """Add-on distribution -> the distributions whose optional extras bring it (``kernbench-accel`` ->
    ``kernbench-sim``, ``kernbench-topology``). An add-on depends on none of the project's distributions and none
    depends on it, except through an extra: it stands beside the chain, below every package that may use it."""
    direct, optional = _direct(), _optional()
    out: dict[str, set[str]] = {}
    for host, extras in optional.items():
        for name in extras:
            if direct[name] or any(name in deps for deps in direct.values()):
                raise ValueError(f"{name} is an optional extra of {host} but is also in the chain: an add-on "
                                 f"depends on no kernbench distribution and is required by none")
            out.setdefault(name, set()).add(host)
    return {name: tuple(sorted(hosts)) for name, hosts in out.items()}


@cache
def chain() -> tuple[str, ...]:
    """The distributions of the chain, each after all it depends on. The chain is a line, so the order is unique; a
    package that would make it a tree (two packages neither of which needs the other) is an error here."""
    direct, order = {n: d for n, d in _direct().items() if n not in addons()}, []
    while len(order) < len(direct):
        ready = sorted(n for n, deps in direct.items() if n not in order and deps <= set(order))
        if len(ready) != 1:
            raise ValueError(f"the package chain is not a line at {ready or 'a dependency cycle'}: "
                             f"make one depend on the other in its pyproject.toml")
        order.append(ready[0])
    return tuple(order)


@cache
def distributions() -> tuple[str, ...]:
    """Every distribution: the add-ons (which depend on none of ours), then the chain."""
    return (*sorted(addons()), *chain())


def below(name: str) -> list[str]:
    """The distributions ``name`` needs installed beside it: all that come before it in the chain (none for an
    add-on); add-ons are installed with the package whose extra names them."""
    if name in addons():
        return []
    order = chain()
    return list(order[:order.index(name)])


def subpackages(name: str) -> list[str]:
    """The ``kernbench.*`` sub-packages a distribution ships (its ``src/kernbench/`` folders)."""
    src = ROOT / "packages" / name / "src" / "kernbench"
    return sorted(p.name for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def layer(name: str) -> str:
    """A distribution's short name in the chain: the sub-package it is named after (``kernbench-sim`` ->
    ``sim``), or its only sub-package (``kernbench`` -> ``cli``)."""
    subs = subpackages(name)
    suffix = name.removeprefix("kernbench-")
    if suffix in subs:
        return suffix
    if len(subs) != 1:
        raise ValueError(f"{name} ships {subs}; name the distribution after one of them")
    return subs[0]


def owner() -> dict[str, str]:
    """``kernbench`` sub-package -> the distribution that ships it."""
    return {sub: name for name in distributions() for sub in subpackages(name)}


@cache
def modules() -> dict[str, Path]:
    """Every module of every package's ``src/``: dotted name -> file (a package by its ``__init__.py``)."""
    out = {}
    for src in sorted(ROOT.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out
