"""A plan file on disk, `up`'s (`plan --out`) and `down`'s (`down --out`) alike: JSON
with its format, the format's version and the clusterkit version that wrote it, written
atomically. A file of another format, another format version or another clusterkit
version is refused (UsageError, exit 2, naming both versions): a plan is applied only
by the clusterkit that made it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clusterkit import __version__
from clusterkit.errors import UsageError


def write(path: str, fmt: str, version: int, body: dict[str, Any]) -> None:
    """``body`` under the header; a reader never sees half of it."""
    data = {"format": fmt, "version": version, "clusterkit": __version__, **body}
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(target)


def read(path: str, fmt: str, version: int, make_one: str) -> dict[str, Any]:
    """The file's JSON once its header is this clusterkit's ``fmt`` and ``version``;
    UsageError (exit 2) naming the file otherwise (``make_one``: the hint)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"no plan file {path}", make_one) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not a plan file: {exc}", make_one) from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise UsageError(f"{path} is not a clusterkit plan file (no \"format\": \"{fmt}\")",
                         make_one)
    wrote = data.get("clusterkit")
    if data.get("version") != version or wrote != __version__:
        who = f"clusterkit {wrote}" if wrote else \
            f"an older clusterkit (plan format {data.get('version')!r})"
        raise UsageError(f"{path} was written by {who}; this is clusterkit {__version__}, "
                         "which applies only its own plans",
                         f"make the plan again with this version ({make_one})")
    return data
