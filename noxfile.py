"""Every developer and CI action is a nox session.

    nox -s tests        each package in its own venv with its siblings from this tree
    nox -s integration  end-to-end tests in tests/ (CLI and public API)
                        both run the larger suites in pytest-xdist workers, one per core and at most four
                        (KERNBENCH_TEST_JOBS=N sets how many, 1 for none; `-- -n 0` for one run; ADR 0001 amended)
    nox -s lint         ruff
    nox -s demo         the main job on the default topology
    nox -s docs         the Sphinx site, warnings as errors, checked in headless Chromium [-- sphinx-build options,
                        e.g. --jobs 2]; KERNBENCH_DOCS_STUDIES=skip etc. leave parts out (ADR 0036)
    nox -s docs_check   the same site without study runs, gallery runs or the links page's run, and the same
                        browser checks: the docs in CI's default run, under a minute (ADR 0036)
    nox -s golden       golden op-log digests of every bench (-- --update rewrites them)
    nox -s mutation     the mutation score: realistic one-line bugs the tests must catch (tests/mutation/)
    nox -s benchmarks   simulator-speed benchmarks into out/benchmarks/ (not part of pass/fail)
    nox -s studies      the milestone studies (cached) into out/studies/ [-- kernbench study options]
    nox -s report       studies + figures + generated LaTeX + latexmk -> out/report/build/kernbench-codesign-report.pdf
    nox -s build        a wheel and an sdist of every package into dist/
    nox -s packaging    each package installed alone from dist/ in a fresh venv, imported and smoke-tested; the
                        kernbench command run from a folder outside the repository; sdist tests run unpacked
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tarfile
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nox

nox.options.sessions = ["tests", "integration", "lint", "packaging", "docs_check"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"  # uv when installed (CI installs it): much faster installs

# Dependency order, read from each package's pyproject.toml (tests/package_chain.py): each package installs with
# the siblings below it, from the local tree.
_spec = importlib.util.spec_from_file_location("package_chain", Path(__file__).parent / "tests" / "package_chain.py")
package_chain = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(package_chain)
PACKAGES = {name: package_chain.below(name) for name in package_chain.distributions()}
#: The packages every install needs, in chain order; the add-ons (compiled, optional) come with _install_addons.
CHAIN = list(package_chain.chain())
#: Add-on -> the packages whose extras bring it (kernbench-accel, the compiled calendar and route search, for
#: kernbench-sim and kernbench-topology).
ADDONS = package_chain.addons()
#: Set by .ci/run: an add-on that does not build fails the session instead of falling back to pure Python.
REQUIRE_ACCEL = "KERNBENCH_REQUIRE_ACCEL"
#: pytest-xdist runs the larger suites in several worker processes (see _parallel).
TEST_DEPS = ["pytest>=8", "hypothesis>=6", "pytest-xdist>=3.2"]
#: Packages whose unit tests run in parallel workers: where that saved time on two cores (ADR 0001, amended). The
#: others finish in seconds, most of it importing and collecting, which every worker would do again.
PARALLEL_PACKAGES = ("kernbench-topology", "kernbench-runtime", "kernbench-ccl", "kernbench-benches",
                     "kernbench-studies")
#: The viewer's browser tests drive Debian's chromium/chromium-driver (installed by .ci/run) through selenium.
BROWSER_DEPS = ["selenium>=4.10"]
#: Optional extras installed with a package wherever its tests run (the studies' Dask executor; the topology's
#: drawing tests need matplotlib, its `draw` extra).
EXTRAS = {"kernbench-topology": "[draw]", "kernbench-studies": "[dask]"}
#: The Debian packages of the report's TeX toolchain, one a line in .ci/tex-packages.txt (also read by .ci/run).
TEX_PACKAGES = " ".join((Path(__file__).parent / ".ci" / "tex-packages.txt").read_text().split())


def _test_workers() -> int:
    """How many pytest-xdist workers a large test run uses: ``KERNBENCH_TEST_JOBS`` when set (1 runs the tests in
    the pytest process itself), else the cores this process may use, at most 4."""
    if os.environ.get("KERNBENCH_TEST_JOBS"):
        return max(1, int(os.environ["KERNBENCH_TEST_JOBS"]))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, 4)


def _parallel() -> list[str]:
    """pytest options that spread the tests over :func:`_test_workers` processes; an idle worker takes tests
    queued for a busy one (``worksteal``), so a few long tests do not leave a core idle at the end. Each worker
    keeps its own session fixtures; every test writes only under its own ``tmp_path``."""
    workers = _test_workers()
    return ["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []


def _install_tree(session: nox.Session, names: list[str]) -> None:
    session.install(*TEST_DEPS)
    chain = [n for n in names if n not in ADDONS]
    if chain:
        session.install(*[f"./packages/{n}{EXTRAS.get(n, '')}" for n in chain])
    _install_addons(session, names)


def _install_addons(session: nox.Session, names: list[str], editable: bool = False, silent: bool | None = None) -> bool:
    """Install each add-on that ``names`` includes, or whose host package it includes (kernbench-accel with
    kernbench-sim). An add-on is compiled: on a machine without a C compiler its build fails, and the packages run
    on their pure-Python fallback with identical results, so the session goes on with a warning; with
    ``KERNBENCH_REQUIRE_ACCEL`` set (CI) it fails. Returns whether every wanted add-on is importable."""
    ok = True
    for addon, hosts in ADDONS.items():
        if addon not in names and not set(hosts) & set(names):
            continue
        session.install(*(["-e"] if editable else []), f"./packages/{addon}", success_codes=[0, 1, 2], silent=silent)
        found = session.run("python", "-c", f"import importlib.util as u; print(u.find_spec({_ADDON_MODULE[addon]!r}) "
                                            f"is not None)", silent=True)
        if not found or found.strip() != "True":
            if os.environ.get(REQUIRE_ACCEL):
                session.error(f"{addon} did not build or import ({REQUIRE_ACCEL} is set); it needs a C compiler and "
                              f"the Python headers (Debian: gcc, python3-dev)")
            session.warn(f"{addon} did not build (no C compiler or Python headers?): running on the pure-Python "
                         f"fallback, which gives the same results, slower")
            ok = False
    return ok


#: The compiled module each add-on provides (what _install_addons checks after installing it).
_ADDON_MODULE = {"kernbench-accel": "kernbench.accel._calendar"}  # (its _routes is built with it)


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """Install one package (and only its declared siblings) and run its unit tests."""
    _install_tree(session, [*PACKAGES[package], package])
    if package in ADDONS and not _install_addons(session, [package]):
        session.skip(f"{package} did not build here; its fallback is tested with {', '.join(ADDONS[package])}")
    parallel = _parallel() if package in PARALLEL_PACKAGES else []
    session.run("pytest", f"packages/{package}/tests", "-q", "-m", "not slow", *parallel, *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """End-to-end tests of the CLI and public API across all packages."""
    _install_tree(session, list(PACKAGES))
    session.install(*BROWSER_DEPS)
    session.run("pytest", "tests", "-q", "-m", "not slow", *_parallel(), *session.posargs)


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
    """The main job: compile the default topology, write its diagrams, run the probe and a composite GEMM. Each
    step is announced first; the install stays quiet (its output only shows when it fails)."""
    session.log(f"demo 1/4: installing the {len(CHAIN)} kernbench packages and their dependencies (numpy, simpy, "
                f"matplotlib, ...) into this session's virtual environment, and the compiled event calendar where a C "
                f"compiler is found; the first time this can take a few minutes and prints nothing until it is done")
    session.install(*[f"./packages/{n}" for n in CHAIN], silent=True)
    _install_addons(session, CHAIN, silent=True)
    session.log("demo 2/4: compiling the default topology and writing its four diagrams to out/diagrams/")
    session.run("kernbench", "topology", "--diagrams", "out/diagrams")
    session.log("demo 3/4: running the probe (host and PE-DMA transfers against their formula, then its invariants)")
    session.run("kernbench", "probe", "--strict")
    session.log("demo 4/4: running the matmul-composite bench (a 512x512x512 GEMM on one PE) and writing its trace "
                "to out/matmul-composite.trace.json")
    session.run("kernbench", "run", "--bench", "matmul-composite", "--trace", "out/")
    session.log("next: kernbench list --params | kernbench run --bench gqa-headline | nox -s report")


@nox.session
def golden(session: nox.Session) -> None:
    """Compare every bench's golden op-log digests (tests/golden/); `-- --update` rewrites them. A digest that
    moves needs a commit message naming the model change that moved it."""
    session.install(*[f"./packages/{n}" for n in CHAIN])
    _install_addons(session, CHAIN)
    session.run("python", "tests/golden/oplog_digest.py", *session.posargs)


@nox.session
def mutation(session: nox.Session) -> None:
    """Apply each curated one-line bug of tests/mutation/mutations.py to a private copy of the tree and run the
    tests meant to catch it; fails below a 90 % score. `-- --jobs 2 --only ID` and the script's other options."""
    _install_tree(session, list(PACKAGES))
    session.install(*BROWSER_DEPS)
    session.run("python", "tests/mutation/mutate.py", *(session.posargs or ["--jobs", "2"]))


