"""The docs' "Every key" table, generated from the key tables of ``keys.py``. PURE.

``scripts/docs.py --write`` puts it into docs/reference/spec.md; a test fails when the
page holds another table, so the documentation cannot drift from the validator and the
schema.
"""

from __future__ import annotations

import re
from typing import Any

from clusterkit.spec.keys import SPEC, Key, walk_keys

# What the Default column says where the table's default is not a value: a section that
# is off unless written, a default computed at run time, or "no value".
SHOWN_DEFAULTS: dict[str, str] = {
    "regions": "`[region]`",
    "nodes.max_price": "on-demand price",
    "nodes.image.id": "(name filter)",
    "ssh.identity_file": "ssh-agent",
    "ssh.allowed_cidr": "your address /32",
    "storage.scratch": "off",
    "storage.efs": "off",
    "storage.efs.file_system_id": "create one",
    "storage.dataset": "off",
    "storage.dataset.iops": "gp3: 3000",
    "storage.dataset.throughput": "gp3: 125",
    "storage.dataset.size_gb": "the snapshot's size",
    "train.max_cost": "no cap",
    "train": "off",
    "autostop": "off",
}
TYPE_NAMES = {"object": "section", "map": "mapping", "array": "list"}
HEADER = "| key | type | default | meaning |\n|---|---|---|---|\n"


def _type(key: Key) -> str:
    if key.enum:
        return " \\| ".join(f"`{value}`" for value in key.enum)
    if key.shorthand:
        return f"section, `{(key.keys or {})[key.shorthand].example}` or `off`"
    if key.type == "array" and key.items is not None:
        return f"list of {key.items.type}"
    return TYPE_NAMES.get(key.type, key.type)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _default(path: str, key: Key) -> str:
    if key.required:
        return "**required**"
    if path in SHOWN_DEFAULTS:
        return SHOWN_DEFAULTS[path]
    if key.default is not None:
        return f"`{_value(key.default)}`"
    return {"object": "(section)", "map": "`{}`", "array": "`[]`"}.get(key.type, "(none)")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _meaning(key: Key) -> str:
    """The key's doc, with its range when the doc does not already state one."""
    doc = key.doc.replace("|", "\\|")
    if key.minimum is None or key.maximum is None or re.search(r"\d-\d", key.doc):
        return doc
    low = f">{_number(key.minimum)}" if key.exclusive_minimum else _number(key.minimum)
    return f"{doc} ({low}..{_number(key.maximum)})"


def key_table(root: Key = SPEC) -> str:
    """Every key of cluster.yaml as a Markdown table: key, type, default, meaning (array
    items and map values are described by their parent's row)."""
    rows = [f"| `{path}` | {_type(key)} | {_default(path, key)} | {_meaning(key)} |"
            for path, key in walk_keys(root)
            if path and not path.endswith(("[]", ".*"))]
    return HEADER + "\n".join(rows) + "\n"
