"""Behaviour the mutation run (tests/mutation/mutate.py) found untested in the studies, pinned with values
computed here independently of the code under test."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

from kernbench.studies import cache
from kernbench.studies.registry import get_study
from kernbench.studies.runner import RunOptions, out_dir


def _fresh_digest(modules: tuple[str, ...]) -> str:
    cache.source_files.cache_clear()
    cache.source_digest.cache_clear()
    return cache.source_digest(modules)


def test_the_source_digest_follows_the_bytes_of_every_file_it_covers(tmp_path, monkeypatch):
    """A study point reruns when the code it imports changes: the digest hashes each file's name *and* bytes.

    A stand-alone module (it imports no kernbench module) is its own closure, so its digest is
    ``sha256(name + NUL + sha256(bytes))``; editing one byte of it must change the digest."""
    name = "kernbench_mutation_gap_probe"
    module = tmp_path / f"{name}.py"
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module.write_bytes(b"VALUE = 1\n")
        importlib.invalidate_caches()
        first = _fresh_digest((name,))
        assert first == hashlib.sha256(name.encode() + b"\0" + hashlib.sha256(b"VALUE = 1\n").digest()).hexdigest()

        module.write_bytes(b"VALUE = 2\n")  # same name, same size, other bytes
        second = _fresh_digest((name,))
        assert second == hashlib.sha256(name.encode() + b"\0" + hashlib.sha256(b"VALUE = 2\n").digest()).hexdigest()
        assert second != first
    finally:
        cache.source_files.cache_clear()
        cache.source_digest.cache_clear()


# --------------------------------------------------------------------------- where results go


def test_out_is_the_folder_of_one_study_and_holds_a_folder_per_study_for_several():
    study = get_study("gemm")
    assert out_dir(study, RunOptions(out=Path("some/where")), several=False) == Path("some/where")
    assert out_dir(study, RunOptions(out=Path("some/where")), several=True) == Path("some/where/gemm")
    assert out_dir(study, RunOptions(), several=False) == Path("out/studies/gemm")
    assert out_dir(study, RunOptions(), several=True) == Path("out/studies/gemm")
