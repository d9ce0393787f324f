"""An ext4 filesystem image of a directory, built in user space: ``mke2fs -d`` (no root,
no mount, no loop device), sparse, sized from the tree with headroom and rounded up to
whole GiB (EBS sizes are whole GiB).

Ownership decision: every file and directory in the image is owned by root (uid/gid 0)
and world-readable (files 0644, or 0755 when the source is executable by its owner;
directories 0755). ``mke2fs -d`` copies the builder's uid/gid and modes; the dataset is
mounted read-only on the nodes, where the ssh user's uid is not knowable in advance
(1000 on Ubuntu and Amazon Linux, but not everywhere), so "anyone may read, nobody owns"
is the one rule that works for every user and cannot be fixed later on a read-only
mount. Entries that differ from the rule are fixed in the image with ``debugfs -w``
(one ``set_inode_field`` per entry, only where needed), never in the user's tree.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clusterkit.errors import ClusterkitError

GIB = 1 << 30
MIB = 1 << 20
FS_BLOCK = 4096
INODE_SIZE = 256
JOURNAL_MIB = 64
FIXED_OVERHEAD = 32 * MIB  # superblocks, group descriptors, bitmaps, root, lost+found
HEADROOM = 1.10
LABEL = "ck-dataset"
OWNER = 0  # uid and gid of every entry (see the module docstring)
TOOLS_HINT = "install e2fsprogs >= 1.43 (mke2fs -d and debugfs): apt install e2fsprogs"


@dataclass(frozen=True)
class TreeSize:
    """What sizing needs to know about a tree."""

    data_bytes: int
    files: int
    dirs: int
    file_blocks: int  # 4 KiB filesystem blocks the files' data takes


@dataclass(frozen=True)
class Image:
    path: Path
    size_bytes: int
    inodes: int
    fixed_entries: int  # entries whose owner or mode was set by debugfs

    @property
    def size_gib(self) -> int:
        return self.size_bytes // GIB


def measure(root: Path) -> TreeSize:
    data = files = dirs = blocks = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirs += len(dirnames)
        for name in filenames:
            size = os.lstat(os.path.join(dirpath, name)).st_size
            data += size
            files += 1
            blocks += -(-size // FS_BLOCK)
    return TreeSize(data, files, dirs, blocks)


def inode_count(tree: TreeSize) -> int:
    """Inodes for every entry plus 20% and a margin (mke2fs's default ratio can run
    out on a tree of many small files, or waste space on a few large ones)."""
    return int((tree.files + tree.dirs) * 1.2) + 1024


def image_size(tree: TreeSize) -> int:
    """Bytes: file data in whole blocks, one block per file and directory (extent and
    directory blocks), the inode table, the journal and fixed metadata, plus 10%
    headroom, rounded up to whole GiB, at least 1 GiB. Pure."""
    need = (tree.file_blocks + tree.files + tree.dirs) * FS_BLOCK
    need += inode_count(tree) * INODE_SIZE + JOURNAL_MIB * MIB + FIXED_OVERHEAD
    gib = -(-int(need * HEADROOM) // GIB)
    return max(1, gib) * GIB


def wanted_mode(mode: int) -> int:
    """Pure: the image mode for a source mode (the module's ownership rule)."""
    if stat.S_ISDIR(mode):
        return stat.S_IFDIR | 0o755
    return stat.S_IFREG | (0o755 if mode & stat.S_IXUSR else 0o644)


def fixups(root: Path) -> list[str]:
    """debugfs commands that give every entry under ``root`` the rule's owner and mode."""
    info = os.stat(root)
    cmds: list[str] = [f'sif "/" mode 0{wanted_mode(info.st_mode):o}']
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            info = os.lstat(full)
            rel = "/" + os.path.relpath(full, root).replace(os.sep, "/")
            if '"' in rel or "\n" in rel:
                raise ClusterkitError(f"{full}: a name with a quote or newline cannot be "
                                      "published", "rename the file")
            if info.st_uid != OWNER or info.st_gid != OWNER:
                cmds += [f'sif "{rel}" uid {OWNER}', f'sif "{rel}" gid {OWNER}']
            want = wanted_mode(info.st_mode)
            if stat.S_IMODE(info.st_mode) != stat.S_IMODE(want):
                cmds.append(f'sif "{rel}" mode 0{want:o}')
    return cmds


def _run(argv: list[str], what: str) -> str:
    """stderr of a successful run."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise ClusterkitError(f"{argv[0]} not found: cannot build the dataset image",
                              TOOLS_HINT) from exc
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise ClusterkitError(f"{what} failed (exit {out.returncode}): " + " | ".join(tail),
                              "check the free space where the image is built (--tmp-dir) "
                              "and that e2fsprogs is >= 1.43")
    return out.stderr


def build(root: Path, image: Path, tree: TreeSize | None = None) -> Image:
    """Build the image of ``root`` at ``image`` (a new sparse file)."""
    tree = tree or measure(root)
    size = image_size(tree)
    inodes = inode_count(tree)
    image.unlink(missing_ok=True)  # a new file: its holes are zeros, so lazy init is safe
    _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", LABEL, "-m", "0", "-N", str(inodes),
          "-J", f"size={JOURNAL_MIB}", "-E", f"root_owner={OWNER}:{OWNER},lazy_itable_init=1,lazy_journal_init=1", "-d", str(root),
          str(image), f"{size // 1024}k"], f"mke2fs -d {root}")
    cmds = fixups(root)  # never empty: the root's mode is always set
    with tempfile.NamedTemporaryFile("w", suffix=".debugfs", delete=False) as script:
        script.write("\n".join(cmds) + "\n")
    try:
        errors = _run(["debugfs", "-w", "-f", script.name, str(image)],
                      "debugfs (owner/mode)").splitlines()[1:]  # [0]: its banner
    finally:
        os.unlink(script.name)
    if errors:  # debugfs exits 0 whatever its commands did
        raise ClusterkitError("setting owner/mode in the image failed: "
                              + " | ".join(errors[:3]), TOOLS_HINT)
    return Image(image, size, inodes, len({c.split('"')[1] for c in cmds[1:]}))
