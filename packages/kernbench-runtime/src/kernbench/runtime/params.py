"""Bench parameters: declared once (name, type, default, bounds, meaning), set on the command line or by
environment variables, checked before anything runs.

A bench declares ``params=(Param(...), ...)`` in its ``@bench``; its
``run(torch, p)`` receives the resolved values as a :class:`BenchParams`
(``p.M``, ``p["M"]``). Values come, lowest priority first, from the declared
default, the parameter's environment variable (``Param.env``), and
``kernbench run -p NAME=VALUE``. A value of the wrong type or outside its
bounds is refused with a :class:`ParamError` that names the parameter, the
value and what is allowed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kernbench.topology.errors import KernbenchError

_TYPES = {int: "integer", float: "number", str: "text"}


class ParamError(KernbenchError):
    """A bench parameter is unknown, ill-typed or out of bounds."""


@dataclass(frozen=True)
class Param:
    """One declared bench parameter.

    ``type`` is ``int``, ``float`` or ``str``; numbers may have bounds ``lo``
    and ``hi`` (inclusive), text may list its ``choices``; ``env`` is the
    environment variable that sets it (empty: none); ``unit`` goes into the
    help text.
    """

    name: str
    type: type
    default: object
    meaning: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    env: str = ""
    unit: str = ""

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ParamError(f"parameter {self.name}: type must be int, float or str, got {self.type!r}")
        self.check(self.default, "the declared default")

    @property
    def allowed(self) -> str:
        """What values are allowed, in words (for help and errors)."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        kind = _TYPES[self.type]
        if self.lo is not None and self.hi is not None:
            return f"an {kind} from {_num(self.lo)} to {_num(self.hi)}" if kind == "integer" else \
                f"a {kind} from {_num(self.lo)} to {_num(self.hi)}"
        if self.lo is not None:
            return f"{'an' if kind == 'integer' else 'a'} {kind} >= {_num(self.lo)}"
        return f"{'an' if kind == 'integer' else 'a'} {kind}"

    def parse(self, text: str, where: str) -> object:
        """``text`` converted to this parameter's type and checked; ``where`` says where it came from."""
        value: object = text
        if self.type in (int, float) and not text.isascii():
            # int() and float() read any Unicode digit (Arabic-Indic ٦٤, full-width ６４): accept what is typed
            # with 0-9 only, so a value means the same to every reader of the command line
            raise ParamError(f"{where}: {self.name}={_shown(text)} holds characters other than ASCII; write the "
                             f"number with the digits 0-9 (expected {self.allowed})")
        if self.type is int:
            try:
                value = int(text)
            except ValueError:
                try:
                    f = float(text)
                except ValueError:
                    f = math.nan
                if not (math.isfinite(f) and f == int(f)):
                    raise ParamError(f"{where}: {self.name}={_shown(text)} is not an integer; "
                                     f"expected {self.allowed}") from None
                value = int(f)
        elif self.type is float:
            try:
                value = float(text)
            except ValueError:
                raise ParamError(f"{where}: {self.name}={_shown(text)} is not a number; "
                                 f"expected {self.allowed}") from None
        return self.check(value, where)

    def check(self, value: object, where: str) -> object:
        """``value`` if it is allowed, else :class:`ParamError`."""
        if self.type in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParamError(f"{where}: {self.name}={value!r} is invalid; expected {self.allowed}")
            if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
                raise ParamError(f"{where}: {self.name}={value!r} is out of bounds; expected {self.allowed}")
        elif self.choices and value not in self.choices:
            raise ParamError(f"{where}: {self.name}={value!r} is invalid; expected {self.allowed}")
        return value

    def describe(self) -> str:
        """One line of help: name, type and bounds, default (an empty text as ``""``), meaning, environment
        variable."""
        unit = f" {self.unit}" if self.unit else ""
        env = f"  [env {self.env}]" if self.env else ""
        default = '"" (empty)' if self.default == "" else self.default
        return f"{self.name:14s} {self.allowed}{unit}; default {default}. {self.meaning}{env}"


def _shown(text: str) -> str:
    """``text`` quoted for an error, cut to 40 characters (a 5,000-digit value would fill the screen)."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text):,} characters)"


def _num(x: float) -> str:
    """A bound as people write it: whole numbers in full (``4194304``, not ``4.1943e+06``), else ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


class BenchParams(Mapping):
    """The resolved parameters of one bench run: ``p.NAME`` or ``p["NAME"]``."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, object]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __getattr__(self, name: str) -> object:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"this bench has no parameter {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"BenchParams({self._values!r})"


def resolve(bench: str, declared: tuple[Param, ...], given: Mapping[str, str] | None = None,
            environ: Mapping[str, str] | None = None) -> BenchParams:
    """Defaults, then environment variables, then ``given`` (``-p NAME=VALUE``): each checked."""
    env = os.environ if environ is None else environ
    by_name = {p.name: p for p in declared}
    unknown = sorted(set(given or {}) - set(by_name))
    if unknown:
        have = ", ".join(by_name) or "none"
        raise ParamError(f"bench {bench!r} has no parameter {unknown[0]!r}; its parameters: {have} "
                         f"(`kernbench list --params {bench}`)")
    values: dict[str, object] = {}
    for p in declared:
        if given and p.name in given:
            values[p.name] = p.parse(str(given[p.name]), f"bench {bench!r}, -p")
        elif p.env and p.env in env:
            values[p.name] = p.parse(env[p.env], f"bench {bench!r}, environment variable {p.env}")
        else:
            values[p.name] = p.default
    return BenchParams(values)


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """``["M=512", "VARIANT=load_load"]`` as a dict; :class:`ParamError` for an item without ``=``, and for a
    name given twice (``-p M=64 -p M=128``: which one was meant is a guess, so neither is taken)."""
    out: dict[str, str] = {}
    first: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ParamError(f"-p {_shown(item)}: expected NAME=VALUE, e.g. -p M=512")
        key = name.strip()
        if key in out:
            raise ParamError(f"-p {_shown(item)}: parameter {key} is already set by -p {_shown(first[key])}; give "
                             f"each parameter once")
        out[key], first[key] = value.strip(), item
    return out
