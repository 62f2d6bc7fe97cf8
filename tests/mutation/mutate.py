"""Mutation testing for KernBench: does the test suite notice a realistic one-line bug?

The curated list lives in ``tests/mutation/mutations.py``. For each mutation
this script copies the repository (the working tree's version of every file
``git ls-files`` lists, plus untracked files that are not ignored, so
uncommitted tests count) into a temporary folder, replaces the mutation's
snippet in the copy, and runs the mutation's small pytest selection there::

    python -m pytest SELECTION -x -q -p no:cacheprovider

with ``PYTHONPATH`` set to the copy's ``packages/*/src`` folders, so the
mutated copy is imported instead of the editable install of the real tree.
The working tree is never written. A mutation is *killed* when the tests
fail (or time out), *survived* when they pass, and an *error* when it cannot
be judged: its snippet is missing or ambiguous, its file does not exist, or
its selection already fails without the mutation. Before the mutations run,
every distinct selection runs once unmutated (the baseline); a selection
that fails there is reported, because it would make the score meaningless.

Usage (from anywhere)::

    python tests/mutation/mutate.py                      # every mutation, one at a time
    python tests/mutation/mutate.py --jobs 2             # two copies, two mutations at once
    python tests/mutation/mutate.py --only ID[,ID...]    # some of them
    python tests/mutation/mutate.py --list               # show the list and exit

It prints one line per mutation, then ``mutation score: K/N killed (P %)``,
writes every result to ``--json`` (default ``out/mutation/results.json``,
which git ignores) and exits 1 when the score is below ``--min-score``
(default 90) or a baseline selection fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_JSON = Path("out") / "mutation" / "results.json"
PYTEST_FLAGS = ("-x", "-q", "-p", "no:cacheprovider")
#: pytest exit codes: 1 tests failed, 2 interrupted (a collection error, e.g. an import the mutation broke).
KILLED_CODES = (1, 2)
TAIL_LINES = 30


def load_mutations(path: Path = HERE / "mutations.py"):
    """The mutations module (``MUTATIONS``, ``Mutation``, ``PACKAGES``) loaded from its file."""
    spec = importlib.util.spec_from_file_location("kernbench_mutation_list", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


class SnippetError(Exception):
    """A mutation cannot be applied: its file is missing or its snippet does not occur exactly once."""


def apply_mutation(text: str, mutation) -> str:
    """``text`` with the mutation's snippet replaced; :class:`SnippetError` unless it occurs exactly once."""
    count = text.count(mutation.original)
    if count != 1:
        first = mutation.original.strip().splitlines()[0] if mutation.original.strip() else mutation.original
        what = "does not occur" if count == 0 else f"occurs {count} times"
        raise SnippetError(f"{mutation.id}: the snippet {first!r} {what} in {mutation.file} (it must occur exactly "
                           f"once); update the mutation in tests/mutation/mutations.py")
    return text.replace(mutation.original, mutation.replacement, 1)