#: What the docs site needs on top of the packages (ADR 0036): the theme, the copy buttons, the landing page's grid
#: and tabs, the gallery (which runs examples/ with matplotlib); the browser tests run against the built site.
DOCS_DEPS = ["sphinx>=7", "myst-parser>=2", "furo>=2024.8", "sphinx-copybutton>=0.5", "sphinx-design>=0.6",
             "sphinx-gallery>=0.17"]
DOCS_HTML = "docs/_build/html"
DOCS_SCREENSHOTS = "out/docs-screenshots"
#: The docs check (CI): its own output and doctrees, so it never makes the full site's next build start over.
DOCS_CHECK_HTML = "docs/_build/check/html"
DOCS_CHECK_DOCTREES = "docs/_build/check/doctrees"
DOCS_CHECK_SCREENSHOTS = "out/docs-check"
#: What the docs check leaves out: the study runs (minutes on a cold cache), the gallery runs and the links page's
#: all-reduce run and viewer screenshot. Every page is still built and says what it does not show.
DOCS_SKIP = {"KERNBENCH_DOCS_STUDIES": "skip", "KERNBENCH_DOCS_GALLERY": "skip", "KERNBENCH_DOCS_VIEWER": "skip"}


def _docs_install(session: nox.Session) -> None:
    """Install the docs tools and the packages (editable: the site documents and runs the tree as it is) unless
    this virtual environment already holds exactly that. The stamp is the requirement list and every package's
    pyproject.toml, so a warm session installs nothing, and a changed dependency or entry point reinstalls."""
    wanted = [*DOCS_DEPS, *TEST_DEPS, *BROWSER_DEPS]
    digest = hashlib.sha256("\n".join(wanted).encode())
    for name in PACKAGES:
        digest.update(Path(f"packages/{name}/pyproject.toml").read_bytes())
    stamp = Path(session.virtualenv.location) / ".kernbench-docs-install"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        session.log("docs: the docs tools and the packages (editable) are installed already; nothing to install")
        return
    session.install(*wanted, *[a for name in CHAIN for a in ("-e", f"./packages/{name}")])
    _install_addons(session, CHAIN, editable=True)
    stamp.write_text(digest.hexdigest())


