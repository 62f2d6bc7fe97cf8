"""kernbench.studies — the milestone studies: named grids, point functions and analytic models, the cached sweep
runner and its executors, results files, figures and the codesign report.

A study is one registration (:mod:`kernbench.studies.registry`): its :class:`~kernbench.studies.base.Study`
names its figures and its report section, so the figures and the report find everything from the registry.
"""

from importlib import metadata as _metadata

__version__ = _metadata.version("kernbench-studies")
