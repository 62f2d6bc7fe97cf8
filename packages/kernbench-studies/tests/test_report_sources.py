"""The report's LaTeX sources are package data: the report builds from any folder, there is one copy of them, the
title page says truthfully where the results came from, and a failed build leaves no empty folder."""

from __future__ import annotations

import copy
import fnmatch
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from kernbench.studies.base import SchemaError, StudyError
from kernbench.studies.report import build
from kernbench.studies.report.numbers import Numbers

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parents[1]
TOPOLOGIES = ROOT / "topologies"
#: The report sources in this source tree (the installed package's copy is build.PACKAGED_SOURCE).
TREE_SOURCE = PACKAGE / "src" / "kernbench" / "studies" / "report" / "tex"


def _main_tex_files(top: Path) -> list[Path]:
    """Every main.tex under ``top``, outside hidden folders and build outputs (out/, build/, dist/)."""
    found = []
    for folder, names, files in os.walk(top):
        names[:] = [n for n in names if not n.startswith(".") and n not in ("out", "build", "dist", "_build")]
        found += [Path(folder) / f for f in files if f == "main.tex"]
    return found


def test_the_sources_live_in_the_package_and_nowhere_else():
    assert (TREE_SOURCE / "main.tex").is_file() and (TREE_SOURCE / "reference" / "seed-claims.tex").is_file()
    assert len(list((TREE_SOURCE / "sections").glob("*.tex"))) >= 10
    assert _main_tex_files(ROOT) == [TREE_SOURCE / "main.tex"], "a second copy of the report sources"
    for path in TREE_SOURCE.rglob("*.tex"):  # what the installed package builds from is this tree's files
        assert (build.PACKAGED_SOURCE / path.relative_to(TREE_SOURCE)).read_bytes() == path.read_bytes()


def test_package_data_ships_every_source_file():
    globs = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "kernbench.studies.report"]
    files = [p.relative_to(TREE_SOURCE.parent).as_posix() for p in TREE_SOURCE.rglob("*") if p.is_file()]

    def matches(path: str, glob: str) -> bool:  # setuptools' globs: `*` stays inside one folder
        parts, pattern = path.split("/"), glob.split("/")
        return len(parts) == len(pattern) and all(map(fnmatch.fnmatchcase, parts, pattern))

    assert files and all(any(matches(f, g) for g in globs) for f in files), files


@pytest.fixture(scope="module")
def studies(synthetic, tmp_path_factory):
    """Synthetic results of every study, written once: (folder, documents)."""
    folder = tmp_path_factory.mktemp("studies")
    return folder, synthetic.write_synthetic(folder)


@pytest.fixture(scope="module")
def drawn(studies, tmp_path_factory, seed_figures):
    """A report generated once from the synthetic results, with the default (packaged) sources: (folder,
    Generated). Drawing the figures takes most of the time: they are drawn once for the test run."""
    folder = tmp_path_factory.mktemp("drawn") / "out"
    seed_figures(folder)
    return folder, build.generate(studies[0], None, folder, TOPOLOGIES)


@pytest.fixture
def out(drawn, tmp_path):
    """A private copy of the generated report: generating into it again redraws no figure."""
    return Path(shutil.copytree(drawn[0], tmp_path / "out"))