def _browser_checks(session: nox.Session, html: str, screenshots: str) -> None:
    """tests/test_docs_browser.py on the site in ``html``, keeping its screenshots in ``screenshots``."""
    session.run("pytest", "tests/test_docs_browser.py", "-q", "-m", "slow", "-p", "no:cacheprovider",
                env={"KERNBENCH_DOCS_HTML": html, "KERNBENCH_DOCS_SCREENSHOTS": screenshots})


def _point_seconds() -> float:
    """Seconds on one core per study point of the committed cold-run benchmark (benchmarks/results/studies.json:
    every study, two workers): the estimate for a study with no results of its own yet."""
    import json
    import re

    try:
        run = json.loads(Path("benchmarks/results/studies.json").read_text())["runs"]["cold_all_jobs2"]
        return 2 * run["wall_s"] / int(re.search(r"(\d+) points run", run["summary"]).group(1))
    except (OSError, ValueError, KeyError, AttributeError):
        return 1.0


def _study_estimate(session: nox.Session) -> None:
    """Say before the build whether it must simulate study points, and roughly for how long: `kernbench study all
    --dry-run` marks each point cached or not; each study's last results.json holds its points' wall times."""
    import json
    import re

    if os.environ.get("KERNBENCH_DOCS_STUDIES") == "skip":
        session.log("docs: KERNBENCH_DOCS_STUDIES=skip, the study pages will say they were not built")
        return
    out = session.run("kernbench", "study", "all", "--dry-run", silent=True) or ""
    missing: dict[str, list[int]] = {}
    for m in re.finditer(r"^(\w+)\[(\d+)\] .*: (.+)$", out, re.MULTILINE):
        if m.group(3) != "cached":
            missing.setdefault(m.group(1), []).append(int(m.group(2)))
    if not missing:
        session.log("docs: every study point is in the cache; the study pages only redraw their figures")
        return
    seconds = 0.0
    for study, idx in missing.items():
        try:
            walls = json.loads(Path(f"out/studies/{study}/results.json").read_text())["provenance"]["run"]
            walls = walls["point_wall_s"]
        except (OSError, ValueError, KeyError):
            walls = []
        seconds += sum(walls[i] for i in idx if i < len(walls)) if walls else _point_seconds() * len(idx)
    jobs = os.cpu_count() or 1
    total = re.search(r"dry run: (\d+) points", out)
    session.log(f"docs: {sum(map(len, missing.values()))} of {total.group(1) if total else '?'} study points are "
                f"not cached ({', '.join(f'{k}: {len(v)}' for k, v in missing.items())}); the build simulates them "
                f"first, about {max(seconds / jobs / 60, 1):.0f} min on {jobs} cores (KERNBENCH_DOCS_STUDIES=skip "
                f"builds without them)")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx + MyST site with warnings as errors into docs/_build/html, then check it in headless
    Chromium (tests/test_docs_browser.py) and keep screenshots under out/docs-screenshots/.

    Extra arguments go to sphinx-build (`-- --jobs 2` reads and writes pages in 2 processes). The build reuses the
    study cache (it says first how many points it must simulate and roughly how long) and the gallery's (a script
    runs again only when its text changes). KERNBENCH_DOCS_STUDIES=skip, KERNBENCH_DOCS_VIEWER=skip and
    KERNBENCH_DOCS_GALLERY=skip leave out the studies, the links page's run and screenshot, and the gallery runs;
    the pages then say so."""
    import time

    _docs_install(session)
    _study_estimate(session)
    start = time.monotonic()
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", *session.posargs, "docs", DOCS_HTML)
    session.log(f"docs: sphinx-build took {time.monotonic() - start:.0f} s")
    _browser_checks(session, DOCS_HTML, DOCS_SCREENSHOTS)
    session.log(f"docs: site in {DOCS_HTML}/index.html, screenshots in {DOCS_SCREENSHOTS}/")


@nox.session
def docs_check(session: nox.Session) -> None:
    """The docs site as CI builds it (ADR 0036): every page, warnings as errors, without the study runs, the
    gallery runs and the links page's run (the pages say so), into docs/_build/check/html; then the same browser
    checks as `nox -s docs` (no console error, no sideways scrolling at 390 and 1400 px, every image loading,
    every internal link and anchor resolving), screenshots in out/docs-check/. Extra arguments go to
    sphinx-build. The generated pages it writes into docs/ are the skipped ones: a later `nox -s docs` rewrites
    them (and re-reads only those pages)."""
    import time

    _docs_install(session)
    start = time.monotonic()
    session.run("sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "-d", DOCS_CHECK_DOCTREES,
                *session.posargs, "docs", DOCS_CHECK_HTML, env=DOCS_SKIP)
    session.log(f"docs_check: sphinx-build took {time.monotonic() - start:.0f} s")
    _browser_checks(session, DOCS_CHECK_HTML, DOCS_CHECK_SCREENSHOTS)


@nox.session
def benchmarks(session: nox.Session) -> None:
    """Simulator speed and model figures: engine vs bare SimPy, probe and compile time, the 2048-tile GEMM, 128K
    decode, the 6-SIP all-reduce study, the web viewer's load time."""
    session.install(*[f"./packages/{n}" for n in CHAIN])
    _install_addons(session, CHAIN)
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
    session.install(*[f"./packages/{n}{EXTRAS.get(n, '')}" for n in CHAIN])
    _install_addons(session, CHAIN)
    session.run("kernbench", "study", "all", *session.posargs)


