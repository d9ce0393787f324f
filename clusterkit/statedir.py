"""clusterkit's local state directory and the one gate to per-cluster paths in it.

``$CLUSTERKIT_HOME`` (default ``~/.clusterkit``) holds ``clusters/<name>/`` per cluster
(known_hosts, ssh_config, the cluster record). A cluster name comes from the command line,
so every local write or delete of per-cluster state goes through ``cluster_dir``: the
name must follow the spec's name rule and the directory must resolve inside
``<state>/clusters/`` (no ``..``, no symlink pointing out).

Every directory from the state root down is the user's alone (0700), however it was
made (an older clusterkit, or the sandbox, may have left ``~/.clusterkit`` 0755): the
writers go through ``private_dir``, which creates or tightens each one, and files are
written through ``write_private`` (``mkstemp``: 0600, then renamed into place).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
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


def private_dir(path: Path) -> Path:
    """Make ``path`` a directory, and every directory from the state root down to it
    0700 and the user's own (existing ones are tightened; one owned by someone else is
    refused). A path outside the state directory is only created (0700)."""
    root = state_dir()
    if not path.is_relative_to(root):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path
    root.parent.mkdir(parents=True, exist_ok=True)
    parts = path.relative_to(root).parts
    for folder in [root, *(root.joinpath(*parts[:i]) for i in range(1, len(parts) + 1))]:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        _tighten(folder)
    return path


def _tighten(folder: Path) -> None:
    info = os.stat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise ClusterkitError(f"{folder} is not a directory",
                              "move it away: clusterkit keeps its state there")
    if info.st_uid != os.getuid():
        raise ClusterkitError(f"refusing to use {folder}: it belongs to user id "
                              f"{info.st_uid}, not you",
                              f"clusterkit's state must be yours alone; set {HOME_ENV} to "
                              "a directory of your own")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)


def ensure_cluster_dir(name: str) -> Path:
    """``cluster_dir(name)``, created (and the state root tightened) as ``private_dir``."""
    return private_dir(cluster_dir(name))


def write_private(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` (0600) through a unique temp file in its directory
    and a rename: a reader sees the old file or the new one, never part of one."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
