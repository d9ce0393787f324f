"""`train`'s code sync: which local directory goes to the nodes, which of its files (not
``.git``, not what ``.gitignore`` ignores), packed as one tar stream for SSH stdin, and
where it lands on the nodes.

Decisions (README, "Training"):
- ``--workdir DIR`` is always a local directory to sync. ``train.workdir`` is synced
  only when it is a relative path (taken from the spec file's directory); an absolute
  path or one starting with ``~`` names a directory on the nodes, where the command runs
  as it is (e.g. ``/efs/project`` kept there by other means): so the default ``~``
  never ships a home directory.
- The copy lands in ``<efs mount>/clusterkit/<cluster>/work`` when the spec has EFS (one
  upload, through the master), else in ``~/clusterkit-work/<cluster>`` on every node;
  it replaces the previous copy whole (extracted beside it, then swapped), so a file
  deleted locally is gone on the nodes too.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from clusterkit.errors import UsageError
from clusterkit.spec.model import Spec

MAX_BYTES = 512 * 1024 * 1024  # a code directory, not a dataset


@dataclass(frozen=True)
class Workdir:
    """A local directory to sync and its place on the nodes (a shell word: ``$HOME/…``
    or an absolute path), ``shared``: on EFS, so written once through the master."""

    local: Path
    remote: str
    shared: bool


def local_source(spec: Spec, option: str | None) -> Path | None:
    """The local directory to sync: ``--workdir``, else a relative ``train.workdir``
    (from the spec file's directory), else None."""
    if option:
        path = Path(option).expanduser()
    elif spec.train and not spec.train.workdir.startswith(("/", "~")):
        path = Path(spec.file).expanduser().resolve().parent / spec.train.workdir
    else:
        return None
    if not path.is_dir():
        raise UsageError(f"workdir {str(path)!r} is not a directory",
                         "--workdir (or a relative train.workdir) names the local directory "
                         "whose files are copied to the nodes")
    return path.resolve()


def plan(spec: Spec, option: str | None) -> Workdir | None:
    local = local_source(spec, option)
    if local is None:
        return None
    efs = spec.storage.efs
    if efs is not None:
        return Workdir(local, f"{efs.mount.rstrip('/')}/clusterkit/{spec.name}/work", True)
    return Workdir(local, f"$HOME/clusterkit-work/{spec.name}", False)


def _git_files(root: Path) -> list[str] | None:
    """Tracked and untracked-not-ignored files under ``root``, or None when ``root`` is
    not in a git work tree (or git is missing)."""
    try:
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, check=False)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co",
                                 "--exclude-standard", "-z"],
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    names = [n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n]
    # tracked but deleted in the work tree: listed by -c, nothing to send
    return sorted(n for n in set(names) if os.path.lexists(root / n))


def _walked_files(root: Path) -> list[str]:
    out = []
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        out += [os.path.relpath(os.path.join(base, f), root) for f in files]
    return sorted(out)


def files(root: Path) -> list[str]:
    """The files to send, relative to ``root``: never anything under a ``.git``."""
    names = _git_files(root)
    if names is None:
        names = _walked_files(root)
    return [n for n in names if ".git" not in Path(n).parts]


def pack(root: Path, names: list[str]) -> bytes:
    """``names`` (relative to ``root``) as a gzip'd tar, owner-neutral."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for name in names:
            info = tar.gettarinfo(str(root / name), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isfile():
                with open(root / name, "rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
            if buf.tell() > MAX_BYTES:
                raise UsageError(f"workdir {root} is over {MAX_BYTES >> 20} MiB packed",
                                 "keep data out of the synced directory (.gitignore it) "
                                 "and read it from the dataset mount or EFS")
    return buf.getvalue()


def extract_command(remote: str, job_id: str) -> str:
    """Shell: unpack stdin into a fresh copy beside ``remote``, swap it in, print the
    absolute path. ``remote`` is built from the spec (a checked cluster name under a
    fixed prefix), never from the synced files."""
    target = remote.replace("$HOME", '"$HOME"', 1) if remote.startswith("$HOME") \
        else shlex.quote(remote)
    return (f"set -e; d={target}; new=\"$d.new-{job_id}\"; rm -rf -- \"$new\"; "
            'mkdir -p -- "$new"; tar -xzf - -C "$new" --no-same-owner; '
            'rm -rf -- "$d.old"; if [ -e "$d" ]; then mv -- "$d" "$d.old"; fi; '
            'mv -- "$new" "$d"; rm -rf -- "$d.old"; cd -- "$d"; pwd')