def _ensure_debian_packages(session: nox.Session, commands: tuple[str, ...], packages: str) -> None:
    """Install Debian `packages` with apt-get (through sudo when not root) unless every one of `commands` is on
    PATH; fail with the command to run by hand where apt-get is not available."""
    if all(shutil.which(c) for c in commands):
        return
    apt = shutil.which("apt-get")
    if apt is None:
        session.error(f"{', '.join(commands)} not found and no apt-get here; install them (Debian: apt-get install "
                      f"-y {packages}) and rerun")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    if sudo and shutil.which("sudo") is None:
        session.error(f"{', '.join(commands)} not found; as root run: apt-get update && apt-get install -y {packages}")
    session.run(*sudo, apt, "update", external=True)
    session.run(*sudo, "env", "DEBIAN_FRONTEND=noninteractive", apt, "install", "-y", *packages.split(),
                external=True)


@nox.session
def report(session: nox.Session) -> None:
    """The codesign report: the studies (cached), their figures, the generated LaTeX, then latexmk into
    out/report/build/kernbench-codesign-report.pdf. Installs TeX from Debian packages (apt-get) when missing.
    The hand-written LaTeX is package data of kernbench-studies (its report/tex/ folder, ADR 0030), so
    the report is built from the sources installed into this session, as from any installed kernbench."""
    _ensure_debian_packages(session, ("latexmk", "pdflatex", "pdftotext"), TEX_PACKAGES)
    session.install(*[f"./packages/{n}{EXTRAS.get(n, '')}" for n in CHAIN])
    _install_addons(session, CHAIN)
    session.run("kernbench", "study", "all", *session.posargs)
    session.run("kernbench", "report")


