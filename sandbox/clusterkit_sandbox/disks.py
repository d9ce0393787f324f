"""EBS volumes, snapshots and instance-store disks as sparse loop-backed image files.

* CreateVolume: an image of the volume's size (sparse), made lazily on first
  attach; from a snapshot it is a copy of the snapshot's image.
* CreateSnapshot: a copy of the volume's image at that moment.
* AttachVolume: ``losetup`` + ``/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol<id>``
  in that node (its private ``/dev/disk``), where a Nitro node shows it.
* Instance store: fresh images at every node boot (wiped on stop, like EC2),
  ``nvme-Amazon_EC2_NVMe_Instance_Storage_AWS<n><instance>``.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from clusterkit_sandbox.node import node_env

log = logging.getLogger("clusterkit_sandbox.disks")
EBS_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
STORE_PREFIX = "nvme-Amazon_EC2_NVMe_Instance_Storage_"
MAX_INSTANCE_DISKS = 4
GIB = 1024 ** 3


@dataclass(frozen=True)
class VolumeView:
    volume_id: str
    size_gib: int
    snapshot_id: str | None
    instance_id: str | None  # attached to (non-root attachments only)


def ebs_link_name(volume_id: str) -> str:
    return EBS_PREFIX + volume_id.replace("-", "")


def store_link_name(instance_id: str, index: int) -> str:
    return f"{STORE_PREFIX}AWS{index}{instance_id.replace('-', '').upper()}"


def losetup(image: Path) -> str:
    out = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                         capture_output=True, text=True, env=node_env())
    return out.stdout.strip()


def lodetach(device: str) -> None:
    # on a busy device (still mounted in a node) this sets autoclear instead
    subprocess.run(["losetup", "-d", device], capture_output=True)


def loops_under(root: Path) -> list[str]:
    """Loop devices whose backing file lies under ``root``."""
    out = subprocess.run(["losetup", "-n", "-l", "-O", "NAME,BACK-FILE"],
                         capture_output=True, text=True)
    found = []
    for line in out.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().startswith(str(root) + "/"):
            found.append(parts[0])
    return found


def sparse(path: Path, size_bytes: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size_bytes)


def copy_image(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "--sparse=always", str(src), str(dst)], check=True, env=node_env())


class Disks:
    """Keeps the images and loop devices in line with the emulator's EBS state."""

    def __init__(self, run_dir: Path, enabled: bool) -> None:
        self.dir = run_dir / "disks"
        self.enabled = enabled
        self.snapshots: set[str] = set()
        self.volumes: dict[str, VolumeView] = {}
        self.attached: dict[str, tuple[str, str]] = {}  # vol -> (instance, /dev/loopN)

    def image(self, ident: str) -> Path:
        return self.dir / f"{ident}.img"

    def sync(self, volumes: list[VolumeView], snapshots: dict[str, str | None],
             node_disk_dirs: dict[str, Path]) -> None:
        """``snapshots``: snapshot id -> source volume id. ``node_disk_dirs``:
        instance id -> the node's by-id directory, for nodes that exist."""
        if not self.enabled:
            return
        for snap, vol in snapshots.items():
            if snap not in self.snapshots:
                self.snapshots.add(snap)
                if vol and self.image(vol).exists():
                    copy_image(self.image(vol), self.image(snap))
                    log.info("snapshot %s = copy of %s", snap, vol)
        for snap in self.snapshots - set(snapshots):
            self.snapshots.discard(snap)
            self.image(snap).unlink(missing_ok=True)
        current = {v.volume_id: v for v in volumes}
        for vol, (iid, _device) in list(self.attached.items()):
            view = current.get(vol)
            if view is None or view.instance_id != iid or iid not in node_disk_dirs:
                self._detach(vol, node_disk_dirs.get(iid))
        for view in volumes:
            if view.instance_id in node_disk_dirs and view.volume_id not in self.attached:
                self._attach(view, node_disk_dirs[view.instance_id])
        for vol in set(self.volumes) - set(current):
            self.image(vol).unlink(missing_ok=True)
        self.volumes = current

    def _ensure_image(self, view: VolumeView) -> Path:
        path = self.image(view.volume_id)
        if not path.exists():
            snap = self.image(view.snapshot_id) if view.snapshot_id else None
            if snap is not None and snap.exists():
                copy_image(snap, path)
            else:
                sparse(path, view.size_gib * GIB)
        return path

    def _attach(self, view: VolumeView, by_id: Path) -> None:
        try:
            device = losetup(self._ensure_image(view))
        except (subprocess.CalledProcessError, OSError) as exc:
            log.error("attach %s failed: %s", view.volume_id, exc)
            return
        _link(by_id / ebs_link_name(view.volume_id), device)
        self.attached[view.volume_id] = (view.instance_id or "", device)
        log.info("attached %s to %s as %s", view.volume_id, view.instance_id, device)

    def _detach(self, vol: str, by_id: Path | None) -> None:
        _iid, device = self.attached.pop(vol)
        if by_id is not None:
            (by_id / ebs_link_name(vol)).unlink(missing_ok=True)
        lodetach(device)
        log.info("detached %s (%s)", vol, device)

    def boot_instance_store(self, instance_id: str, disks: list[int], node_dir: Path) -> list[str]:
        """Fresh instance-store disks (sizes in GB) for a booting node."""
        if not self.enabled:
            return []
        by_id = node_dir / "disk" / "by-id"
        names = []
        for index, size_gb in enumerate(disks[:MAX_INSTANCE_DISKS], start=1):
            path = node_dir / "instance-store" / f"{index}.img"
            path.unlink(missing_ok=True)
            sparse(path, size_gb * 1000 ** 3)
            name = store_link_name(instance_id, index)
            _link(by_id / name, losetup(path))
            names.append(name)
        return names

    def drop_instance_store(self, node_dir: Path) -> None:
        store = node_dir / "instance-store"
        for device in loops_under(store):
            lodetach(device)
        by_id = node_dir / "disk" / "by-id"
        if by_id.is_dir():
            for link in by_id.glob(STORE_PREFIX + "*"):
                link.unlink(missing_ok=True)
        for image in store.glob("*.img") if store.is_dir() else []:
            image.unlink(missing_ok=True)

    def release_all(self, run_dir: Path) -> None:
        for vol in list(self.attached):
            self._detach(vol, None)
        for device in loops_under(run_dir):
            lodetach(device)


def _link(path: Path, device: str) -> None:
    """A block device node for ``device`` at ``path``: the node's /dev is its own
    copy, so a node made here works there without the host's /dev/loopN."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    os.mknod(tmp, stat.S_IFBLK | 0o660, os.stat(device).st_rdev)
    os.replace(tmp, path)
