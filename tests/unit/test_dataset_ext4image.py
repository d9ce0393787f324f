"""dataset.ext4image: sizing (pure) and a real mke2fs -d image read back with debugfs."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from clusterkit.dataset import ext4image as ei
from tests import support

GIB = 1 << 30


@pytest.fixture
def e2fs() -> None:
    """e2fsprogs' tools (scripts/install.sh installs them; missing under CI=true fails)."""
    for tool in ("mke2fs", "debugfs", "e2fsck", "dumpe2fs"):
        support.require_tool(tool)


needs_e2fs = pytest.mark.usefixtures("e2fs")


def test_size_is_whole_gib_at_least_one() -> None:
    assert ei.image_size(ei.TreeSize(0, 0, 0, 0)) == GIB
    size = ei.image_size(ei.TreeSize(10 * GIB, 100, 1, 10 * GIB // 4096))
    assert size % GIB == 0
    assert size >= 11 * GIB  # data + 10% headroom
    assert size <= 13 * GIB


def test_many_small_files_cost_a_block_each() -> None:
    tree = ei.TreeSize(1_000_000, 1_000_000, 10, 1_000_000)  # 1 M one-byte files
    assert ei.image_size(tree) >= 2 * 1_000_000 * 4096
    assert ei.inode_count(tree) > 1_000_010


def test_wanted_mode() -> None:
    assert ei.wanted_mode(stat.S_IFREG | 0o600) == stat.S_IFREG | 0o644
    assert ei.wanted_mode(stat.S_IFREG | 0o700) == stat.S_IFREG | 0o755
    assert ei.wanted_mode(stat.S_IFDIR | 0o700) == stat.S_IFDIR | 0o755


def _debugfs(image: Path, request: str) -> bytes:
    return subprocess.run(["debugfs", "-R", request, str(image)], capture_output=True,
                          check=True).stdout


@needs_e2fs
def test_image_reads_back_byte_identical_root_owned_world_readable(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "train").mkdir(parents=True)
    blobs = {"train/a.rec": os.urandom(300_000), "train/a.idx": b"0\t0\n",
             "private.bin": os.urandom(5000)}
    for rel, data in blobs.items():
        (src / rel).write_bytes(data)
    (src / "private.bin").chmod(0o600)
    (src / "train").chmod(0o700)
    image = ei.build(src, tmp_path / "ds.img")
    assert image.size_bytes == GIB and image.path.stat().st_size == GIB
    assert image.path.stat().st_blocks * 512 < 64 << 20  # sparse
    for rel, data in blobs.items():
        assert _debugfs(image.path, f"cat /{rel}") == data
    fsck = subprocess.run(["e2fsck", "-fn", str(image.path)], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    private = _debugfs(image.path, "stat /private.bin").decode()
    assert "Mode:  0644" in private and "User:     0   Group:     0" in private
    assert "Mode:  0755" in _debugfs(image.path, "stat /train").decode()
    label = subprocess.run(["dumpe2fs", "-h", str(image.path)], capture_output=True,
                           text=True).stdout
    assert "Filesystem volume name:   ck-dataset" in label


@needs_e2fs
def test_uid_of_builder_is_replaced(tmp_path: Path) -> None:
    support.require_root("giving a source file another owner")
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"hello")
    os.chown(src / "f", 1000, 1000)
    image = ei.build(src, tmp_path / "ds.img")
    assert image.fixed_entries == 1
    assert "User:     0   Group:     0" in _debugfs(image.path, "stat /f").decode()
