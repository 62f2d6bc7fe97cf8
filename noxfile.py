"""Every developer and CI action is a nox session.

    nox -s tests        each package in its own venv with its siblings from this tree
    nox -s integration  end-to-end tests in tests/ (CLI and public API)
    nox -s lint         ruff
    nox -s demo         the main job on the default topology
    nox -s docs         the Sphinx site, warnings as errors
    nox -s golden       golden op-log digests of every bench (-- --update rewrites them)
    nox -s benchmarks   simulator-speed benchmarks (not part of pass/fail)
    nox -s studies      the milestone studies (cached) into out/studies/ [-- kernbench study options]
    nox -s report       studies + figures + generated LaTeX + latexmk -> out/report/build/kernbench-codesign-report.pdf
"""

from __future__ import annotations

import shutil

import nox

nox.options.sessions = ["tests", "integration", "lint"]
nox.options.reuse_existing_virtualenvs = True

# Dependency order: each package installs with the siblings below it, from the local tree.
PACKAGES = {
    "kernbench-topology": [],
    "kernbench-sim": ["kernbench-topology"],
    "kernbench-components": ["kernbench-topology", "kernbench-sim"],
    "kernbench-runtime": ["kernbench-topology", "kernbench-sim", "kernbench-components"],
    "kernbench-ccl": ["kernbench-topology", "kernbench-sim", "kernbench-components", "kernbench-runtime"],
    "kernbench-benches": ["kernbench-topology", "kernbench-sim", "kernbench-components", "kernbench-runtime",
                          "kernbench-ccl"],
    "kernbench": ["kernbench-topology", "kernbench-sim", "kernbench-components", "kernbench-runtime",
                  "kernbench-ccl", "kernbench-benches"],
}
TEST_DEPS = ["pytest>=8", "hypothesis>=6"]
#: The viewer's browser tests drive Debian's chromium/chromium-driver (installed by .ci/run) through selenium.
BROWSER_DEPS = ["selenium>=4.10"]
#: Optional extras installed with a package wherever its tests run (the studies' Dask executor).
EXTRAS = {"kernbench-benches": "[dask]"}
TEX_PACKAGES = "latexmk texlive-latex-recommended texlive-latex-extra texlive-science poppler-utils"


def _install_tree(session: nox.Session, names: list[str]) -> None:
    session.install(*TEST_DEPS)
    session.install(*[f"./packages/{n}{EXTRAS.get(n, '')}" for n in names])


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """Install one package (and only its declared siblings) and run its unit tests."""
    _install_tree(session, [*PACKAGES[package], package])
    session.run("pytest", f"packages/{package}/tests", "-q", "-m", "not slow", *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """End-to-end tests of the CLI and public API across all packages."""
    _install_tree(session, list(PACKAGES))
    session.install(*BROWSER_DEPS)
    session.run("pytest", "tests", "-q", "-m", "not slow", *session.posargs)


@nox.session
def slow(session: nox.Session) -> None:
    """Heavy sweeps marked ``slow`` (not in the default run)."""
    _install_tree(session, list(PACKAGES))
    session.run("pytest", "packages", "tests", "-q", "-m", "slow", *session.posargs, success_codes=[0, 5])


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over every package, test and tool."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: compile the default topology, write its diagrams, run the probe and a composite GEMM."""
    session.install(*[f"./packages/{n}" for n in PACKAGES])
    session.run("kernbench", "topology", "topologies/topology.yaml", "--diagrams", "out/diagrams")
    session.run("kernbench", "probe", "--topology", "topologies/topology.yaml", "--strict")
    session.run("kernbench", "run", "--topology", "topologies/topology.yaml", "--bench", "matmul-composite",
                "--trace", "out/matmul-composite.trace.json")


@nox.session
def golden(session: nox.Session) -> None:
    """Compare every bench's golden op-log digests (tests/golden/); `-- --update` rewrites them. A digest that
    moves needs a commit message naming the model change that moved it."""
    session.install(*[f"./packages/{n}" for n in PACKAGES])
    session.run("python", "tests/golden/oplog_digest.py", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx + MyST site with warnings as errors into docs/_build/html."""
    session.install("sphinx>=7", "myst-parser>=2", *[f"./packages/{n}" for n in PACKAGES])
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")


@nox.session
def benchmarks(session: nox.Session) -> None:
    """Simulator speed and model figures: engine vs bare SimPy, probe and compile time, the 2048-tile GEMM, 128K
    decode, the 6-SIP all-reduce study, the web viewer's load time."""
    session.install(*[f"./packages/{n}" for n in PACKAGES])
    session.run("python", "benchmarks/bench_fabric.py", *session.posargs)
    session.run("python", "benchmarks/bench_kernels.py")
    session.run("python", "benchmarks/bench_attention.py")
    session.run("python", "benchmarks/bench_allreduce.py")
    session.install(*BROWSER_DEPS)  # the viewer's load time in headless Chromium (Debian chromium, chromium-driver)
    session.run("python", "benchmarks/bench_web.py")


@nox.session
def studies(session: nox.Session) -> None:
    """Run every milestone study (cached in the user cache directory) into out/studies/NAME/; extra arguments go to
    `kernbench study all` (e.g. `-- --jobs 2 --dry-run`)."""
    session.install(*[f"./packages/{n}{EXTRAS.get(n, '')}" for n in PACKAGES])
    session.run("kernbench", "study", "all", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """The codesign report: the studies (cached), their figures, the generated LaTeX, then latexmk into
    out/report/build/kernbench-codesign-report.pdf. Needs TeX from Debian packages (.ci/run installs them)."""
    if shutil.which("latexmk") is None or shutil.which("pdflatex") is None:
        session.error(f"latexmk/pdflatex not found; install TeX first: apt-get update && apt-get install -y "
                      f"{TEX_PACKAGES}")
    session.install(*[f"./packages/{n}{EXTRAS.get(n, '')}" for n in PACKAGES])
    session.run("kernbench", "study", "all", *session.posargs)
    session.run("kernbench", "report")
