"""What every node-side program reads and writes the same way: stdlib only, Python >=
3.8. In every job dir beside the supervisor and in the autostop dir beside the watchdog
(``bundle.SUPERVISOR``, ``bundle.WATCHDOG``), and sent before the follower and the
observer (``bundle.FOLLOWER``, ``bundle.OBSERVER``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable


def read_json(path: str, default: object = None) -> object:
    """The file's JSON; ``default`` when it is missing, unreadable or being written."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def write_json(path: str, data: object, mode: int = 0o600) -> None:
    """Atomic (rename; the temp file is this process's own) and ``mode`` (0600 unless
    said: state.json may be read at any time by the client)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.write("\n")
    os.chmod(tmp, mode)  # the umask may have taken bits off
    os.replace(tmp, path)


def options(args: list, flag: str) -> list:
    """Every value given after ``flag`` in ``args`` (``--job A --job B``: [A, B])."""
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


def run_program(main: Callable[[list], int]) -> None:
    """How a program sent over SSH stdin ends (the follower, the observer): exit with
    ``main(sys.argv[1:])``, and 0 when the client went away (a broken pipe)."""
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the client went away
        sys.exit(0)
