"""The hardened YAML reader: every bad document ends in one SpecError line naming file and line (issue 12)."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from kernbench.topology.errors import KernbenchError, SpecError
from kernbench.topology.safe_yaml import MAX_ALIASES, MAX_BYTES, load_yaml, quote
from kernbench.topology.spec_loader import load_spec, spec_from_yaml


def _error(text: str | bytes, source: str = "t.yaml", error: type[KernbenchError] = SpecError) -> str:
    with pytest.raises(error) as info:
        load_yaml(text, source, error)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(source), msg
    return msg


def test_duplicate_key_names_the_key_and_both_lines():
    msg = _error("name: x\ncube:\n  hbm: {bw_gbs: 1}\nsystem: {}\ncube:\n  noc: {}\n")
    assert msg == ("t.yaml, line 5: duplicate key 'cube' (first at line 2, again at line 5); give each key once "
                   "per mapping: merge the two")


def test_duplicate_key_in_a_nested_flow_mapping():
    msg = _error("cube:\n  hbm: {bw_gbs: 1, bw_gbs: 2}\n")
    assert "duplicate key 'bw_gbs' (first at line 2, again at line 2)" in msg


def test_duplicate_keys_in_a_topology_are_refused_not_merged():
    # Two cube: sections used to merge silently, the last one winning (HBM at 1 GB/s).
    with pytest.raises(SpecError, match=r"duplicate key 'cube' \(first at line 1, again at line 3\)"):
        spec_from_yaml("cube:\n  hbm: {bw_gbs: 1}\ncube:\n  noc: {link_bw_gbs: 1}\n", "dup.yaml")


def test_merge_keys_are_not_duplicates_and_explicit_keys_win():
    assert load_yaml("b: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 5\n", "t") == {"b": {"x": 1, "y": 2},
                                                                             "d": {"x": 5, "y": 2}}


def _bomb(levels: int, fan: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * fan) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_fast_and_small():
    tracemalloc.start()
    t0 = time.perf_counter()
    msg = _error(_bomb(9))  # 9**9 = 387 million values once expanded
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "its aliases expand to more than 100,000 values" in msg
    assert elapsed < 2.0 and peak < 50e6, (elapsed, peak)


def test_alias_bomb_in_a_known_topology_field_is_refused():
    text = _bomb(8) + "cube:\n  placement: {m_cpu_pos_mm: *a7}\n"
    with pytest.raises(SpecError, match="aliases expand to more than"):
        spec_from_yaml(text.replace("a0: &a0", "x0: &a0"), "bomb.yaml")


def test_too_many_aliases():
    body = "a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    assert "more than 100 aliases" in _error(body)


def _aliases_one_per_line(n: int) -> str:
    """An anchor on line 1, then ``n`` keys each holding one alias: alias number k sits on line k + 1."""
    return "a: &a 7\n" + "".join(f"k{i}: *a\n" for i in range(1, n + 1))


def test_exactly_the_alias_limit_loads():
    assert MAX_ALIASES == 100
    data = load_yaml(_aliases_one_per_line(100), "t.yaml")
    assert len(data) == 101 and all(data[f"k{i}"] == 7 for i in range(1, 101))
    flow = load_yaml("a: &a [1, 2]\nb: [" + ", ".join(["*a"] * 100) + "]\n", "t.yaml")
    assert flow["b"] == [[1, 2]] * 100


def test_one_alias_past_the_limit_is_refused_at_that_alias():
    # The 101st alias is the one on line 102: the message points at it, not at the anchor or the end.
    assert _error(_aliases_one_per_line(101)) == ("t.yaml, line 102: more than 100 aliases (*name); write the "
                                                  "values out")


@pytest.mark.parametrize("limit", [1, 3, 250])
def test_alias_limit_argument_boundary(limit):
    assert len(load_yaml(_aliases_one_per_line(limit), "t.yaml", max_aliases=limit)) == limit + 1
    with pytest.raises(SpecError) as info:
        load_yaml(_aliases_one_per_line(limit + 1), "t.yaml", max_aliases=limit)
    assert str(info.value) == f"t.yaml, line {limit + 2}: more than {limit} aliases (*name); write the values out"


def test_merge_keys_count_as_aliases():
    # `<<: *b` is an alias like any other: 100 in all still load, one more is refused.
    base = "b: &b {x: 1}\n" + "".join(f"m{i}:\n  <<: *b\n" for i in range(99))
    assert load_yaml(base + "z: *b\n", "t")["m98"] == {"x": 1}
    assert "more than 100 aliases" in _error(base + "z: *b\ny: *b\n")


def test_recursive_alias():
    assert "t.yaml, line 1: a recursive alias" in _error("a: &a [1, *a]\n")


def test_deep_nesting_is_refused_before_python_recursion():
    assert "nesting deeper than 64 levels" in _error("a: " + "[" * 5000 + "]" * 5000 + "\n")


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system ['echo hi']", "!!python/name:os.system",
                                 "!custom 3"])
def test_tags_outside_plain_data_are_refused(tag):
    msg = _error(f"a: {tag}\n")
    assert "is not allowed; these files hold plain data" in msg and msg.startswith("t.yaml, line 1: tag ")


def test_python_tag_names_the_short_tag():
    assert "tag '!!python/name:os.system'" in _error("a: !!python/name:os.system\n")


@pytest.mark.parametrize("text, value", [("1e3", 1000.0), ("-2.5E-3", -0.0025), ("1.0e3", 1000.0), ("+4e0", 4.0),
                                         ("1_000", 1000), ("'1e3'", "1e3"), ("1e", "1e"), ("0x10", 16)])
def test_numbers(text, value):
    got = load_yaml(f"v: {text}\n", "t")["v"]
    assert got == value and type(got) is type(value)


def test_exponent_without_dot_is_a_number_in_a_topology_field():
    spec = spec_from_yaml("cube:\n  hbm: {bw_gbs: 1e3}\n", "t.yaml")
    assert spec.cube.hbm.bw_gbs == 1000.0


def test_huge_integer_literal():
    assert "an integer of 5000 digits (at most 40)" in _error("a: " + "9" * 5000 + "\n")


def test_non_utf8_bytes_name_the_byte_and_offset():
    msg = _error(b"name: ok\npe:\n  clock_ghz: 1.0 # \xe9t\xe9\n")
    assert msg == "t.yaml: not UTF-8 text: byte 0xe9 at offset 32 (line 3); save the file as UTF-8"


def test_utf8_bom_is_accepted():
    assert load_yaml(b"\xef\xbb\xbfname: x\n", "t") == {"name": "x"}


def test_control_character():
    assert _error("a: b\x00c\n") == "t.yaml, line 1: character U+0000 is not allowed in YAML text; remove it"


def test_document_size_cap():
    msg = _error("a: " + "x" * MAX_BYTES + "\n")
    assert "more than the 1,048,576 a configuration file may hold" in msg


def test_syntax_error_is_one_line_with_position():
    assert _error("a:\n\tb: 1\n").startswith("t.yaml: malformed YAML at line 2, column 1: ")


def test_two_documents():
    assert "expected a single document" in _error("a: 1\n---\nb: 2\n")


def test_unhashable_key():
    assert "found unhashable key" in _error("? [1, 2]\n: 3\n")


def test_quote_cuts_any_value_to_80_characters():
    for value in ("x" * 10_000, list(range(10_000)), {"k" * 500: [1] * 500}, b"\xff" * 300):
        assert len(quote(value)) <= 80
    assert quote("short") == "'short'"


def test_bad_value_is_quoted_to_80_characters_in_spec_errors():
    with pytest.raises(SpecError) as info:
        spec_from_yaml(f"name: ok\npe:\n  clock_ghz: '{'9' * 5000}'\n", "t.yaml")
    assert len(str(info.value)) < 250 and "..." in str(info.value)


def test_load_spec_reads_bytes(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SpecError, match=r"not UTF-8 text: byte 0xe9 at offset 9 \(line 1\)"):
        load_spec(p)


def test_load_spec_refuses_a_huge_file_before_reading_it(tmp_path):
    p = tmp_path / "big.yaml"
    with p.open("wb") as f:
        f.truncate(MAX_BYTES + 1)
    with pytest.raises(SpecError, match="more than the 1,048,576 a topology may hold"):
        load_spec(p)
