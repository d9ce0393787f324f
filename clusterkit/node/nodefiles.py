"""What every node-side program of a job reads and writes the same way: stdlib only,
Python >= 3.8. In every job dir beside the supervisor (``jobfiles.NODE_FILES``), and
sent before the follower and the observer (``jobfiles.node_program``'s modules)."""

from __future__ import annotations

import json
import os


def read_json(path: str, default: object = None) -> object:
    """The file's JSON; ``default`` when it is missing, unreadable or being written."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def write_json(path: str, data: object) -> None:
    """Atomic (rename) and 0600: state.json may be read at any time by the client."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def options(args: list, flag: str) -> list:
    """Every value given after ``flag`` in ``args`` (``--job A --job B``: [A, B])."""
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]
