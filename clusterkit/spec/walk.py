"""Check a located YAML tree against the key tables; produce plain values. PURE.

Everything here is what the JSON Schema can also say (types, keys, ranges,
patterns, enums); ``schema.py`` is generated from the same tables.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from clusterkit.errors import SpecIssue
from clusterkit.spec.keys import SPEC, Chars, Key, bad_char, walk_keys
from clusterkit.spec.model import Location
from clusterkit.spec.yamlload import Located

BAD = object()  # a value that failed its check; the builder uses the default instead
_KIND_OK = {
    "string": ("str",), "integer": ("int",), "number": ("int", "float"), "boolean": ("bool",),
    "object": ("map",), "map": ("map",), "array": ("seq",), "text": ("str", "int", "float"),
}
_TYPE_NAME = {
    "string": "a string", "integer": "a whole number", "number": "a number",
    "boolean": "true or false", "object": "a mapping of keys", "map": "a mapping of keys",
    "array": "a list", "text": "a string or number",
}
_CHARS_HINT = {
    Chars.LINE: "write it on one line, without control characters: a spec value must never "
                "become a second line of a file or command clusterkit writes",
    Chars.TEXT: "tabs and newlines are fine here; other control characters are not",
}


@dataclass
class Walk:
    file: str
    issues: list[SpecIssue] = field(default_factory=list)
    locations: dict[str, Location] = field(default_factory=dict)

    def add(self, loc: Location, path: str, message: str, hint: str | None = None,
            level: str = "error") -> None:
        self.issues.append(SpecIssue(loc.file, loc.line, loc.col, path, message, hint, level))


def walk_spec(root: Located, w: Walk) -> dict[str, Any]:
    w.locations[""] = root.loc
    out = _object(root, SPEC, "", w)
    return out if isinstance(out, dict) else {}


def _value(node: Located, key: Key, path: str, w: Walk) -> Any:
    """Check one value; record its location; BAD if it does not pass."""
    scalar = node.kind not in ("map", "seq")
    w.locations[path] = node.loc if scalar and node.kind != "null" else (node.key_loc or node.loc)
    if node.kind == "null":
        return _null(node, key, path, w)
    if key.shorthand and node.kind not in ("map", "seq"):
        return _shorthand(node, key, path, w)
    if key.type == "string" and node.kind == "bool" and {"true", "false"} <= set(key.enum):
        node = Located("str", "true" if node.value else "false", node.loc, node.key_loc)
    if key.type == "integer" and node.kind == "float" and math.isfinite(node.value) \
            and float(node.value).is_integer():
        node = Located("int", int(node.value), node.loc, node.key_loc)  # 4.0 is 4, as in JSON
    if node.kind not in _KIND_OK[key.type]:
        w.add(node.loc, path, f"expected {_TYPE_NAME[key.type]}, got {_describe(node)}",
              _type_hint(node, key))
        return BAD
    if key.type == "object":
        return _object(node, key, path, w)
    if key.type == "array":
        return _array(node, key, path, w)
    if key.type == "map":
        return _map(node, key, path, w)
    return _scalar(node, key, path, w)


def _null(node: Located, key: Key, path: str, w: Walk) -> Any:
    if key.required:
        w.add(node.key_loc or node.loc, path, f"{path} must not be empty",
              f"give it {_TYPE_NAME[key.type]}" + (f", e.g. {key.example}" if key.example else ""))
        return BAD
    if key.type == "object":  # `efs:` with nothing under it: the section with its defaults
        return _object(Located("map", {}, node.loc, node.key_loc), key, path, w)
    return None


def _shorthand(node: Located, key: Key, path: str, w: Walk) -> Any:
    """A scalar in place of a section with a shorthand key: false (off, no) is False (the
    section off), true the section with its defaults, anything else that key's value,
    checked as that key and located here."""
    if node.kind == "bool":
        return {} if node.value else False
    if node.kind in ("int", "float") and key.keys and key.keys[key.shorthand or ""].example:
        example = key.keys[key.shorthand or ""].example
        w.add(node.loc, path, f"{node.value!r} has no unit", f"write it with its unit, e.g. "
              f"{node.value}s or {node.value}m (like {example})")
        return BAD
    value = _value(node, (key.keys or {})[key.shorthand or ""], path, w)
    return BAD if value is BAD else {key.shorthand: value}


def _describe(node: Located) -> str:
    if node.kind == "str":
        return f"the string {node.value!r}"
    if node.kind in ("int", "float"):
        return f"the number {node.value!r}"
    if node.kind == "bool":
        return f"the boolean {str(node.value).lower()}"
    return {"map": "a mapping", "seq": "a list", "timestamp": f"the date {node.value!r}",
            "binary": "binary data"}.get(node.kind, node.kind)


def _type_hint(node: Located, key: Key) -> str:
    if node.kind == "str" and key.type in ("integer", "number"):
        if re.fullmatch(r"\s*[-+]?[0-9.]+\s*", node.value):
            return "write the number without quotes"
        return "write a number, e.g. 4" if key.type == "integer" else "write a number, e.g. 2.5"
    if node.kind in ("bool", "int", "float", "timestamp") and key.type in ("string", "text"):
        return "put the value in quotes, e.g. '...'; YAML reads yes/no/on/off, numbers and " \
               "dates as non-strings"
    if key.type == "array" and node.kind in ("str", "int", "float"):
        return f"write a list, e.g. [{node.value}]"
    if key.type == "integer" and node.kind == "float":
        return "use a whole number"
    if key.type == "object":
        return f"write keys under it: {', '.join(key.keys or {})}"
    return f"see `clusterkit schema` for the expected {_TYPE_NAME[key.type]}"


def _object(node: Located, key: Key, path: str, w: Walk) -> Any:
    keys = key.keys or {}
    out: dict[str, Any] = {}
    for name, child in node.value.items():
        child_path = f"{path}.{name}" if path else name
        if name not in keys:
            _unknown(child, name, child_path, list(keys), w)
            continue
        value = _value(child, keys[name], child_path, w)
        if value is not BAD:
            out[name] = value
    for name, child_key in keys.items():
        if child_key.required and name not in node.value:
            child_path = f"{path}.{name}" if path else name
            w.add(node.key_loc or node.loc, child_path, f"missing required key {child_path}",
                  f"add `{name}:` ({child_key.doc})")
    given = [n for n in key.exclusive if out.get(n) is not None]
    if len(given) > 1:
        last = f"{path}.{given[-1]}"
        w.add(w.locations.get(last, node.loc), last, f"give only one of {', '.join(given)}",
              f"{path}.{given[0]} and {last} exclude each other; remove one")
    return out


def _unknown(child: Located, name: str, path: str, known: list[str], w: Walk) -> None:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        hint = f"did you mean `{close[0]}`?"
    else:
        paths = {p.rsplit(".", 1)[-1]: p for p, _ in walk_keys() if p and "[" not in p
                 and not p.endswith("*")}
        near = difflib.get_close_matches(name, list(paths), n=1, cutoff=0.75)
        hint = (f"did you mean `{paths[near[0]]}`? (it belongs there)" if near
                else f"known keys here: {', '.join(known)}")
    parent = path.rsplit(".", 1)[0] if "." in path else "the top level"
    w.add(child.key_loc or child.loc, path, f"unknown key {name!r} in {parent}", hint)


def _array(node: Located, key: Key, path: str, w: Walk) -> Any:
    items: list[Any] = []
    seen: dict[Any, int] = {}
    ok = True
    for i, item in enumerate(node.value):
        if item.kind == "null":
            w.add(item.loc, f"{path}[{i}]", "empty list entry", "remove the `-` line or "
                  "write a value after it")
            ok = False
            continue
        value = _value(item, key.items, f"{path}[{i}]", w) if key.items else item.plain()
        if value is BAD:
            ok = False
            continue
        if key.unique and isinstance(value, (str, int, float)) and value in seen:
            w.add(item.loc, f"{path}[{i}]", f"{value!r} is listed twice (also {path}"
                  f"[{seen[value]}])", "remove the duplicate")
            ok = False
            continue
        seen.setdefault(value, i)
        items.append(value)
    if key.min_items and len(node.value) < key.min_items:
        w.add(node.key_loc or node.loc, path, f"{path} needs at least {key.min_items} "
              f"entr{'y' if key.min_items == 1 else 'ies'}",
              f"e.g. [{key.items.example}]" if key.items and key.items.example else None)
        return BAD
    return items if ok or items else BAD


def _map(node: Located, key: Key, path: str, w: Walk) -> Any:
    out: dict[str, Any] = {}
    for name, child in node.value.items():
        child_path = f"{path}.{name}"
        if key.key_pattern and not re.fullmatch(key.key_pattern, name):
            w.add(child.key_loc or child.loc, child_path, f"{name!r} is not allowed as a key "
                  f"of {path}", f"allowed: {_pattern_words(path)}")
            continue
        value = _value(child, key.items, child_path, w) if key.items else child.plain()
        if value is not BAD and value is not None:
            out[name] = value
    return out


def _pattern_words(path: str) -> str:
    if path == "tags":
        return "1-128 characters, not starting with aws: or clusterkit: (reserved)"
    return "letters, digits and _, not starting with a digit"


def _scalar(node: Located, key: Key, path: str, w: Walk) -> Any:
    value = node.value
    if isinstance(value, float) and not math.isfinite(value):
        w.add(node.loc, path, f"{value} is not a finite number", "write a plain number")
        return BAD
    if key.type == "text" and not isinstance(value, str):
        value = str(value)
    problem = _limits(value, key)
    if problem:
        w.add(node.loc, path, problem[0], problem[1])
        return BAD
    return value


def _limits(value: Any, key: Key) -> tuple[str, str | None] | None:
    if key.enum and value not in key.enum:
        close = difflib.get_close_matches(str(value), key.enum, n=1, cutoff=0.5)
        return (f"{value!r} is not one of {', '.join(key.enum)}",
                f"did you mean {close[0]!r}?" if close else f"use one of {', '.join(key.enum)}")
    if isinstance(value, str):
        if key.max_length is not None and len(value) > key.max_length:
            return f"longer than {key.max_length} characters", "shorten it"
        bad = bad_char(value, key.chars)
        if bad is not None:
            return (f"{value!r} contains {bad[1]} (character {bad[0] + 1})",
                    _CHARS_HINT[key.chars])
        if key.pattern and not re.fullmatch(key.pattern, value):
            return (f"{value!r} is not {key.what or 'in the expected form'}",
                    f"e.g. {key.example}" if key.example else None)
        return None
    low, high = key.minimum, key.maximum
    if low is not None and (value < low or (key.exclusive_minimum and value == low)):
        more = "more than" if key.exclusive_minimum else "at least"
        return f"{value} is too small: must be {more} {_num(low)}", _range(key)
    if high is not None and value > high:
        return f"{value} is too large: must be at most {_num(high)}", _range(key)
    return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _range(key: Key) -> str:
    low = "0 (exclusive)" if key.exclusive_minimum else _num(key.minimum or 0)
    return f"allowed range: {low} .. {_num(key.maximum) if key.maximum is not None else 'any'}"