def test_generate_from_any_folder_uses_the_packaged_sources(studies, out, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no report/ here: the command line's default source used to fail
    for source in (None, Path("report")):
        gen = build.generate(studies[0], source, out, TOPOLOGIES)
        for src in [build.PACKAGED_SOURCE / "main.tex", *(build.PACKAGED_SOURCE / "sections").glob("*.tex")]:
            assert (gen.tex_dir / src.relative_to(build.PACKAGED_SOURCE)).read_bytes() == src.read_bytes()
    assert sorted(p.name for p in elsewhere.iterdir()) == []


def test_another_source_folder_builds_from_it_and_a_wrong_one_is_one_clear_error(studies, out, tmp_path):
    mine = tmp_path / "mine"
    shutil.copytree(build.PACKAGED_SOURCE, mine)
    (mine / "main.tex").write_text((mine / "main.tex").read_text() + "% my copy\n")
    gen = build.generate(studies[0], mine, out, TOPOLOGIES)
    assert gen.main.read_text().endswith("% my copy\n")
    with pytest.raises(StudyError, match=r"nowhere/main.tex does not exist; pass --source DIR .* leave it out"):
        build.generate(studies[0], tmp_path / "nowhere", tmp_path / "out2", TOPOLOGIES)
    assert not (tmp_path / "out2").exists()


@pytest.mark.parametrize(("provenance", "text"), [
    ({"git_commit": "66f3cc6a1b2c3d4e5f60718293a4b5c6d7e8f901", "packages": {"kernbench-benches": "0.2.0"}},
     "at commit 66f3cc6a1b2c"),
    ({"git_commit": None, "packages": {"kernbench-studies": "0.1.0", "kernbench-benches": "0.2.0"}},
     "from the installed kernbench-studies 0.1.0 (not a git clone)"),
    ({"git_commit": None, "packages": {"kernbench-benches": "0.2.0"}},  # results written before the split
     "from the installed kernbench-benches 0.2.0 (not a git clone)"),
    ({"git_commit": None, "packages": {"kernbench-benches": "not installed"}},
     "from installed packages (not a git clone)"),
    ({"packages": {}}, "from installed packages (not a git clone)"),
])
def test_the_origin_of_the_results(provenance, text):
    assert build.origin(provenance) == text


def test_the_title_page_says_where_the_results_came_from(studies, drawn):
    _, docs = studies
    main = (build.PACKAGED_SOURCE / "main.tex").read_text()
    (date,) = [line for line in main.splitlines() if line.startswith(r"\date{")]
    assert r"\kbRunsOrigin" in date and "commit" not in date
    numbers = drawn[1].numbers.items  # synthetic results carry no git commit, as outside a clone
    assert numbers["kbGemmOrigin"].text == "from the installed kernbench-studies test (not a git clone)"
    assert numbers["kbRunsOrigin"].text == numbers["kbGemmOrigin"].text
    assert {f"kb{t}Origin" for t in ("Gemm", "Allreduce", "Gqa")} <= set(numbers)
    assert not [n.name for n in numbers.values() if n.text.lower() == "none" or "Commit" in n.name]
    # the same results from a clone name their commit
    inside = Numbers()
    docs = {name: copy.deepcopy(doc) for name, doc in docs.items()}
    for doc in docs.values():
        doc["provenance"]["git_commit"] = "abcdef0123456789abcdef0123456789abcdef01"
    build._provenance(inside, docs)
    assert inside.items["kbGemmOrigin"].text == inside.items["kbRunsOrigin"].text == "at commit abcdef012345"
    # studies run at different commits: the title page says so and the provenance table names each
    docs["gqa"]["provenance"]["git_commit"] = "fedcba9876543210fedcba9876543210fedcba98"
    apart = Numbers()
    build._provenance(apart, docs)
    assert apart.items["kbGqaOrigin"].text == "at commit fedcba987654"
    assert apart.items["kbRunsOrigin"].text.startswith("at several commits")


def test_a_failed_generate_leaves_no_empty_folder(tmp_path):
    out = tmp_path / "new" / "report"
    with pytest.raises(SchemaError, match="run `kernbench study NAME` first"):
        build.generate(tmp_path / "none", None, out, TOPOLOGIES)
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"  # a folder that existed before the run stays, empty or not
    kept.mkdir()
    with pytest.raises(SchemaError):
        build.generate(tmp_path / "none", None, kept, TOPOLOGIES)
    assert kept.is_dir() and list(kept.iterdir()) == []


def test_a_failed_latexmk_run_removes_only_the_empty_build_folder(studies, out, monkeypatch):
    gen = build.generate(studies[0], None, out, TOPOLOGIES)
    false = shutil.which("false")
    if false is None:
        pytest.skip("no `false` command")
    monkeypatch.setattr(build, "latexmk", lambda: false)  # "latexmk" exits 1 and writes nothing
    with pytest.raises(StudyError, match="latexmk failed"):
        build.build_pdf(gen, out)
    assert not (out / "build").exists() and (out / "tex" / "main.tex").is_file()


def test_the_cleanup_keeps_files_and_folders_that_hold_them(tmp_path):
    out = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), build.no_empty_folders_on_failure(out):
        (out / "log").mkdir(parents=True)
        (out / "log" / "run.log").write_text("why it failed\n")
        (out / "empty" / "deeper").mkdir(parents=True)
        raise RuntimeError("boom")
    assert (out / "log" / "run.log").is_file() and not (out / "empty").exists()
    with build.no_empty_folders_on_failure(tmp_path / "c"):  # success: nothing is removed
        (tmp_path / "c").mkdir()
    assert (tmp_path / "c").is_dir()
