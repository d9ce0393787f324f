"""The EBS direct APIs in the sandbox, closer to AWS than moto alone:

* a snapshot started with StartSnapshot is ``pending`` to EC2 until CompleteSnapshot
  (moto reports it ``completed`` at once), so clusterkit's "completed and tagged" checks
  meet the states AWS shows;
* moto's StartSnapshot makes a scratch EC2 volume to hang the snapshot on; AWS makes
  none, so it is removed (the snapshot keeps its size);
* StartSnapshot's ``Encrypted`` and ``KmsKeyArn`` (moto ignores both) reach the EC2
  snapshot, so DescribeSnapshots shows ``Encrypted`` and the ``KmsKeyId`` as AWS does
  (encrypted without a key: the account's default EBS key, ``alias/aws/ebs``); a
  ``KmsKeyArn`` that is not a key ARN is refused, as AWS refuses an alias there; EC2's
  CopySnapshot with ``Encrypted`` and no ``KmsKeyId`` encrypts with that default key
  too, and CreateSnapshot of an encrypted volume keeps the volume's key (moto drops
  both);
* CompleteSnapshot writes the blocks put into ``disks/<snap-id>.img`` (sparse, the
  snapshot's size) before the snapshot turns ``completed``, so CreateVolume and
  RunInstances from it give a loop device holding the published filesystem.

Blocks are read through ``moto_models`` (the one place that reads moto's models); this
module only wraps two public methods of moto's ``EBSBackend`` and the request handler
of StartSnapshot (to read the two parameters the backend is not given).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterkit_sandbox.moto_models import direct_snapshot_blocks, direct_snapshot_ec2

log = logging.getLogger("clusterkit_sandbox.ebs_direct")
GIB = 1 << 30
BLOCK_SIZE = 512 * 1024
WRAPPED = "__clusterkit_wrapped__"
KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$")
DEFAULT_EBS_KEY = "alias/aws/ebs"


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
    _install_encryption()


def default_ebs_key(account_id: str, region: str) -> str:
    """The ARN of the account's default EBS key in ``region`` (made on first use, as AWS
    makes ``alias/aws/ebs``)."""
    from moto.kms.models import kms_backends

    kms = kms_backends[account_id][region]
    if not kms.alias_exists(DEFAULT_EBS_KEY):
        made = kms.create_key(policy="", key_usage="ENCRYPT_DECRYPT",
                              key_spec="SYMMETRIC_DEFAULT", description="default EBS key",
                              tags=None)
        kms.create_alias(made.id, DEFAULT_EBS_KEY)
    return str(kms.describe_key(DEFAULT_EBS_KEY).arn)


def _install_encryption() -> None:
    """StartSnapshot's Encrypted / KmsKeyArn -> the EC2 snapshot's encryption."""
    from moto.core.exceptions import JsonRESTError
    from moto.ebs.responses import EBSResponse

    handler = EBSResponse.start_snapshot

    def start_snapshot(self: Any) -> Any:
        key = self._get_param("KmsKeyArn")
        if key is not None and not KEY_ARN.fullmatch(str(key)):
            raise JsonRESTError("ValidationException",
                                f"KmsKeyArn {key!r} is not a KMS key ARN")
        encrypted = bool(self._get_param("Encrypted")) or key is not None
        result = handler(self)
        if encrypted:
            backend = self.ebs_backend
            snap = direct_snapshot_ec2(backend, _snapshot_id(result))
            snap.encrypted = True
            snap.kms_key_id = key or default_ebs_key(backend.account_id, backend.region_name)
            log.info("snapshot %s: encrypted with %s", snap.id, snap.kms_key_id)
        return result

    setattr(start_snapshot, WRAPPED, True)
    EBSResponse.start_snapshot = start_snapshot
    _install_ec2_encryption()


def _install_ec2_encryption() -> None:
    from moto.ec2.models import EC2Backend
    from moto.ec2.responses.elastic_block_store import ElasticBlockStore

    copy_handler, create = ElasticBlockStore.copy_snapshot, EC2Backend.create_snapshot

    def copy_snapshot(self: Any) -> Any:
        result = copy_handler(self)
        if self._get_param("Encrypted") in (True, "true") and not self._get_param("KmsKeyId"):
            snap = self.ec2_backend.get_snapshot(_snapshot_id(result))
            snap.encrypted = True
            snap.kms_key_id = default_ebs_key(self.ec2_backend.account_id,
                                              self.ec2_backend.region_name)
        return result

    def create_snapshot(self: Any, volume_id: str, *args: Any, **kwargs: Any) -> Any:
        made = create(self, volume_id, *args, **kwargs)
        volume = self.get_volume(volume_id)
        if volume.encrypted and made.kms_key_id is None:
            made.kms_key_id = volume.kms_key_id
        return made

    ElasticBlockStore.copy_snapshot = copy_snapshot
    EC2Backend.create_snapshot = create_snapshot


def _snapshot_id(result: Any) -> str:
    """The SnapshotId of StartSnapshot's answer (an ActionResult, or a JSON body)."""
    import json

    body = getattr(result, "result", None)
    if isinstance(body, dict):
        return str(body["SnapshotId"])
    text = result[-1] if isinstance(result, tuple) else result
    return str(json.loads(text)["SnapshotId"])


_state: dict[str, Callable[[str], Path] | None] = {"image_for": None}
