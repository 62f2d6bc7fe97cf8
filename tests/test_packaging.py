"""Every distribution declares what it imports, carries its license, and says what version it is.

The import scan reads each package's source (``ast``: imports at any depth,
including inside functions) and maps every imported top-level module to the
distribution that provides it; anything not in the standard library must be
a declared dependency of the importing distribution (an optional extra only
for imports made inside functions).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from . import package_chain

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = list(package_chain.distributions())
#: kernbench sub-package -> distribution
OWN = package_chain.owner()
#: third-party top-level module -> distribution
THIRD_PARTY = {"numpy": "numpy", "yaml": "pyyaml", "simpy": "simpy", "greenlet": "greenlet", "matplotlib": "matplotlib",
               "platformdirs": "platformdirs", "rich": "rich", "dask": "dask", "distributed": "dask"}


def _project(name: str) -> dict:
    return tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text())["project"]


def _requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower()


def _type_checking(node: ast.If) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports under it never run, like those in a function."""
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """(imported dotted module, at module level?, line) for each import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body} | {id(n) for s in tree.body if isinstance(s, ast.If) and not _type_checking(s)
                                        for n in s.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top, node.lineno))
    return out


def _distribution(module: str) -> str | None:
    """The distribution providing ``module``; None for the standard library."""
    head = module.split(".")[0]
    if head in sys.stdlib_module_names or head == "__future__":
        return None
    if head == "kernbench":
        return OWN[module.split(".")[1]]
    return THIRD_PARTY.get(head, f"<unknown: {head}>")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_import_is_a_declared_dependency(name):
    project = _project(name)
    declared = {_requirement_name(r) for r in project.get("dependencies", [])} | {name}
    extras = {_requirement_name(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    missing = []
    for path in sorted((ROOT / "packages" / name / "src").rglob("*.py")):
        for module, top_level, line in _imports(path):
            dist = _distribution(module)
            if dist is None or dist in declared or (dist in extras and not top_level):
                continue
            missing.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({dist})")
    assert not missing, f"{name} imports what its pyproject.toml does not declare:\n" + "\n".join(missing)


def test_the_scan_sees_an_undeclared_import(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import os\nimport numpy as np\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    import matplotlib\n\ndef f():\n    import dask.distributed\n")
    found = [(m, top) for m, top, _ in _imports(sample)]
    assert found == [("os", True), ("numpy", True), ("typing", True), ("matplotlib", False),
                     ("dask.distributed", False)]
    assert [_distribution(m) for m, _ in found] == [None, "numpy", None, "matplotlib", "dask"]


@pytest.mark.parametrize("name", PACKAGES)
def test_license_version_and_changelog_agree(name):
    project = _project(name)
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    pkg = ROOT / "packages" / name
    assert (pkg / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    headings = [line for line in (pkg / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    if headings[0] == "## Unreleased":  # changes since the last release, listed above it until the next one
        headings = headings[1:]
    assert headings[0].split()[1] == project["version"], \
        f"{name}: CHANGELOG's top release is not {project['version']}"


@pytest.mark.parametrize(("name", "module"), [("kernbench-topology", "kernbench.topology"),
                                              ("kernbench-sim", "kernbench.sim"),
                                              ("kernbench-components", "kernbench.components"),
                                              ("kernbench-runtime", "kernbench.runtime"),
                                              ("kernbench-ccl", "kernbench.ccl"),
                                              ("kernbench-benches", "kernbench.benches"),
                                              ("kernbench-studies", "kernbench.studies"),
                                              ("kernbench", "kernbench.cli")])
def test_every_package_reports_its_version(name, module):
    import importlib
    from importlib import metadata

    assert importlib.import_module(module).__version__ == metadata.version(name) == _project(name)["version"]


def test_sibling_requirements_admit_the_siblings_versions():
    versions = {name: _project(name)["version"] for name in PACKAGES}
    for name in PACKAGES:
        for req in _project(name).get("dependencies", []):
            dep = _requirement_name(req)
            if dep in versions:
                lo, hi = re.search(r">=([\d.]+),<([\d.]+)", req).groups()
                as_tuple = [tuple(int(x) for x in v.split(".")) for v in (lo, versions[dep], hi)]
                assert as_tuple[0] <= as_tuple[1] < as_tuple[2], f"{name} requires {req}, {dep} is {versions[dep]}"


# ------------------------------------------------------------------ the drawing extra and the packaging session


def test_drawing_is_an_extra_of_the_topology_compiler():
    """kernbench-topology alone brings no matplotlib; the packages that draw ask for its `draw` extra."""
    topology = _project("kernbench-topology")
    assert "matplotlib" not in {_requirement_name(r) for r in topology["dependencies"]}
    assert [_requirement_name(r) for r in topology["optional-dependencies"]["draw"]] == ["matplotlib"]
    for name in ("kernbench-studies", "kernbench"):
        (req,) = [r for r in _project(name)["dependencies"] if _requirement_name(r) == "kernbench-topology"]
        assert req.startswith("kernbench-topology[draw]"), f"{name} draws but requires {req}"


@pytest.fixture(scope="module")
def noxfile_module():
    """The repository's noxfile as a module, loaded once (nox registers its sessions on import)."""
    pytest.importorskip("nox")
    import importlib.util

    spec = importlib.util.spec_from_file_location("kernbench_noxfile_under_test", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def noxfile(noxfile_module, monkeypatch, tmp_path):
    """The noxfile with its build step a no-op and its temporary folders inside ``tmp_path / "temp"``."""
    import tempfile

    monkeypatch.setattr(noxfile_module, "build", lambda session: None)
    monkeypatch.setattr(noxfile_module, "SDIST_TESTED", ())  # nothing was built, so there are no sdists to unpack
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return noxfile_module, temp


class _Session:
    """Just enough of ``nox.Session`` for the packaging session; ``fail_at`` makes that ``run`` call raise."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls = 0
        self.fail_at = fail_at

    def run(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError(f"step {self.calls} failed")

    def chdir(self, path):
        import contextlib

        return contextlib.nullcontext()

    def log(self, *args):
        pass

    def warn(self, *args):
        self.warned = True

    def error(self, message):
        raise RuntimeError(message)


@pytest.mark.parametrize("fail_at", [None, 1, 4])
def test_the_packaging_session_removes_its_temporary_folder(noxfile, fail_at):
    module, temp = noxfile
    session = _Session(fail_at)
    if fail_at is None:
        module.packaging(session)
    else:
        with pytest.raises(RuntimeError, match=f"step {fail_at} failed"):
            module.packaging(session)
    assert session.calls >= (fail_at or 10)
    assert list(temp.iterdir()) == []


def test_the_report_install_hint_names_the_packages_ci_installs():
    """The installed report's hint (it cannot read .ci/) and .ci/tex-packages.txt (read by .ci/run and noxfile.py)
    name the same Debian packages (TeX, and poppler-utils for the report's page images)."""
    from kernbench.studies.report.build import TEX_PACKAGES

    ci = (ROOT / ".ci" / "tex-packages.txt").read_text().split()
    assert sorted(ci) == sorted(TEX_PACKAGES.split())
