"""The known studies, by name.

Each entry names the module that defines a ``STUDY`` (a
:class:`~kernbench.benches.studies.base.Study`); modules are imported on
first use, so listing names costs nothing. Adding a study is one entry here
(the ``gqa`` study joins when the attention library it measures lands).
"""

from __future__ import annotations

import importlib

from kernbench.benches.studies.base import Study, StudyError

#: Study name -> module defining ``STUDY``, in the order ``all`` runs them.
MODULES: dict[str, str] = {
    "gemm": "kernbench.benches.studies.gemm",
    "allreduce": "kernbench.benches.studies.allreduce",
    "gqa": "kernbench.benches.studies.gqa",
}


def study_names() -> tuple[str, ...]:
    """Every registered study name, in run order."""
    return tuple(MODULES)


def get_study(name: str) -> Study:
    """The study called ``name``; :class:`StudyError` listing the known names when there is none."""
    module = MODULES.get(name)
    if module is None:
        raise StudyError(f"unknown study {name!r}; known studies: {', '.join(MODULES)} (or 'all')")
    study = importlib.import_module(module).STUDY
    if study.name != name:
        raise StudyError(f"{module} defines study {study.name!r}, registered as {name!r}; fix the registry")
    return study


def resolve(names: str | list[str]) -> list[Study]:
    """Studies for a command-line selection: a name, ``all``, comma-separated names, or a list of names."""
    wanted = names.split(",") if isinstance(names, str) else list(names)
    if wanted == ["all"]:
        wanted = list(MODULES)
    return [get_study(n) for n in wanted]
