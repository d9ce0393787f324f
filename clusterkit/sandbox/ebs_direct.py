"""The EBS direct APIs in the sandbox, closer to AWS than moto alone:

* a snapshot started with StartSnapshot is ``pending`` to EC2 until CompleteSnapshot
  (moto reports it ``completed`` at once), so clusterkit's "completed and tagged" checks
  meet the states AWS shows;
* moto's StartSnapshot makes a scratch EC2 volume to hang the snapshot on; AWS makes
  none, so it is removed (the snapshot keeps its size);
* CompleteSnapshot writes the blocks put into ``disks/<snap-id>.img`` (sparse, the
  snapshot's size) before the snapshot turns ``completed``, so CreateVolume and
  RunInstances from it give a loop device holding the published filesystem.

Blocks are read through ``moto_models`` (the one place that reads moto's models); this
module only wraps two public methods of moto's ``EBSBackend``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterkit.sandbox.moto_models import direct_snapshot_blocks, direct_snapshot_ec2

log = logging.getLogger("clusterkit.sandbox.ebs_direct")
GIB = 1 << 30
BLOCK_SIZE = 512 * 1024
WRAPPED = "__clusterkit_wrapped__"


def write_image(path: Path, size_gib: int, blocks: dict[int, bytes]) -> None:
    """A sparse image of ``size_gib`` holding ``blocks``, renamed into place when whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.truncate(size_gib * GIB)
        for index in sorted(blocks):
            handle.seek(index * BLOCK_SIZE)
            handle.write(blocks[index])
    os.replace(tmp, path)


def install(image_for: Callable[[str], Path] | None = None) -> None:
    """Patch moto's EBS backend in this process (idempotent). ``image_for``: snapshot
    id -> where its image goes (the sandbox's Disks.image); None writes no image."""
    from moto.ebs.models import EBSBackend

    if getattr(EBSBackend.start_snapshot, WRAPPED, False):
        _state["image_for"] = image_for
        return
    _state["image_for"] = image_for
    start, complete = EBSBackend.start_snapshot, EBSBackend.complete_snapshot

    def start_snapshot(self: Any, *args: Any, **kwargs: Any) -> Any:
        made = start(self, *args, **kwargs)
        snap = direct_snapshot_ec2(self, made.snapshot_id)
        snap.status = "pending"
        self.ec2_backend.delete_volume(snap.volume.id)
        return made

    def complete_snapshot(self: Any, snapshot_id: str) -> str:
        status = complete(self, snapshot_id)
        where = _state["image_for"]
        if where is not None:
            size_gib, blocks = direct_snapshot_blocks(self, snapshot_id)
            write_image(where(snapshot_id), size_gib, blocks)
            log.info("snapshot %s: %d block(s) -> image", snapshot_id, len(blocks))
        direct_snapshot_ec2(self, snapshot_id).status = "completed"
        return status

    setattr(start_snapshot, WRAPPED, True)
    EBSBackend.start_snapshot = start_snapshot
    EBSBackend.complete_snapshot = complete_snapshot


_state: dict[str, Callable[[str], Path] | None] = {"image_for": None}
