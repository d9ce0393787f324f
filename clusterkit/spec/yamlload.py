"""YAML text -> a tree of located plain values. PURE apart from reading the file.

Every mapping key, mapping value and sequence item becomes a ``Located`` that knows
where it starts (1-based line and column). Anything YAML allows that a cluster
spec has no use for is refused with a located ``SpecIssue`` instead of a
traceback: tabs, duplicate keys, aliases (so no alias bombs), custom tags,
non-string keys, deep nesting, control characters, non-UTF-8 bytes, files larger
than ``MAX_BYTES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from clusterkit.errors import SpecIssue
from clusterkit.spec.model import Location

MAX_BYTES = 1 << 20  # 1 MiB: a cluster spec is a few hundred bytes
MAX_DEPTH = 32  # the spec itself nests 4 deep
_YAML_TAG = "tag:yaml.org,2002:"
_SCALAR_KINDS = {"str": "str", "int": "int", "float": "float", "bool": "bool",
                 "null": "null", "timestamp": "timestamp", "binary": "binary"}
# Same set PyYAML's reader refuses, found up front so we can say where.
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd"
                            "\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Located:
    """A located value: ``value`` is dict[str, Located], list[Located] or a plain scalar."""

    kind: str  # map | seq | str | int | float | bool | null | timestamp | binary
    value: Any
    loc: Location
    key_loc: Location | None = field(default=None, compare=False)

    def plain(self) -> Any:
        """The value with every Located unwrapped (dicts, lists, scalars)."""
        if self.kind == "map":
            return {k: v.plain() for k, v in self.value.items()}
        if self.kind == "seq":
            return [v.plain() for v in self.value]
        return self.value


class _Refused(Exception):
    def __init__(self, mark: yaml.Mark | None, message: str, hint: str, path: str = "") -> None:
        super().__init__(message)
        self.mark, self.message, self.hint, self.path = mark, message, hint, path


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and deep nesting while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(event.start_mark, f"alias *{event.anchor} is not supported",
                           "write the value out in full; anchors and aliases are refused "
                           "so a spec can never expand into something huge")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(self.peek_event().start_mark,
                               f"nesting deeper than {MAX_DEPTH} levels",
                               "a cluster spec nests at most 4 levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _loc(file: str, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(file, 1, 1)
    return Location(file, mark.line + 1, mark.column + 1)


def _issue(loc: Location, message: str, hint: str | None, path: str = "") -> SpecIssue:
    return SpecIssue(loc.file, loc.line, loc.col, path, message, hint)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_spec_file(path: str) -> tuple[str | None, list[SpecIssue]]:
    """The file's text, refusing files over MAX_BYTES (read is capped, so /dev/zero is safe)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return None, [SpecIssue(path, 1, 1, "", f"cannot read spec file: {reason}",
                                "check the path and its permissions")]
    return decode(data, path)


def decode(data: bytes, file: str) -> tuple[str | None, list[SpecIssue]]:
    """Bytes -> text: size limit, UTF-8 only (an optional BOM is dropped)."""
    if len(data) > MAX_BYTES:
        return None, [SpecIssue(file, 1, 1, "", f"file is larger than {MAX_BYTES // 1024} KiB",
                                "a cluster spec is a short YAML file; is this the right file?")]
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start]
        return None, [SpecIssue(file, line, col, "", f"not UTF-8 text (byte 0x{byte:02x})",
                                "save the spec as UTF-8 text; binary files are not specs")]


def _prescan(text: str, file: str) -> list[SpecIssue]:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return [SpecIssue(file, 1, 1, "", f"text is larger than {MAX_BYTES // 1024} KiB",
                          "a cluster spec is a short YAML file")]
    tab = text.find("\t")
    if tab >= 0:
        line, col = _line_col(text, tab)
        return [SpecIssue(file, line, col, "", "tab character",
                          "YAML indentation must use spaces; replace tabs with spaces")]
    bad = _NON_PRINTABLE.search(text)
    if bad:
        line, col = _line_col(text, bad.start())
        return [SpecIssue(file, line, col, "",
                          f"control or binary character U+{ord(bad.group()):04X}",
                          "a spec is plain YAML text; is this the right file?")]
    return []


