"""Where the sandbox keeps its state, and the small files in it.

Layout of the state dir (default ``~/.clusterkit/sandbox``, or ``--dir`` /
``CLUSTERKIT_SANDBOX_DIR``)::

    state.json         endpoint, pid, start time (present while running)
    mode.json          what the sandbox hands clusterkit (clusterkit.sandboxmode; while
                       running, written by the daemon before state.json: ``client.py``)
    addresses.json     {instance_id: "127.0.0.N"}  (the address-hook map)
    client-cut.json    {"until": epoch}: the clients' connections to the nodes fail until
                       then (`sandbox cut-client`, ``clientcut``)
    nodes.json         {instance_id: {address, hostname, state, pid, mntns, ...}}
    capabilities.json  what this machine can emulate (root, loop, md, namespaces)
    sandbox.log        the daemon's log (kept after stop, for post-mortems)
    auth/              0700: this start's credentials and a config file, 0600 each
                       (credentials.py; written at start, removed at stop)
    run/               everything temporary: node roots, host keys, disk images
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

# the state dir and its configuration file are clusterkit's to find (sandbox mode reads
# them there): named once, in clusterkit.sandboxmode, and re-exported here
from clusterkit.node.reaping import pid_alive as pid_alive
from clusterkit.sandboxmode import CLIENT_CUT_FILE, MODE_FILE, daemon_alive
from clusterkit.sandboxmode import DIR_ENV as DIR_ENV
from clusterkit.sandboxmode import state_dir as state_dir
from clusterkit_sandbox import credentials

STATE_FILE = "state.json"
ADDRESSES_FILE = "addresses.json"
NODES_FILE = "nodes.json"
CAPS_FILE = "capabilities.json"
TIMINGS_FILE = "timings.json"  # the timings table in force (sandbox.timings)
LOG_FILE = "sandbox.log"
RUN_DIR = "run"
RUN_MARKER = ".clusterkit-sandbox"  # in run/: this directory is the sandbox's to delete
DAEMON_MODULE = "clusterkit_sandbox.server"


def write_json(path: Path, data: Any) -> None:
    """Atomic write: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    """The file's JSON, or ``default`` if it is missing, unreadable or not JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # ValueError: bad JSON or bad UTF-8
        return default


def read_json_dict(path: Path) -> dict[str, Any]:
    """Like read_json, but anything that is not a JSON object reads as {}."""
    data = read_json(path)
    return data if isinstance(data, dict) else {}


def is_daemon(pid: Any, directory: Path) -> bool:
    """``pid`` is alive and is the sandbox daemon of ``directory``: a pid recorded before
    a reboot (or a hand-edited state.json) may now belong to anything, never signal it."""
    return daemon_alive(pid, DAEMON_MODULE, directory)


def running_state(directory: Path) -> dict[str, Any] | None:
    """state.json if its daemon is alive, else None."""
    state = read_json_dict(directory / STATE_FILE)
    if isinstance(state.get("endpoint"), str) and is_daemon(state.get("pid"), directory):
        return state
    return None


def cleanup_files(state_dir: Path) -> None:
    """The daemon's files: its run dir (when marked as its own) and its state files."""
    if (state_dir / RUN_DIR / RUN_MARKER).exists():
        shutil.rmtree(state_dir / RUN_DIR, ignore_errors=True)
    for name in (MODE_FILE, STATE_FILE, ADDRESSES_FILE, NODES_FILE, CLIENT_CUT_FILE):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            (state_dir / name).unlink()
    with contextlib.suppress(NotADirectoryError):
        credentials.remove(state_dir)