#: A command that shows each installed package works on its own (run in the package's fresh venv).
SMOKE = {
    # alone, the compiler has no drawing dependency: matplotlib is absent and a drawing call names the extra
    "kernbench-topology": ("import importlib.util, tempfile\nfrom kernbench.topology import builtin, emit_diagrams\n"
                           "from kernbench.topology.diagrams import DrawingUnavailableError\n"
                           "g = builtin(); print(len(g.nodes), 'nodes')\n"
                           "assert importlib.util.find_spec('matplotlib') is None, 'matplotlib came along'\n"
                           "with tempfile.TemporaryDirectory() as d:\n    try:\n        emit_diagrams(g, d)\n"
                           "    except DrawingUnavailableError as exc:\n        print(exc)\n    else:\n"
                           "        raise SystemExit('drew without matplotlib')"),
    # the compiled calendar imports alone: it needs no kernbench package (the engine binds its fabric classes)
    "kernbench-accel": "from kernbench.accel._calendar import Calendar, bind; print(Calendar.__name__)",
    "kernbench-sim": "from kernbench.sim import GraphEngine, MemoryWriteMsg; print(GraphEngine.__name__)",
    "kernbench-components": ("from kernbench.components import default_registry\n"
                             "from kernbench.sim import GraphEngine\nfrom kernbench.topology import builtin\n"
                             "print(len(GraphEngine(builtin(), default_registry()).components), 'components')"),
    "kernbench-runtime": ("import numpy as np\nfrom kernbench.runtime import session\nwith session(data=True) as t:\n"
                          "    print(t.to_numpy(t.from_numpy(np.ones(4, np.float16)))[0])"),
    "kernbench-ccl": ("from kernbench.runtime import session\nwith session() as t:\n"
                      "    print(type(t.distributed).__name__)"),
    # the benches and the model layers draw nothing: no matplotlib comes with them
    "kernbench-benches": ("from kernbench.runtime.bench import discover; print(len(discover().benches), 'benches')\n"
                          "from kernbench.layers.attention import gqa_decode\n"
                          "from kernbench.layers.tp import ParallelMLP\nimport importlib.util\n"
                          "assert importlib.util.find_spec('matplotlib') is None, 'matplotlib came along'"),
    # the report's LaTeX sources come with the wheel, so `kernbench report` builds from any folder
    "kernbench-studies": ("from kernbench.studies.registry import study_names; print('studies:', *study_names())\n"
                          "from kernbench.studies.report.build import source_dir\nsrc = source_dir(None)\n"
                          "assert (src / 'main.tex').is_file() and len(list((src / 'sections').glob('*.tex'))) >= 10\n"
                          "print('report sources:', src)"),
    "kernbench": "import kernbench.cli; print(kernbench.cli.__version__)",
}
#: Packages whose unit tests are also run from their unpacked sdist (the others need siblings' test data).
SDIST_TESTED = ("kernbench-topology", "kernbench-sim", "kernbench-components")
#: Extras a package's own unit tests need on top of the package (its drawing tests need matplotlib).
SDIST_TEST_EXTRAS = {"kernbench-topology": "[draw]"}


