"""The content manifest of a published dataset: every regular file under the dataset's
root with its size and SHA-256, stored as ``.clusterkit-manifest.json`` at the root of
the published filesystem; its digest (SHA-256 of the canonical JSON) is tagged on the
snapshot.

The JSON format is stable (version 1) so node-side checks can read it with any
``python3``::

    {"version": 1, "files": [{"path": "a/b.rec", "size": 123, "sha256": "<hex>"}, ...],
     "total_bytes": 123}

``files`` is sorted by path (POSIX, relative, no ``.``/``..``); the manifest itself is
not listed. Canonical JSON: sorted keys, no spaces, UTF-8, no trailing newline.

Tree rule: regular files and directories only. A symlink, device, FIFO or socket anywhere
under the root is refused (``UsageError`` naming it): a symlink would publish a link to a
path that does not exist on the nodes, and the others have no bytes to publish.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from clusterkit.dataset.atomic import output_error
from clusterkit.errors import UsageError

MANIFEST_NAME = ".clusterkit-manifest.json"
VERSION = 1
READ_CHUNK = 1 << 20
HASH_THREADS = min(8, os.cpu_count() or 1)  # hashlib drops the GIL on large buffers


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative, POSIX separators
    size: int
    sha256: str  # lowercase hex


@dataclass(frozen=True)
class Manifest:
    files: tuple[FileEntry, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "total_bytes": self.total_bytes,
                "files": [{"path": f.path, "size": f.size, "sha256": f.sha256}
                          for f in self.files]}

    def canonical(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()


class Problem(Enum):
    MISSING = "missing"
    SIZE = "size differs"
    SHA256 = "sha256 differs"
    EXTRA = "not in the manifest"


@dataclass(frozen=True)
class Mismatch:
    path: str
    problem: Problem
    expected: str = ""
    found: str = ""

    def __str__(self) -> str:
        detail = f" (expected {self.expected}, found {self.found})" if self.expected else ""
        return f"{self.path}: {self.problem.value}{detail}"


@dataclass(frozen=True)
class Observed:
    """What a node (or a local tree) holds for one path; ``sha256`` None when not hashed."""

    size: int
    sha256: str | None = None


def check(manifest: Manifest, observed: Mapping[str, Observed]) -> list[Mismatch]:
    """Pure: every difference between the manifest and what was observed, sorted by path.
    Sizes are always compared; SHA-256 only where the observation carries one."""
    found: list[Mismatch] = []
    for entry in manifest.files:
        seen = observed.get(entry.path)
        if seen is None:
            found.append(Mismatch(entry.path, Problem.MISSING))
        elif seen.size != entry.size:
            found.append(Mismatch(entry.path, Problem.SIZE, str(entry.size), str(seen.size)))
        elif seen.sha256 is not None and seen.sha256 != entry.sha256:
            found.append(Mismatch(entry.path, Problem.SHA256, entry.sha256, seen.sha256))
    listed = {f.path for f in manifest.files}
    found += [Mismatch(p, Problem.EXTRA) for p in observed if p not in listed]
    return sorted(found, key=lambda m: m.path)


def parse(text: str | bytes) -> Manifest:
    """A manifest from its JSON; ValueError when it is not a version-1 manifest."""
    try:
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"unsupported manifest version {data.get('version')!r}")
        files = tuple(FileEntry(str(f["path"]), int(f["size"]), str(f["sha256"]))
                      for f in data["files"])
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a clusterkit manifest: {exc}") from exc
    manifest = Manifest(files)
    if data.get("total_bytes") != manifest.total_bytes:
        raise ValueError("manifest total_bytes does not match its files")
    return manifest


def walk(root: Path) -> list[tuple[str, int]]:
    """(relative path, size) of every regular file under ``root``, sorted; refuses
    symlinks and special files (see the module rule). The manifest itself is skipped."""
    found: list[tuple[str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            info = os.lstat(full)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if stat.S_ISLNK(info.st_mode) or not (stat.S_ISREG(info.st_mode)
                                                 or stat.S_ISDIR(info.st_mode)):
                kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                raise UsageError(f"{full} is {kind}: a dataset holds regular files and "
                                 "directories only",
                                 "copy the file it points to into the tree (cp -L), or "
                                 "move it out of the dataset directory")
            if stat.S_ISREG(info.st_mode) and rel != MANIFEST_NAME:
                found.append((rel, info.st_size))
    return sorted(found)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def build(root: Path, files: Iterable[tuple[str, int]] | None = None) -> Manifest:
    """Hash every file under ``root`` (several at once); sizes are re-read after hashing
    so a file that changed meanwhile is caught by the node-side check, not hidden."""
    listed = list(files) if files is not None else walk(root)
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        hashes = list(pool.map(lambda item: sha256_file(root / item[0]), listed))
    return Manifest(tuple(FileEntry(rel, (root / rel).stat().st_size, sha)
                          for (rel, _), sha in zip(listed, hashes, strict=True)))


def write(root: Path, manifest: Manifest) -> Path:
    """``root/.clusterkit-manifest.json``, written under a temporary name and renamed."""
    final = root / MANIFEST_NAME
    tmp = root / f"{MANIFEST_NAME}.tmp-{os.getpid()}"
    try:
        tmp.write_bytes(manifest.canonical())
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise output_error(str(final), exc) from exc
    return final
