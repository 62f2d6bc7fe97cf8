"""The mutation list (tests/mutation/mutations.py) stays usable: enough mutations, unique ids, every snippet occurs
exactly once in the current tree, every package is covered, every test selection exists. No mutation is run here
(that is ``python tests/mutation/mutate.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


LIST = _load("kernbench_mutation_list_under_test", ROOT / "tests" / "mutation" / "mutations.py")
SCRIPT = _load("kernbench_mutate_under_test", ROOT / "tests" / "mutation" / "mutate.py")
MUTATIONS = LIST.MUTATIONS
#: The mutations the issue names (their ids here), so none of them is dropped from the list by accident.
NAMED = {"benches-ring-causal-skip", "benches-results-accept-nonfinite", "benches-grounding-escaped-percent",
         "benches-allreduce-model-drops-alpha", "topology-heatmap-colourbar-100", "cli-web-host-prefix",
         "topology-yaml-alias-off-by-one", "runtime-launch-checks-first-tensor-only", "sim-max-sim-ns-after-last-event",
         "components-dispatch-cycles-times-clock", "cli-web-asset-traversal"}


def test_at_least_30_mutations_with_unique_ids():
    ids = [m.id for m in MUTATIONS]
    assert len(ids) >= 30
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert all(i and i == i.strip() and "," not in i and " " not in i for i in ids)  # usable with --only ID,ID


def test_the_issues_mutations_are_all_listed_and_marked():
    assert {m.id for m in MUTATIONS if m.issue} == NAMED
    assert sum(not m.issue for m in MUTATIONS) >= 19


def test_every_package_has_a_mutation():
    assert {m.package for m in MUTATIONS} == set(LIST.PACKAGES)
    assert {p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir()} == {*LIST.PACKAGES, *LIST.COMPILED}
    assert not set(LIST.PACKAGES) & set(LIST.COMPILED)


@pytest.mark.parametrize("m", MUTATIONS, ids=lambda m: m.id)
def test_snippet_occurs_exactly_once_and_changes_the_file(m):
    path = ROOT / m.file
    assert path.is_file(), f"{m.file} does not exist"
    assert m.file.startswith("packages/") and "/src/" in m.file, "mutations target package sources"
    text = path.read_text(encoding="utf-8")
    assert text.count(m.original) == 1, f"{m.id}: the snippet occurs {text.count(m.original)} times in {m.file}"
    mutated = SCRIPT.apply_mutation(text, m)
    assert mutated != text and m.original != m.replacement
    assert m.description and "\n" not in m.description


@pytest.mark.parametrize("m", MUTATIONS, ids=lambda m: m.id)
def test_every_selection_path_exists(m):
    assert m.selection, f"{m.id} has no tests"
    for node in m.selection:
        path, _, name = node.partition("::")
        assert (ROOT / path).exists(), f"{m.id}: {path} does not exist"
        if name:
            func = name.split("::")[-1].split("[")[0]
            assert f"def {func}(" in (ROOT / path).read_text(encoding="utf-8"), f"{m.id}: {node} does not exist"


def test_the_script_refuses_a_missing_or_ambiguous_snippet():
    m = MUTATIONS[0]
    with pytest.raises(SCRIPT.SnippetError, match="does not occur"):
        SCRIPT.apply_mutation("nothing here", m)
    with pytest.raises(SCRIPT.SnippetError, match="occurs 2 times"):
        SCRIPT.apply_mutation(m.original + "\n" + m.original, m)


def test_only_rejects_unknown_ids_and_keeps_list_order():
    first, second = MUTATIONS[0].id, MUTATIONS[1].id
    assert [m.id for m in SCRIPT.select(MUTATIONS, [f"{second},{first}"])] == [first, second]
    with pytest.raises(ValueError, match="unknown mutation id"):
        SCRIPT.select(MUTATIONS, ["no-such-mutation"])
