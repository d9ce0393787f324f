"""`train`'s code sync: which local directory goes to the nodes, which of its files (not
``.git``, not what ``.gitignore`` ignores), packed as one tar stream for SSH stdin, and
where it lands on the nodes.

Decisions (docs/howto/training.md):
- ``--workdir DIR`` is always a local directory to sync. ``train.workdir`` is synced
  only when it is a relative path (taken from the spec file's directory); an absolute
  path or one starting with ``~`` names a directory on the nodes, where the command runs
  as it is (e.g. ``/efs/project`` kept there by other means): so the default ``~``
  never ships a home directory.
- The copy lands in ``<efs mount>/clusterkit/<cluster>/work`` when the spec has EFS (one
  upload, through the master), else in ``~/clusterkit-work/<cluster>`` on every node;
  it replaces the previous copy whole (extracted beside it, then swapped), so a file
  deleted locally is gone on the nodes too.
- Nothing outside the directory leaves the machine, links followed: a relative
  ``train.workdir`` must resolve inside the spec file's directory, and every path sent
  inside the directory it is sent from (a link to a file or directory of the tree is
  sent as a link; one that leads out is refused, exit 2, before anything is packed).
- The file list never runs what a repository configures (a shared directory's
  ``.git/config`` is not the user's): git runs with its hooks and fsmonitor off, and
  none of the user's ``GIT_*`` variables.
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
    (from the spec file's directory, which it must resolve inside), else None."""
    if option:
        path = Path(option).expanduser()
    elif spec.train and not spec.train.workdir.startswith(("/", "~")):
        base = Path(spec.file).expanduser().resolve().parent
        path = base / spec.train.workdir
        _refuse_escape(base, spec.train.workdir, f"train.workdir {spec.train.workdir!r}",
                       _SPEC_HINT)
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


_SPEC_HINT = ("a relative train.workdir is uploaded from the spec file's directory and must "
              "stay inside it, links followed; to upload another directory, give it as "
              "`--workdir DIR`")
_TREE_HINT = ("a link in the workdir is sent as a link and must point inside it; remove the "
              "link, point it inside the directory, or (in a git work tree) .gitignore it")


def _real(path: Path) -> Path:
    """``path`` with every link followed; never raises on a loop (Path.resolve does)."""
    return Path(os.path.realpath(path))


def _escape(root: Path, name: str) -> tuple[Path, str | None] | None:
    """Where ``name`` leaves ``root`` (resolved), links followed: the first link on the
    way down that leads outside and what it says (or the path itself and None, for a
    ``..``); None when ``name`` resolves inside ``root``."""
    if _real(root / name).is_relative_to(root):
        return None
    here = root
    for part in Path(name).parts:
        here = here / part
        if here.is_symlink() and not _real(here).is_relative_to(root):
            return here, os.readlink(here)
    return root / name, None


def _refuse_escape(root: Path, name: str, what: str, hint: str) -> None:
    """UsageError (exit 2) naming the link and its target when ``name`` leaves ``root``."""
    found = _escape(root, name)
    if found is None:
        return
    path, text = found
    how = f"the link {path} points to {text!r}" if text is not None else str(path)
    raise UsageError(f"{what} leads outside {root}: {how} ({_real(path)})", hint)


# Command-line settings win over every config file: a shared directory's .git/config
# (core.fsmonitor is a command git runs on reading the index) runs nothing here. The
# user's own global and system config still apply (a global core.excludesFile keeps
# their secrets out of the upload).
_GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
        "-c", "core.untrackedCache=false", "-c", "protocol.allow=never")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """git in ``root`` with nothing of a repository's commands and none of the user's
    ``GIT_*`` variables (GIT_DIR, GIT_CONFIG_PARAMETERS ... would point it elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    return subprocess.run([*_GIT, "-C", str(root), *args], capture_output=True,
                          check=False, env=env, stdin=subprocess.DEVNULL)


def _git_files(root: Path) -> list[str] | None:
    """Tracked and untracked-not-ignored files under ``root``, or None when ``root`` is
    not in a git work tree (or git is missing)."""
    try:
        inside = _git(root, "rev-parse", "--is-inside-work-tree")
        if inside.returncode != 0 or inside.stdout.strip() != b"true":
            return None
        listed = _git(root, "ls-files", "-co", "--exclude-standard", "-z")
    except OSError:
        return None
    if listed.returncode != 0:
        return None
    names = [n for n in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    # tracked but deleted in the work tree: listed by -c, nothing to send
    return sorted(n for n in set(names) if os.path.lexists(root / n))


def _walked_files(root: Path) -> list[str]:
    """Every file under ``root``; a link to a directory is one entry (sent as a link)."""
    out = []
    for base, dirs, files in os.walk(root):
        links = [d for d in dirs if os.path.islink(os.path.join(base, d))]
        dirs[:] = sorted(d for d in dirs if d != ".git" and d not in links)
        out += [os.path.relpath(os.path.join(base, f), root) for f in files + links]
    return sorted(out)


def files(root: Path) -> list[str]:
    """The files to send, relative to ``root``: never anything under a ``.git``; a path
    that resolves outside ``root`` (a link out, at any level) is refused (UsageError)
    before anything is packed."""
    names = _git_files(root)
    if names is None:
        names = _walked_files(root)
    names = [n for n in names if ".git" not in Path(n).parts]
    base = root.resolve()
    for name in names:
        _refuse_escape(base, name, f"workdir file {name!r}", _TREE_HINT)
    return names


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
