"""JSON Schema (draft 2020-12) of cluster.yaml, generated from the key tables. PURE."""

from __future__ import annotations

from typing import Any

from clusterkit import __version__
from clusterkit.spec.keys import SPEC, Key

SCHEMA_ID = "https://clusterkit.dev/schema/cluster.json"
_JSON_TYPE = {"string": "string", "integer": "integer", "number": "number",
              "boolean": "boolean", "object": "object", "map": "object", "array": "array"}


def json_schema() -> dict[str, Any]:
    """The whole schema; the root is the top-level spec mapping."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
              "title": f"clusterkit cluster spec (clusterkit {__version__})"}
    schema.update(_key_schema(SPEC, nullable=False))
    return schema


def _key_schema(key: Key, nullable: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"description": key.doc}
    types = ["string", "number"] if key.type == "text" else [_JSON_TYPE[key.type]]
    if nullable:  # an empty value means "the default" (or "the section with its defaults")
        types.append("null")
    if key.type == "string" and {"true", "false"} <= set(key.enum):
        types.append("boolean")  # YAML's true/false stand for "true"/"false" (walk.py)
    out["type"] = types[0] if len(types) == 1 else types
    if key.default is not None:
        out["default"] = key.default
    out.update(_limits(key))
    if key.type == "object":
        out.update(_object(key))
    elif key.type == "array" and key.items is not None:
        out["items"] = _key_schema(key.items, nullable=False)
        if key.min_items:
            out["minItems"] = key.min_items
        if key.unique:
            out["uniqueItems"] = True
    elif key.type == "map" and key.items is not None:
        out["additionalProperties"] = _key_schema(key.items, nullable=True)
        if key.key_pattern:
            out["propertyNames"] = {"pattern": key.key_pattern}
    if key.shorthand:  # the section, or its shorthand key's value, or a boolean
        short = _key_schema((key.keys or {})[key.shorthand], nullable=False)
        section = {k: v for k, v in out.items() if k != "description"}
        return {"description": key.doc, "anyOf": [section, short, {"type": "boolean"}]}
    return out


def _limits(key: Key) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if key.enum:
        out["enum"] = list(key.enum) + ([None] if not key.required else [])
        out["enum"] += [True, False] if {"true", "false"} <= set(key.enum) else []
    if key.pattern:
        out["pattern"] = key.pattern
    elif key.type in ("string", "text") and not key.enum:
        out["pattern"] = key.chars.regex
    if key.max_length is not None:
        out["maxLength"] = key.max_length
    if key.minimum is not None:
        out["exclusiveMinimum" if key.exclusive_minimum else "minimum"] = key.minimum
    if key.maximum is not None:
        out["maximum"] = key.maximum
    if key.example is not None:
        out["examples"] = [key.example]
    return out


def _object(key: Key) -> dict[str, Any]:
    keys = key.keys or {}
    out: dict[str, Any] = {
        "properties": {name: _key_schema(k, nullable=not k.required) for name, k in keys.items()},
        "additionalProperties": False,
    }
    required = [name for name, k in keys.items() if k.required]
    if required:
        out["required"] = required
    if key.exclusive:
        out["not"] = {"required": list(key.exclusive),
                      "properties": {n: {"not": {"type": "null"}} for n in key.exclusive}}
    return out