def parse(text: str, file: str) -> tuple[Located | None, list[SpecIssue]]:
    """YAML text -> the root mapping (a Located), or None and the located reasons why not."""
    issues = _prescan(text, file)
    if issues:
        return None, issues
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, [SpecIssue(file, 1, 1, "", "the spec is empty",
                                    "start from one of the files in examples/")]
        node = _convert(loader, root, file, issues, None, "")
    except _Refused as exc:
        return None, [_issue(_loc(file, exc.mark), exc.message, exc.hint, exc.path)]
    except yaml.MarkedYAMLError as exc:
        return None, [_yaml_issue(exc, file)]
    except yaml.YAMLError as exc:
        return None, [SpecIssue(file, 1, 1, "", f"invalid YAML: {exc}", None)]
    finally:
        loader.dispose()
    if node.kind != "map":
        return None, [_issue(node.loc, f"the spec must be a mapping of keys, got {_a(node.kind)}",
                             "the top level holds keys such as name:, region:, nodes:")]
    return node, issues


def _yaml_issue(exc: yaml.MarkedYAMLError, file: str) -> SpecIssue:
    mark = exc.problem_mark or exc.context_mark
    text = exc.problem or exc.context or "syntax error"
    if exc.context and exc.problem and exc.context_mark is not None:
        text = f"{exc.problem} ({exc.context} at line {exc.context_mark.line + 1})"
    return _issue(_loc(file, mark), f"invalid YAML: {text}",
                  "check indentation, colons and quoting near this position")


def _a(kind: str) -> str:
    names = {"map": "a mapping", "seq": "a list", "str": "a string", "int": "an integer",
             "float": "a number", "bool": "a boolean", "null": "nothing (null)",
             "timestamp": "a date/time", "binary": "binary data"}
    return names.get(kind, kind)


def _convert(loader: _Loader, node: yaml.Node, file: str, issues: list[SpecIssue],
             key_loc: Location | None, path: str) -> Located:
    loc = _loc(file, node.start_mark)
    if node.tag.startswith("!"):
        raise _Refused(node.start_mark, f"custom tag {node.tag} is not supported",
                       "remove the tag; a spec uses plain YAML values", path)
    if isinstance(node, yaml.MappingNode):
        return Located("map", _convert_map(loader, node, file, issues, path), loc, key_loc)
    if isinstance(node, yaml.SequenceNode):
        items = [_convert(loader, item, file, issues, None, f"{path}[{i}]")
                 for i, item in enumerate(node.value)]
        return Located("seq", items, loc, key_loc)
    return _convert_scalar(loader, node, loc, key_loc, path)


def _convert_scalar(loader: _Loader, node: yaml.ScalarNode, loc: Location,
                    key_loc: Location | None, path: str) -> Located:
    kind = _SCALAR_KINDS.get(node.tag.removeprefix(_YAML_TAG)) if node.tag.startswith(
        _YAML_TAG) else None
    if kind is None:
        raise _Refused(node.start_mark, f"unsupported YAML type {node.tag}",
                       "use plain strings, numbers, booleans, lists and mappings", path)
    if kind in ("timestamp", "binary"):
        return Located(kind, node.value, loc, key_loc)
    try:
        value = loader.construct_object(node)
    except Exception as exc:  # noqa: BLE001 - PyYAML raises ValueError/KeyError on bad `!!int x`
        raise _Refused(node.start_mark, f"{node.value!r} is not a valid {kind}",
                       "remove the explicit !! tag or fix the value", path) from exc
    return Located(kind, value, loc, key_loc)


def _convert_map(loader: _Loader, node: yaml.MappingNode, file: str,
                 issues: list[SpecIssue], path: str) -> dict[str, Located]:
    out: dict[str, Located] = {}
    for key_node, value_node in node.value:
        key_loc = _loc(file, key_node.start_mark)
        if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "":
            issues.append(_issue(key_loc, "keys must be plain non-empty names",
                                 "write `name: value`; lists, mappings or nothing cannot be keys",
                                 path))
            continue
        # The key as written: `on:`/`yes:` stay the strings the user typed, not booleans.
        key = key_node.value
        child = f"{path}.{key}" if path else key
        if key in out:
            first = out[key].key_loc
            issues.append(_issue(key_loc, f"duplicate key {key!r} (first at line "
                                 f"{first.line if first else '?'})",
                                 "each key may appear once; merge the two entries", child))
            continue
        out[key] = _convert(loader, value_node, file, issues, key_loc, child)
    return out
