"""Fuzzing the topology loader (issue 12): random mutations of a valid topology file -- numbers, types, keys,
nesting, raw bytes, aliases -- must each end in a valid compile or a one-line KernbenchError (``kernbench`` exit 2):
never another exception, a hang or more than 1 GB of memory.

The default session runs 200 examples from a fixed seed (the same examples every run); the slow session runs
2,000 fresh ones. ``ccl.yaml`` gets the same treatment, 200 examples.
"""

from __future__ import annotations

import contextlib
import re
import resource
import signal
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.ccl.config import PACKAGED, load
from kernbench.components import default_registry
from kernbench.topology.builtins import text as builtin_text
from kernbench.topology.compiler import compile_spec
from kernbench.topology.errors import KernbenchError
from kernbench.topology.spec_loader import spec_from_yaml

SECONDS_PER_EXAMPLE = 60
MAX_GROWTH_BYTES = 1 << 30


def _small_base() -> bytes:
    """The builtin default topology shrunk to 1 SIP of 2 x 2 cubes with 4 PEs each, so it compiles in ~0.1 s."""
    body = builtin_text()
    for old, new in (("count: 2 ", "count: 1 "), ("cube_mesh: {w: 4, h: 4,", "cube_mesh: {w: 2, h: 2,"),
                     ("pe_per_corner: 2 ", "pe_per_corner: 1 ")):
        assert body.count(old) == 1, f"the builtin default topology no longer has {old!r}; update the fuzz base"
        body = body.replace(old, new)
    return body.encode()


BASE = _small_base()
CCL_BASE = PACKAGED.read_bytes()

_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_ENTRY = re.compile(rb"^([ \t]*)([A-Za-z_]\w*):([^\n]*)$", re.M)

NUMBERS = st.one_of(
    st.sampled_from([b"0", b"-1", b"1", b"2", b"3", b"16", b"17", b"64", b"1e3", b"1.0e-300", b"1e300", b"-0.0",
                     b".nan", b".inf", b"-.inf", b"9223372036854775808", b"9" * 60, b"1_000", b"0x10", b"0o17",
                     b"1:30", b"0.0001", b"1e6", b"800000000", b"4096", b"1e12", b"2.5"]),
    st.integers(-10 ** 12, 10 ** 12).map(lambda i: str(i).encode()),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
)
VALUES = st.one_of(
    NUMBERS,
    st.sampled_from([b"", b"~", b"null", b"true", b"no", b"abc", b"'1e3'", b"[]", b"{}", b"[1, 2]", b"[a, b, c]",
                     b"{a: 1}", b"[[1, 2], [3]]", b"2024-01-01", b"!!binary aGVsbG8=", b"!!set {a, b}",
                     b"!!python/name:os.system", b"!!python/object/apply:os.system ['true']", b"!custom 3",
                     b"*undefined", b"&anchor 5", b"'" + b"x" * 5000 + b"'", b"|\n  block\n  text",
                     b"[NW, NW]", b"[NE]", b"[ring_1d]", b"forwarding", b"warp_drive"]),
    st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
)
KEYS = st.one_of(st.sampled_from([b"count", b"cube", b"routr", b"router", b"bw_gbs", b"<<", b"? x", b"1", b"null",
                                  b"components", b"pe_inset_mm", b"packet_bytes", b"zz" * 50]),
                 st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).map(str.encode))
BYTES = st.one_of(st.binary(min_size=1, max_size=4),
                  st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\t", b"\r", b": ", b"- ", b"&a ", b"*a", b"---\n",
                                   b"{", b"}", b"[", b"]", b"'", b'"', b"#", b"\n  ", b"!!python/name:os.system ",
                                   b"\xef\xbb\xbf", b"%YAML 1.1\n", b"? ", b"|", b">", b"@", b"`", b"\\"]))


def _splice(raw: bytes, start: int, end: int, new: bytes) -> bytes:
    return raw[:start] + new + raw[end:]


class _Nothing(Exception):
    """An earlier mutation left nothing of the kind this one changes."""


def _pick(draw, pattern: re.Pattern, raw: bytes) -> re.Match:
    matches = list(pattern.finditer(raw))
    if not matches:
        raise _Nothing
    return draw(st.sampled_from(matches))


def _number(draw, raw: bytes) -> bytes:
    m = _pick(draw, _NUMBER, raw)
    return _splice(raw, m.start(), m.end(), draw(NUMBERS))


def _value(draw, raw: bytes) -> bytes:
    m = _pick(draw, _ENTRY, raw)
    return _splice(raw, m.start(3), m.end(3), b" " + draw(VALUES))


def _key(draw, raw: bytes) -> bytes:
    m = _pick(draw, _ENTRY, raw)
    line = raw[m.start():m.end()]
    op = draw(st.sampled_from(["rename", "duplicate", "delete", "typo"]))
    if op == "rename":
        return _splice(raw, m.start(2), m.end(2), draw(KEYS))
    if op == "duplicate":
        return _splice(raw, m.end(), m.end(), b"\n" + line)
    if op == "delete":
        return _splice(raw, m.start(), m.end(), b"")
    key = m.group(2)
    i = draw(st.integers(0, len(key) - 1))
    return _splice(raw, m.start(2), m.end(2), key[:i] + key[i + 1:])


