"""AMIs made from a node (CreateImage) carry its root file system: the node's own tree
(``fs/``) and the upper layers of its shown trees (``layers/<tree>/upper``) are copied,
as the instance's root volume's snapshot would be, to ``run/images/<ami id>/`` when the
call is served; a node launched from that AMI starts its first boot from that copy
(``copy_root`` the other way), so what the builder installed (a venv, receipts) is there. DeregisterImage
drops the copy. Timed: the AMI is ``pending`` for Wait.IMAGE_AVAILABLE, then
``available``."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from clusterkit_sandbox.noderoot import copy_root
from clusterkit_sandbox.timed import Recorder, hold
from clusterkit_sandbox.timings import Timings, Wait

log = logging.getLogger("clusterkit_sandbox.images")
IMAGES_DIR = "images"  # in the run dir


def image_dir(run_dir: Path, image_id: str) -> Path:
    return run_dir / IMAGES_DIR / image_id


def install(timings: Timings, recorder: Recorder, run_dir: Path) -> None:
    """Patch moto's CreateImage and DeregisterImage (once)."""
    from moto.ec2.models.amis import AmiBackend

    if getattr(AmiBackend.create_image, "_sandbox", False):
        return
    create, deregister = AmiBackend.create_image, AmiBackend.deregister_image

    def create_image(self: Any, instance_id: str, name: str, description: str,
                     tag_specifications: list[dict[str, Any]]) -> Any:
        # moto refuses the snapshot's TagSpecifications (NotImplementedError); EC2 tags it
        snapshot_tags = [t for spec in tag_specifications
                         if spec["ResourceType"] == "snapshot" for t in spec["Tags"]]
        ami = create(self, instance_id, name, description,
                     [s for s in tag_specifications if s["ResourceType"] != "snapshot"])
        for tag in snapshot_tags:
            self.create_tags([ami.ebs_snapshot.id], {tag["Key"]: tag["Value"]})
        node = run_dir / "nodes" / instance_id
        if node.is_dir():
            copy_root(node, image_dir(run_dir, ami.id))
        if timings.on:
            ami.state = "pending"

            def available() -> bool:
                if ami.state != "pending":
                    return False
                ami.state = "available"
                return True

            hold(Wait.IMAGE_AVAILABLE, ami.id, timings.wait(Wait.IMAGE_AVAILABLE),
                 available, recorder)
        return ami

    def deregister_image(self: Any, ami_id: str) -> None:
        deregister(self, ami_id)
        shutil.rmtree(image_dir(run_dir, ami_id), ignore_errors=True)

    create_image._sandbox = True  # type: ignore[attr-defined]
    AmiBackend.create_image = create_image
    AmiBackend.deregister_image = deregister_image
