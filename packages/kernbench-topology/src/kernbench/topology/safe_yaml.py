"""A hardened YAML reader for the files users hand us (topologies, ``ccl.yaml``).

:func:`load_yaml` parses plain data only and turns every way a file can be
bad into one :class:`~kernbench.topology.errors.KernbenchError` (the caller
chooses the subclass) whose message is one line naming the file and, where
there is one, the line:

- text that is not UTF-8: the byte and its offset;
- a document larger than ``max_bytes``;
- a duplicate key in a mapping: the key and both lines (PyYAML would let
  the last one win silently);
- alias bombs: more than ``max_aliases`` aliases, or a document whose
  aliases expand to more than ``max_nodes`` values, or a recursive alias;
- nesting deeper than ``max_depth`` (PyYAML's composer recurses);
- any tag outside the YAML core schema (``!!python/...``, ``!custom``);
- integers longer than ``MAX_INT_DIGITS`` digits.

It also reads ``1e3`` as a number (YAML 1.1 needs a dot: ``1.0e3``), because
that is what every user means. :func:`quote` is how messages show a bad
value: at most 80 characters of it.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from kernbench.topology.errors import KernbenchError, SpecError

MAX_BYTES = 1 << 20
MAX_ALIASES = 100
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_INT_DIGITS = 40
QUOTE_CHARS = 80

_FLOAT_NO_DOT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_MERGE_TAG = "tag:yaml.org,2002:merge"

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 3, 8, 8, 8
_REPR.maxstring = _REPR.maxother = QUOTE_CHARS + 2


def quote(value: Any) -> str:
    """``repr(value)`` cut to its first 80 characters (``...`` marks a cut), however large the value is."""
    text = _REPR.repr(value)
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 3] + "..."


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to print to a terminal: every character a terminal could act on or hide (C0 and C1 controls
    such as ESC, DEL, bidi overrides and other format characters, line separators) is shown as its Python escape
    (``\\x1b``, ``\\u202e``), as :func:`quote` shows it; the characters in ``keep`` (e.g. ``"\\n"`` for a
    table of several lines) are left alone. Use it for every piece of user input the CLI prints outside quote."""
    if text.isprintable() and not keep:
        return text
    return "".join(ch if ch.isprintable() or ch in keep else repr(ch)[1:-1] for ch in text)


class _Abort(Exception):
    """A limit was hit while parsing; carries the one-line reason and the line (1-based, 0 = unknown)."""

    def __init__(self, reason: str, line: int = 0) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader with duplicate-key, alias, depth, tag and integer-size checks."""

    def __init__(self, text: str, max_aliases: int, max_nodes: int, max_depth: int) -> None:
        super().__init__(text)
        self.max_aliases, self.max_nodes, self.max_depth = max_aliases, max_nodes, max_depth
        self.aliases = 0
        self.depth = 0

    # ----------------------------------------------------------------- composing
    def compose_node(self, parent: Node | None, index: object) -> Node:
        if self.check_event(AliasEvent):
            self.aliases += 1
            if self.aliases > self.max_aliases:
                mark = self.peek_event().start_mark
                raise _Abort(f"more than {self.max_aliases} aliases (*name); write the values out", mark.line + 1)
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                raise _Abort(f"nesting deeper than {self.max_depth} levels", self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_document(self) -> Node:
        node = super().compose_document()
        _expanded_size(node, self.max_nodes)
        return node

    # ----------------------------------------------------------------- constructing
    def construct_mapping(self, node: Node, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable: PyYAML reports it below
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _Abort(f"duplicate key {quote(key)} (first at line {first}, again at line {line}); "
                                 f"give each key once per mapping: merge the two", line)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_INT_DIGITS:
            raise _Abort(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})", node.start_mark.line + 1)
        return super().construct_yaml_int(node)

    def construct_undefined(self, node: Node) -> None:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise _Abort(f"tag {quote(tag)} is not allowed; these files hold plain data (mappings, lists, "
                     f"numbers, text)", node.start_mark.line + 1)


_SafeLoader.add_constructor("tag:yaml.org,2002:int", _SafeLoader.construct_yaml_int)
_SafeLoader.add_constructor(None, _SafeLoader.construct_undefined)
_SafeLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_NO_DOT, list("-+0123456789"))


def _expanded_size(root: Node | None, limit: int) -> int:
    """Values the document holds once every alias is expanded; :class:`_Abort` past ``limit`` or on a cycle."""
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Abort("a recursive alias (a value that contains itself)", node.start_mark.line + 1)
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            children: list[Node] = node.value
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > limit:
                raise _Abort(f"its aliases expand to more than {limit:,} values", node.start_mark.line + 1)
        active.discard(key)
        sizes[key] = total
        return total

    return size(root)


def decode_text(raw: bytes, source: str, error: type[KernbenchError] = SpecError) -> str:
    """``raw`` as text; ``error`` naming the first byte that is not UTF-8, and its offset, otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{source}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} (line {line}); "
                    f"save the file as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def load_yaml(data: str | bytes, source: str, error: type[KernbenchError] = SpecError, *,
              max_bytes: int = MAX_BYTES, max_aliases: int = MAX_ALIASES, max_nodes: int = MAX_NODES,
              max_depth: int = MAX_DEPTH) -> Any:
    """Parse one YAML document of plain data; any problem raises ``error`` with a one-line message."""
    size = len(data.encode("utf-8", "surrogatepass")) if isinstance(data, str) else len(data)
    if size > max_bytes:
        raise error(f"{source}: the document is {size:,} bytes, more than the {max_bytes:,} a configuration file "
                    f"may hold; is this the right file?")
    text = decode_text(data, source, error) if isinstance(data, bytes) else data
    loader = None
    try:
        loader = _SafeLoader(text, max_aliases, max_nodes, max_depth)
        return loader.get_single_data()
    except _Abort as exc:
        where = f", line {exc.line}" if exc.line else ""
        raise error(f"{source}{where}: {exc.reason}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = " ".join(" ".join(str(p) for p in (exc.context, exc.problem) if p).split()) or "syntax error"
        raise error(f"{source}: malformed YAML at {where}: {problem[:160]}") from None
    except ReaderError as exc:
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise error(f"{source}, line {line}: character U+{char:04X} is not allowed in YAML text; remove it") \
            from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise error(f"{source}: malformed YAML: {problem[:160]}") from None
    finally:
        if loader is not None:
            loader.dispose()


__all__ = ["MAX_BYTES", "decode_text", "load_yaml", "printable", "quote"]
