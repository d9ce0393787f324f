"""clusterkit's local state directory and the one gate to per-cluster paths in it.

``$CLUSTERKIT_HOME`` (default ``~/.clusterkit``) holds ``clusters/<name>/`` per cluster
(known_hosts, ssh_config, the cluster record). A cluster name comes from the command line,
so every local write or delete of per-cluster state goes through ``cluster_dir``: the
name must follow the spec's name rule and the directory must resolve inside
``<state>/clusters/`` (no ``..``, no symlink pointing out).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.spec.keys import SPEC

HOME_ENV = "CLUSTERKIT_HOME"
NAME_RE: str = SPEC.keys["name"].pattern or ""
NAME_RULE: str = SPEC.keys["name"].what or "a cluster name"


def state_dir() -> Path:
    """``$CLUSTERKIT_HOME``, else ``~/.clusterkit`` (absolute, not resolved)."""
    return Path(os.environ.get(HOME_ENV) or "~/.clusterkit").expanduser().absolute()


def clusters_dir() -> Path:
    return state_dir() / "clusters"


def is_cluster_name(text: str) -> bool:
    return bool(re.fullmatch(NAME_RE, text))


def check_name(name: str) -> str:
    """``name`` when it follows the spec's name rule; else UsageError (exit 2)."""
    if not is_cluster_name(name):
        raise UsageError(f"{name!r} is not a cluster name: a cluster name is {NAME_RULE}",
                         "give the cluster's name (as in its spec's `name:`) or the path "
                         "of an existing spec file (.yaml)")
    return name


def cluster_dir(name: str) -> Path:
    """``<state>/clusters/<name>``, refused unless ``name`` is a cluster name and the
    path resolves inside ``<state>/clusters/`` (a symlink pointing out is refused)."""
    check_name(name)
    root = clusters_dir()
    path = root / name
    if not path.resolve().is_relative_to(root.resolve()):
        raise ClusterkitError(f"refusing to use {path}: it resolves to {path.resolve()}, "
                              f"outside clusterkit's state directory {root}",
                              f"remove the link {path} (clusterkit does not follow it)")
    return path


def remove_cluster_dir(name: str) -> bool:
    """Delete ``<state>/clusters/<name>`` (through ``cluster_dir``'s checks); True if it
    existed."""
    path = cluster_dir(name)
    if path.is_symlink():  # points inside the state dir: drop the link, not its target
        path.unlink()
        return True
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True