def _nesting(draw, raw: bytes) -> bytes:
    m = _pick(draw, _ENTRY, raw)
    op = draw(st.sampled_from(["list", "map", "indent", "dedent", "deep"]))
    value = m.group(3).split(b"#")[0].strip() or b"1"
    if op == "list":
        new = b" [" + value + b"]"
    elif op == "map":
        new = b" {x: " + value + b"}"
    elif op == "deep":
        k = draw(st.integers(1, 200))
        new = b" " + b"[" * k + value + b"]" * k
    else:
        indent = m.group(1)
        return _splice(raw, m.start(1), m.end(1), indent + b"  " if op == "indent" else indent[2:])
    return _splice(raw, m.start(3), m.end(3), new)


def _bytes(draw, raw: bytes) -> bytes:
    pos = draw(st.integers(0, len(raw)))
    op = draw(st.sampled_from(["insert", "replace", "delete", "truncate"]))
    if op == "truncate":
        return raw[:pos]
    if op == "delete":
        return _splice(raw, pos, pos + draw(st.integers(1, 8)), b"")
    new = draw(BYTES)
    return _splice(raw, pos, pos + (len(new) if op == "replace" else 0), new)


def _alias(draw, raw: bytes) -> bytes:
    a, b = _pick(draw, _ENTRY, raw), _pick(draw, _ENTRY, raw)
    name = draw(st.sampled_from([b"x", b"y"]))
    if a.start() == b.start():
        return _splice(raw, a.start(3), a.start(3), b" &" + name + b" *" + name)  # an alias to itself
    first, second = sorted((a, b), key=lambda m: m.start())
    raw = _splice(raw, second.start(3), second.end(3), b" *" + name)
    return _splice(raw, first.start(3), first.start(3), b" &" + name)


MUTATORS: dict[str, Callable] = {"number": _number, "value": _value, "key": _key, "nesting": _nesting,
                                 "bytes": _bytes, "alias": _alias}


@st.composite
def mutated(draw, base: bytes) -> tuple[bytes, tuple[str, ...]]:
    """``base`` after one to three random mutations, and their kinds."""
    raw, kinds = base, []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(sorted(MUTATORS)))
        try:
            raw = MUTATORS[kind](draw, raw)
        except _Nothing:
            continue
        kinds.append(kind)
    return raw, tuple(kinds)


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _bounded(seconds: int) -> Iterator[None]:
    """Fail an example that runs longer than ``seconds`` (a hang) or grows the process by more than 1 GB."""
    def expire(signum, frame):
        raise _Timeout(f"example ran longer than {seconds} s")

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < MAX_GROWTH_BYTES, f"the example grew the process by {grown / 2 ** 20:.0f} MiB"


REGISTRY = default_registry(plugins=False)


def topology_outcome(raw: bytes) -> str:
    """``"compiled"`` or ``"refused"``; anything but a one-line KernbenchError fails the test."""
    with _bounded(SECONDS_PER_EXAMPLE):
        try:
            spec = spec_from_yaml(raw, "fuzz.yaml")
            REGISTRY.check(spec)
            graph = compile_spec(spec)
        except KernbenchError as exc:
            _check_message(exc)
            return "refused"
    assert graph.nodes and graph.edges
    return "compiled"


def ccl_outcome(raw: bytes, tmp_path) -> str:
    path = tmp_path / "ccl.yaml"
    path.write_bytes(raw)
    with _bounded(SECONDS_PER_EXAMPLE):
        try:
            load(path)
        except KernbenchError as exc:
            _check_message(exc)
            return "refused"
    return "loaded"


def _check_message(exc: KernbenchError) -> None:
    msg = str(exc)
    assert msg and "\n" not in msg and len(msg) < 1200, repr(msg[:300])


def _fuzz(examples: int, derandomize: bool) -> Counter:
    seen: Counter = Counter()

    @settings(max_examples=examples, deadline=None, derandomize=derandomize, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutated(BASE))
    def example(case):
        raw, kinds = case
        seen[topology_outcome(raw)] += 1
        seen.update(kinds)

    example()
    return seen


def test_fuzz_topology_loader_200_examples():
    seen = _fuzz(200, derandomize=True)
    assert seen["compiled"] + seen["refused"] == 200
    assert seen["compiled"] >= 10 and seen["refused"] >= 100, seen  # both outcomes are exercised
    assert all(seen[k] >= 20 for k in MUTATORS), seen


@pytest.mark.slow
def test_fuzz_topology_loader_2000_examples():
    seen = _fuzz(2000, derandomize=False)
    print(f"topology fuzz: {dict(sorted(seen.items()))}")
    assert seen["compiled"] + seen["refused"] == 2000


def test_fuzz_ccl_yaml_200_examples(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ccl")
    seen: Counter = Counter()

    @settings(max_examples=200, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(CCL_BASE))
    def example(case):
        seen[ccl_outcome(case[0], tmp)] += 1

    example()
    assert seen["loaded"] + seen["refused"] == 200 and seen["refused"] >= 50, seen


def test_the_unmutated_bases_are_valid(tmp_path):
    assert topology_outcome(BASE) == "compiled"
    assert ccl_outcome(CCL_BASE, tmp_path) == "loaded"