def repo_files(root: Path, tracked_only: bool = False) -> list[str]:
    """Repository-relative paths to copy: tracked files as they are in the working tree (deleted ones skipped),
    plus untracked files git does not ignore unless ``tracked_only``."""
    args = ["git", "ls-files", "-z", "--cached"] + ([] if tracked_only else ["--others", "--exclude-standard"])
    out = subprocess.run(args, cwd=root, capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    names = sorted({n for n in out.split("\0") if n})
    return [n for n in names if os.path.lexists(root / n) and not (root / n).is_dir()]


def changed_sources(root: Path) -> list[str]:
    """Package sources that differ from ``HEAD`` in the working tree: the copy takes them as they are, so a
    half-finished edit (or someone's own experiment) there changes what every mutation runs against."""
    proc = subprocess.run(["git", "diff", "--name-only", "HEAD", "--", "packages/*/src/*"], cwd=root,
                          capture_output=True, text=True, check=False)
    return [line for line in proc.stdout.splitlines() if line.strip()]


def _copy_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        if dst.is_symlink() or dst.exists():
            dst.unlink()
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


@dataclass
class RunOutcome:
    """One pytest run: its exit code (None after a timeout), wall time and the tail of its output."""

    code: int | None
    seconds: float
    output: str

    @property
    def tail(self) -> str:
        """The last lines of the output."""
        return "\n".join(self.output.rstrip().splitlines()[-TAIL_LINES:])

    @property
    def first_failure(self) -> str:
        """The first ``FAILED``/``ERROR`` line pytest printed (which test caught the mutation), or ''."""
        for line in self.output.splitlines():
            if line.startswith(("FAILED ", "ERROR ")):
                return line[:300]
        return ""


class Workspace:
    """A private copy of the repository (from the run's pristine snapshot) that mutations are applied in.

    :meth:`reset` brings it back to the snapshot after a run: files a test created are removed, files it
    changed are copied again, and the study cache folder the runs use is emptied.
    """

    def __init__(self, snapshot: Path, files: list[str], folder: Path) -> None:
        self.snapshot, self.files, self.folder = snapshot, files, folder
        self.repo = folder / "repo"
        self.cache = folder / "cache"
        self.stats: dict[str, tuple[int, int]] = {}
        for rel in files:
            _copy_file(snapshot / rel, self.repo / rel)
        self.dirs = {str(Path(rel).parent) for rel in files}
        self.dirs |= {str(p) for rel in files for p in Path(rel).parents}
        for rel in files:
            self._remember(rel)
        self.cache.mkdir(parents=True, exist_ok=True)
        self.procs: set[subprocess.Popen] = set()

    def _remember(self, rel: str) -> None:
        st = os.lstat(self.repo / rel)
        self.stats[rel] = (st.st_size, st.st_mtime_ns)

    def env(self) -> dict[str, str]:
        """The environment of a run: the copy's sources first on ``PYTHONPATH``, no bytecode written (a
        restored file may keep its size and mtime second), a private study cache."""
        env = dict(os.environ)
        srcs = sorted(str(p) for p in (self.repo / "packages").glob("*/src") if p.is_dir())
        if env.get("PYTHONPATH"):
            srcs.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(srcs)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["KERNBENCH_CACHE_DIR"] = str(self.cache)
        return env

    def run_pytest(self, selection: tuple[str, ...], timeout: float) -> RunOutcome:
        """Run ``pytest SELECTION -x -q -p no:cacheprovider`` in the copy; a run past ``timeout`` seconds is
        killed with every process it started."""
        cmd = [sys.executable, "-m", "pytest", *selection, *PYTEST_FLAGS]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=self.repo, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.add(proc)
        try:
            out, _ = proc.communicate(timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            code = None
        finally:
            self.procs.discard(proc)
        return RunOutcome(code, time.perf_counter() - t0, out.decode("utf-8", "replace"))

    def kill_all(self) -> None:
        """Stop the runs this workspace started (Ctrl-C)."""
        for proc in list(self.procs):
            _kill_group(proc)

    def reset(self) -> None:
        """Bring the copy back to the snapshot (see the class docstring)."""
        for dirpath, dirnames, filenames in os.walk(self.repo, topdown=False):
            rel_dir = os.path.relpath(dirpath, self.repo)
            for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                rel = os.path.normpath(os.path.join(rel_dir, name))
                if rel not in self.stats:
                    os.unlink(os.path.join(dirpath, name))
            if rel_dir != "." and rel_dir not in self.dirs:
                shutil.rmtree(dirpath, ignore_errors=True)
        for rel, stat in self.stats.items():
            path = self.repo / rel
            try:
                st = os.lstat(path)
                same = (st.st_size, st.st_mtime_ns) == stat
            except FileNotFoundError:
                same = False
            if not same:
                _copy_file(self.snapshot / rel, path)
                self._remember(rel)
        shutil.rmtree(self.cache, ignore_errors=True)
        self.cache.mkdir(parents=True, exist_ok=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of a run this script started (the run and the processes it spawned)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@dataclass
class Result:
    """The outcome of one mutation (what ``--json`` writes per mutation)."""

    id: str
    package: str
    file: str
    description: str
    issue: bool
    selection: list[str]
    status: str  # killed | survived | timeout | error
    seconds: float = 0.0
    detail: str = ""
    output_tail: str = field(default="", repr=False)

    @property
    def killed(self) -> bool:
        """Whether the tests caught the mutation (a timeout counts: the suite would not pass)."""
        return self.status in ("killed", "timeout")


def run_mutation(ws: Workspace, mutation, timeout: float) -> Result:
    """Apply ``mutation`` in ``ws``, run its selection, restore the file; the workspace is reset by the caller."""
    res = Result(mutation.id, mutation.package, mutation.file, mutation.description, mutation.issue,
                 list(mutation.selection), "error")
    path = ws.repo / mutation.file
    try:
        original = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        res.detail = f"{mutation.id}: file {mutation.file} does not exist"
        return res
    try:
        mutated = apply_mutation(original, mutation)
    except SnippetError as exc:
        res.detail = str(exc)
        return res
    path.write_text(mutated, encoding="utf-8")
    try:
        outcome = ws.run_pytest(tuple(mutation.selection), timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    res.seconds = round(outcome.seconds, 2)
    res.output_tail = outcome.tail
    if outcome.code is None:
        res.status, res.detail = "timeout", f"the selection ran past {timeout:g} s"
    elif outcome.code in KILLED_CODES:
        res.status, res.detail = "killed", outcome.first_failure
    elif outcome.code == 0:
        res.status = "survived"
    else:
        res.detail = f"pytest exited {outcome.code} (usage error or nothing collected); check the selection"
    return res


def _run_selection(ws: Workspace, selection: tuple[str, ...], timeout: float) -> RunOutcome:
    return ws.run_pytest(selection, timeout)


def run_parallel(jobs: int, workspaces: list[Workspace], calls: list, on_done) -> None:
    """Run ``calls`` (``(key, (fn, *args))``) on ``jobs`` threads, calling ``on_done(key, value)`` as each ends; on
    any exception (Ctrl-C included) queued calls are cancelled and running pytest processes killed."""
    ex = ThreadPoolExecutor(jobs)
    try:
        futures = {ex.submit(*call): key for key, call in calls}
        for fut in as_completed(futures):
            on_done(futures[fut], fut.result())
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        for ws in workspaces:
            ws.kill_all()
        raise
    ex.shutdown()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(prog="mutate.py", description="Run KernBench's curated mutations against their "
                                "test selections in temporary copies of the repository (never the working tree).")
    p.add_argument("--only", action="append", metavar="ID[,ID]", help="run only these mutation ids (repeatable)")
    p.add_argument("--list", action="store_true", help="list the mutations (with --only: those) and exit")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel runs over N separate copies "
                   "(default: %(default)s)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help=f"write the results here (default: {DEFAULT_JSON} under the repository)")
    p.add_argument("--min-score", type=float, default=90.0, metavar="P", help="exit 1 below P %% killed "
                   "(default: %(default)s)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="longest a run may take, seconds; a "
                   "mutation run also stops at 6x its selection's baseline time, at least 90 s (default: %(default)s)")
    p.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs of the selections")
    p.add_argument("--tracked-only", action="store_true", help="copy git-tracked files only (default: untracked, "
                   "not ignored files too)")
    p.add_argument("--repo", type=Path, default=ROOT, help="repository root (default: %(default)s)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.timeout <= 0:
        p.error(f"--timeout must be positive, got {args.timeout}")
    return args


def select(mutations, only: list[str] | None):
    """The mutations named by ``--only`` (all without it), in list order; ValueError naming unknown ids."""
    if not only:
        return list(mutations)
    wanted = [i.strip() for item in only for i in item.split(",") if i.strip()]
    if not wanted:
        raise ValueError("--only names no mutation id; see --list")
    known = {m.id for m in mutations}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise ValueError(f"unknown mutation id(s): {', '.join(unknown)}; see --list")
    return [m for m in mutations if m.id in set(wanted)]


def print_list(mutations) -> None:
    """One block per mutation: id, package, file, description and selection."""
    for m in mutations:
        tag = " [issue]" if m.issue else ""
        print(f"{m.id}{tag}\n    {m.file}\n    bug: {m.description}\n    tests: {' '.join(m.selection)}")
    print(f"{len(mutations)} mutation(s) over {len({m.package for m in mutations})} package(s)")


def _short(selection: tuple[str, ...]) -> str:
    """A selection for a progress line: its first entry, and how many more."""
    return selection[0] + (f" (+{len(selection) - 1} more)" if len(selection) > 1 else "")


def _say(lock: threading.Lock, text: str) -> None:
    with lock:
        print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the selected mutations; returns the exit status."""
    args = parse_args(argv)
    module = load_mutations()
    try:
        mutations = select(module.MUTATIONS, args.only)
    except ValueError as exc:
        print(f"mutate.py: error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        print_list(mutations)
        return 0
    root = args.repo.resolve()
    json_path = args.json if args.json is not None else root / DEFAULT_JSON
    lock = threading.Lock()
    tmp = Path(tempfile.mkdtemp(prefix="kernbench-mutation-"))
    workspaces: list[Workspace] = []
    started = time.perf_counter()
    try:
        files = repo_files(root, args.tracked_only)
        changed = changed_sources(root)
        if changed:
            shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
            _say(lock, f"mutate.py: note: {len(changed)} package source file(s) differ from HEAD and are copied as "
                       f"they are: {shown}")
        snapshot = tmp / "snapshot"
        for rel in files:  # one read of the live tree: every run sees the same sources
            _copy_file(root / rel, snapshot / rel)
        jobs = min(args.jobs, max(1, len(mutations)))
        workspaces = [Workspace(snapshot, files, tmp / f"copy{i}") for i in range(jobs)]
        _say(lock, f"mutate.py: {len(files)} files copied into {jobs} workspace(s) under {tmp}")
        pool: queue.Queue[Workspace] = queue.Queue()
        for ws in workspaces:
            pool.put(ws)

        def with_workspace(fn, *a):
            ws = pool.get()
            try:
                return fn(ws, *a)
            finally:
                ws.reset()
                pool.put(ws)

        baseline: dict[tuple[str, ...], RunOutcome] = {}
        selections = list(dict.fromkeys(tuple(m.selection) for m in mutations))
        if not args.no_baseline:
            _say(lock, f"mutate.py: baseline: {len(selections)} selection(s) without any mutation")

            def baseline_done(sel: tuple[str, ...], out: RunOutcome) -> None:
                baseline[sel] = out
                state = "ok" if out.code == 0 else f"FAILS (exit {out.code})"
                _say(lock, f"  baseline {state:14s} {out.seconds:7.1f} s  {_short(sel)}")

            run_parallel(jobs, workspaces, [(s, (with_workspace, _run_selection, s, args.timeout)) for s in selections],
                         baseline_done)
        broken = {s: o for s, o in baseline.items() if o.code != 0}

        results: dict[str, Result] = {}
        todo = []
        for m in mutations:
            sel = tuple(m.selection)
            if sel in broken:
                out = broken[sel]
                results[m.id] = Result(m.id, m.package, m.file, m.description, m.issue, list(sel), "error",
                                       detail=f"the selection fails without the mutation (exit {out.code}): "
                                              f"{out.first_failure or 'see the baseline output'}")
            else:
                todo.append(m)

        def limit(m) -> float:
            base = baseline.get(tuple(m.selection))
            return min(args.timeout, max(90.0, 6 * base.seconds)) if base is not None else args.timeout

        def mutation_done(_, r: Result) -> None:
            results[r.id] = r
            _say(lock, f"  [{len(results):2d}/{len(mutations)}] {r.status:8s} {r.seconds:7.1f} s  {r.id}"
                       + (f"  ({r.detail})" if r.detail and r.status == "error" else ""))

        run_parallel(jobs, workspaces, [(m.id, (with_workspace, run_mutation, m, limit(m))) for m in todo],
                     mutation_done)
    except KeyboardInterrupt:
        for ws in workspaces:
            ws.kill_all()
        print("mutate.py: interrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ordered = [results[m.id] for m in mutations]
    width = max(len(r.id) for r in ordered)
    for r in ordered:
        tail = r.detail if r.status != "survived" else f"survived: {r.description}"
        print(f"{r.status:8s} {r.id:{width}s} {r.seconds:7.1f} s  {tail}")
    killed = sum(r.killed for r in ordered)
    total = len(ordered)
    percent = 100.0 * killed / total if total else 100.0
    if broken:
        print(f"mutate.py: {len(broken)} selection(s) FAIL WITHOUT ANY MUTATION, so their mutations count as "
              f"errors: fix the tests first:")
        for sel, out in broken.items():
            print(f"  {_short(sel)}: exit {out.code} {out.first_failure}")
    print(f"mutation score: {killed}/{total} killed ({percent:.1f} %)")

    doc = {
        "schema": "kernbench.mutation/1",
        "repository": str(root),
        "wall_s": round(time.perf_counter() - started, 1),
        "jobs": args.jobs,
        "min_score": args.min_score,
        "score": {"killed": killed, "total": total, "percent": round(percent, 2)},
        "baseline": [{"selection": list(s), "exit": o.code, "seconds": round(o.seconds, 2),
                      "output_tail": o.tail if o.code != 0 else ""} for s, o in baseline.items()],
        "results": [asdict(r) for r in ordered],
    }
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"results written to {json_path}")
    return 0 if percent >= args.min_score and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