def _version(package: str) -> str:
    return tomllib.loads(Path(f"packages/{package}/pyproject.toml").read_text())["project"]["version"]


@nox.session
def build(session: nox.Session) -> None:
    """Build a wheel and an sdist of every package into dist/ (emptied first)."""
    session.install("build>=1")
    shutil.rmtree("dist", ignore_errors=True)
    Path("dist").mkdir()
    installer = ("--installer", "uv") if shutil.which("uv") else ()

    def one(package: str) -> None:
        tolerated = [0, 1] if package in ADDONS and not os.environ.get(REQUIRE_ACCEL) else [0]
        session.run("python", "-m", "build", *installer, "--outdir", "dist", f"packages/{package}", silent=True,
                    success_codes=tolerated)

    # Each build runs one Python process at a time: as many builds at once as the tests use workers.
    with ThreadPoolExecutor(max_workers=_test_workers()) as pool:
        list(pool.map(one, PACKAGES))
    session.log("built: " + ", ".join(sorted(p.name for p in Path("dist").iterdir())))


@nox.session
def packaging(session: nox.Session) -> None:
    """Every package alone from dist/ in a fresh venv (PyPI for third-party dependencies): import, smoke command;
    `kernbench probe --strict` and `kernbench run --bench matmul-composite` from a folder outside the repository;
    the unit tests of a few packages run from their unpacked sdist. The temporary folder holding the venvs (about
    170 MB) is removed at the end, also when a step fails."""
    build(session)
    work = Path(tempfile.mkdtemp(prefix="kernbench-packaging-"))
    try:
        _check_packages(session, Path("dist").resolve(), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_packages(session: nox.Session, dist: Path, work: Path) -> None:
    """The packaging session's checks, with every venv and file under ``work``."""
    pip = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    uv = shutil.which("uv")
    for package in PACKAGES:
        if package in ADDONS and not list(dist.glob(f"{package.replace('-', '_')}-{_version(package)}-*.whl")):
            session.warn(f"{package} did not build here (no C compiler?): its wheel is not checked")
            continue
        venv = work / package
        py = str(venv / "bin" / "python")
        if uv:
            session.run(uv, "venv", "--quiet", "--python", "python3", str(venv), external=True)
            # Our wheels keep their version between commits: without a refresh uv reuses the copy it cached on
            # an earlier run instead of the one just built into dist/.
            refresh = [a for name in PACKAGES for a in ("--refresh-package", name)]
            install = (uv, "pip", "install", "--quiet", *refresh, "--python", py)
        else:
            session.run("python", "-m", "venv", str(venv), silent=True)
            install = (py, *pip)
        session.run(*install, "--find-links", str(dist), f"{package}=={_version(package)}", external=True)
        session.run(py, "-c", SMOKE[package], external=True)
        if package in SDIST_TESTED:
            stem = f"{package.replace('-', '_')}-{_version(package)}"
            with tarfile.open(dist / f"{stem}.tar.gz") as sdist:
                sdist.extractall(work / "sdists", filter="data")
            extra = SDIST_TEST_EXTRAS.get(package)
            with_extra = (f"{package}{extra}=={_version(package)}",) if extra else ()
            session.run(*install, "--find-links", str(dist), *TEST_DEPS, *with_extra, external=True)
            with session.chdir(work / "sdists" / stem):
                parallel = _parallel() if package in PARALLEL_PACKAGES else []
                # each package alone: no add-on here, so tests of the compiled calendar skip even in CI
                session.run(py, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider", *parallel, "tests",
                            external=True, env={"KERNBENCH_CACHE_DIR": str(work / "cache"), REQUIRE_ACCEL: ""})
    kb = str(work / "kernbench" / "bin" / "kernbench")
    outside = work / "elsewhere"
    outside.mkdir()
    with session.chdir(outside):
        session.run(kb, "--version", external=True)
        session.run(kb, "probe", "--strict", external=True)
        session.run(kb, "run", "--bench", "matmul-composite", "--json", external=True, silent=True)
    leftovers = sorted(p.name for p in outside.iterdir())
    if leftovers:
        session.error(f"kernbench wrote into the folder it was run from: {leftovers}")
