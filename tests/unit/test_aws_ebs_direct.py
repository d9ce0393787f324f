"""aws.ebs_direct's pure-ish parts: which blocks of a sparse file are read, checksums."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from clusterkit.aws import ebs_direct as ed

B = ed.BLOCK_SIZE


def test_checksum_is_base64_sha256() -> None:
    assert base64.b64decode(ed.checksum(b"abc")) == hashlib.sha256(b"abc").digest()


def test_data_blocks_skips_holes(tmp_path: Path) -> None:
    path = tmp_path / "img"
    with open(path, "wb") as handle:
        handle.truncate(64 * B)
        handle.seek(3 * B + 100)
        handle.write(b"x")  # block 3
        handle.seek(10 * B - 1)
        handle.write(b"yz")  # straddles blocks 9 and 10
        handle.seek(63 * B)
        handle.write(b"w" * B)  # the last block
    with open(path, "rb") as handle:
        found = list(ed.data_blocks(handle.fileno(), 64 * B))
    # a filesystem may allocate at a coarser grain than one block, never finer
    assert {3, 9, 10, 63} <= set(found)
    assert len(found) < 20 and found == sorted(set(found))


def test_data_blocks_of_an_empty_sparse_file(tmp_path: Path) -> None:
    path = tmp_path / "img"
    path.write_bytes(b"")
    os.truncate(path, 8 * B)
    with open(path, "rb") as handle:
        assert list(ed.data_blocks(handle.fileno(), 8 * B)) == []
