"""The known studies, by name: one registration per study.

A study is a :class:`~kernbench.studies.base.Study` object. Its registration
is all there is to adding one: the study names its own figures
(``Study.figures``) and its report section (``Study.report``), and the runner,
:func:`kernbench.studies.figures.render_study` and
:func:`kernbench.studies.report.build.generate` find them here. Three ways in,
in the order ``all`` runs them:

1. the built-in studies (:data:`BUILTIN`, ``"module:ATTRIBUTE"`` of their ``Study``);
2. installed plugins: entry points of the group :data:`ENTRY_POINT_GROUP` (``kernbench.studies``), each
   ``NAME = "module:ATTRIBUTE"`` (or ``"module"``, meaning its ``STUDY``), sorted by name;
3. :func:`register` from code (embedding, tests), in the order registered. Such a study exists only in the
   process that registered it: run it with the serial executor, or make it an entry point for the process pool
   and Dask.

Modules are imported on first use, so listing names costs nothing. A plugin that reuses a taken name is
skipped with a warning.
"""

from __future__ import annotations

import importlib
import warnings
from importlib import metadata

from kernbench.studies.base import Study, StudyError

ENTRY_POINT_GROUP = "kernbench.studies"
#: Built-in study name -> ``"module:ATTRIBUTE"`` of its ``Study``, in the order ``all`` runs them.
BUILTIN: dict[str, str] = {
    "gemm": "kernbench.studies.gemm:STUDY",
    "allreduce": "kernbench.studies.allreduce:STUDY",
    "gqa": "kernbench.studies.gqa:STUDY",
    "moe": "kernbench.studies.moe:STUDY",
}
_REGISTERED: dict[str, Study] = {}


def load_ref(ref: str) -> object:
    """The object a ``"module:ATTRIBUTE"`` reference names (``"module"`` alone: its ``STUDY``)."""
    module, _, attr = ref.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in (attr or "STUDY").split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise StudyError(f"cannot load {ref!r}: {exc}") from None
    return obj


def _plugins() -> dict[str, str]:
    found: dict[str, str] = {}
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name in BUILTIN or ep.name in found:
            if found.get(ep.name) != ep.value and BUILTIN.get(ep.name) != ep.value:
                warnings.warn(f"study plugin {ep.name} = {ep.value} (entry point group {ENTRY_POINT_GROUP}) was "
                              f"skipped: the name {ep.name!r} is taken", stacklevel=2)
            continue
        found[ep.name] = ep.value
    return found


def _known() -> dict[str, str | Study]:
    known: dict[str, str | Study] = {**BUILTIN, **_plugins()}
    for name, study in _REGISTERED.items():
        known.setdefault(name, study)
    return known


def register(study: Study) -> Study:
    """Register ``study`` (from code) under its name; :class:`StudyError` when the name is taken. Returns it, so
    a module may write ``STUDY = register(Study(...))``."""
    if not isinstance(study, Study):
        raise StudyError(f"register() takes a Study, got {type(study).__name__}")
    if study.name in _known() and _REGISTERED.get(study.name) is not study:
        raise StudyError(f"a study named {study.name!r} is already registered")
    _REGISTERED[study.name] = study
    return study


def unregister(name: str) -> None:
    """Forget a study registered with :func:`register` (built-in and plugin studies stay)."""
    _REGISTERED.pop(name, None)


def study_names() -> tuple[str, ...]:
    """Every registered study name, in run order."""
    return tuple(_known())


def is_registered(name: str) -> bool:
    """Whether a study called ``name`` is registered."""
    return name in _known()


def get_study(name: str) -> Study:
    """The study called ``name``; :class:`StudyError` listing the known names when there is none."""
    known = _known()
    entry = known.get(name)
    if entry is None:
        raise StudyError(f"unknown study {name!r}; known studies: {', '.join(known)} (or 'all')")
    if isinstance(entry, Study):
        return entry
    study = load_ref(entry)
    if not isinstance(study, Study):
        raise StudyError(f"{entry} is a {type(study).__name__}, not a Study; fix the registration of {name!r}")
    if study.name != name:
        raise StudyError(f"{entry} defines study {study.name!r}, registered as {name!r}; fix the registry")
    return study


def resolve(names: str | list[str]) -> list[Study]:
    """Studies for a command-line selection: a name, ``all``, comma-separated names, or a list of names."""
    wanted = names.split(",") if isinstance(names, str) else list(names)
    if wanted == ["all"]:
        wanted = list(study_names())
    return [get_study(n) for n in wanted]
