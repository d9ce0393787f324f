"""`clusterkit snapshot-dataset`: publish a dataset as an EBS snapshot.

From a local directory (no instance): manifest -> ext4 image in a temp dir -> EBS direct
APIs upload -> CompleteSnapshot -> wait ``completed`` -> ONLY THEN the tags that make it
usable. From a node: the EBS volume mounted at a path (found by volume id), EC2
CreateSnapshot, wait, the same tags.

Every dataset snapshot is encrypted: StartSnapshot asks for it (with --kms-key, or the
account's default EBS key); a node's volume that is not encrypted (or not with the key
asked for) gives a snapshot that is copied encrypted, and the plaintext one deleted
before anything is tagged usable.

Usable dataset snapshot = state ``completed`` AND ``clusterkit:published=complete``.
Until then a snapshot carries only ``clusterkit:dataset-upload=LABEL``: an interrupted
upload is findable and never usable, and the next run with the same label deletes it
(only snapshots carrying that tag and not the published one: clusterkit's own).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clusterkit import statedir
from clusterkit.aws import ebs_direct, kms, snapshots
from clusterkit.aws.endpoints import check_regions
from clusterkit.aws.volumes import describe_snapshot
from clusterkit.cluster.runtime import Runtime
from clusterkit.dataset import ext4image, manifest
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.events import Kind, Stage
from clusterkit.plan.dataset import DATASET_TAG, MANIFEST_TAG, PUBLISHED_TAG
from clusterkit.spec.keys import KMS_KEY_RE

UPLOAD_TAG = "clusterkit:dataset-upload"
COMPLETE_TIMEOUT = 6 * 3600.0  # seconds for AWS to turn a snapshot `completed`
MIB = 1 << 20
PROGRESS_EVERY = 0.25  # seconds between progress events


@dataclass(frozen=True)
class PublishResult:
    snapshot_id: str
    label: str
    region: str
    size_gib: int
    manifest_sha256: str | None
    seconds: float
    source: str  # "directory" or "volume"
    files: int = 0
    data_bytes: int = 0
    bytes_uploaded: int = 0
    blocks_put: int = 0
    blocks_skipped: int = 0
    upload_seconds: float = 0.0
    volume_id: str | None = None
    removed: tuple[str, ...] = ()  # abandoned uploads of the same label, deleted
    kms_key: str | None = None  # the key that encrypts it; None: the default EBS key

    @property
    def mb_per_s(self) -> float:
        """Uploaded MB (10^6 bytes) per second of upload."""
        return self.bytes_uploaded / 1e6 / self.upload_seconds if self.upload_seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "removed": list(self.removed),
                "mb_per_s": round(self.mb_per_s, 2)}


def check_label(label: str) -> str:
    """A dataset label follows the cluster-name rule (it goes into tags and commands)."""
    if not statedir.is_cluster_name(label):
        raise UsageError(f"{label!r} is not a dataset label: a label is {statedir.NAME_RULE}",
                         "give --name LABEL following that rule")
    return label


def check_kms_key(key: str | None) -> str | None:
    """A KMS key as storage.kms_key takes it (id, key ARN, alias/NAME, alias ARN)."""
    if key is not None and not re.fullmatch(KMS_KEY_RE, key):
        raise UsageError(f"--kms-key {key!r} is not a KMS key id, key ARN, alias/NAME or "
                         "alias ARN", "give e.g. alias/clusterkit or the key's ARN")
    return key


def check_directory(path: str) -> Path:
    root = Path(os.path.expanduser(path))
    if not root.is_dir():
        raise UsageError(f"{path!r} is not a directory",
                         "give the directory holding the packed dataset (`clusterkit pack` "
                         "output), or NAME --node NODE --path /data to snapshot a node's "
                         "volume")
    if not any(root.iterdir()):
        raise UsageError(f"{path!r} is empty: nothing to publish",
                         "pack the dataset into it first (`clusterkit pack`)")
    return root


def check_region(rt: Runtime, region: str | None) -> str:
    chosen = region or rt.session.region_name
    if not chosen:
        raise UsageError("no region: a snapshot lives in one region",
                         "give --region (or set AWS_REGION / the profile's region)")
    check_regions([chosen], "--region")
    return chosen


def remove_abandoned(rt: Runtime, region: str, label: str) -> tuple[str, ...]:
    """Delete clusterkit's unfinished uploads of ``label`` (upload tag, no published tag)."""
    removed = []
    for snap in snapshots.tagged_snapshots(rt.session, region, UPLOAD_TAG, label):
        if snap.tags.get(UPLOAD_TAG) == label and not snap.published:
            snapshots.delete_snapshot(rt.session, region, snap.snapshot_id)
            rt.info(f"removed the unfinished upload {snap.snapshot_id} of {label} "
                    f"({snap.state})", level=1, stage=Stage.PUBLISH)
            removed.append(snap.snapshot_id)
    return tuple(removed)


def wait_completed(rt: Runtime, region: str, snapshot_id: str,
                   timeout: float = COMPLETE_TIMEOUT) -> None:
    def unusable(state: str) -> ClusterkitError:
        return ClusterkitError(f"snapshot {snapshot_id} is {state}, not completed",
                               "it is not usable; run the same snapshot-dataset command "
                               "again (it deletes this one and starts clean)")

    def probe() -> tuple[bool, str]:
        snap = describe_snapshot(rt.session, region, snapshot_id)
        state = snap.state if snap else "gone"
        if state in ("error", "gone"):
            raise unusable(state)
        return state == "completed", state

    rt.wait_until(probe, deadline=rt.clock() + timeout, late=unusable)


def mark_published(rt: Runtime, region: str, snapshot_id: str, label: str,
                   digest: str | None) -> None:
    tags = {DATASET_TAG: label, PUBLISHED_TAG: "complete",
            **({MANIFEST_TAG: digest} if digest else {})}
    snapshots.tag_snapshot(rt.session, region, snapshot_id, tags)


def do_snapshot_dataset(directory: str, *, label: str | None = None,
                        region: str | None = None, profile: str | None = None,
                        rt: Runtime | None = None, threads: int = ebs_direct.UPLOAD_THREADS,
                        tmp_dir: str | None = None, kms_key: str | None = None,
                        ) -> PublishResult:
    """Publish ``directory`` (default label: its name) as a usable dataset snapshot,
    encrypted with ``kms_key`` (id, alias or ARN; None: the default EBS key)."""
    root = check_directory(directory)
    label = check_label(label or root.resolve().name)
    kms_key = check_kms_key(kms_key)
    rt = rt or Runtime.make(region=region, profile=profile)
    region = check_region(rt, region)
    arn = kms.key_arn(rt.session, region, kms_key) if kms_key else None
    return publish_directory(rt, region, root, label, threads=threads, tmp_dir=tmp_dir,
                             kms_key_arn=arn)


def _check_tree(root: Path, tmp: str) -> None:
    files = manifest.walk(root)  # refuses symlinks and special files first
    if not files:
        raise UsageError(f"{root} holds no files: nothing to publish",
                         "pack the dataset into it first (`clusterkit pack`)")
    tree = ext4image.measure(root)
    free = shutil.disk_usage(tmp).free
    if free < tree.data_bytes * 1.1 + 256 * MIB:
        raise UsageError(f"{tmp} has {free / 1e9:.1f} GB free; the image of {root} needs "
                         f"about {tree.data_bytes * 1.1 / 1e9:.1f} GB",
                         "give --tmp-dir on a filesystem with room (the image is removed "
                         "after the upload)")


def publish_directory(rt: Runtime, region: str, root: Path, label: str, *,
                      threads: int = ebs_direct.UPLOAD_THREADS,
                      tmp_dir: str | None = None, kms_key_arn: str | None = None,
                      ) -> PublishResult:
    t0 = rt.clock()
    tmp = tmp_dir or tempfile.gettempdir()
    rt.started(Stage.PUBLISH, f"publishing {root} as dataset {label} in {region}")
    _check_tree(root, tmp)
    removed = remove_abandoned(rt, region, label)
    built = manifest.build(root)
    manifest.write(root, built)
    rt.info(f"manifest: {len(built.files)} files, {built.total_bytes / 1e6:,.1f} MB, "
            f"sha256 {built.digest[:16]}", level=1, stage=Stage.PUBLISH)
    with tempfile.TemporaryDirectory(prefix="clusterkit-dataset-", dir=tmp) as work:
        image = ext4image.build(root, Path(work) / "dataset.img")
        rt.info(f"ext4 image: {image.size_gib} GiB", level=1, stage=Stage.PUBLISH)
        snap, stats, seconds = _upload(rt, region, label, image, built.digest, threads,
                                       kms_key_arn)
    rt.info(f"{snap}: uploaded, waiting for it to complete", level=1, stage=Stage.PUBLISH)
    wait_completed(rt, region, snap)
    mark_published(rt, region, snap, label, built.digest)
    result = PublishResult(snap, label, region, image.size_gib, built.digest,
                           rt.clock() - t0, "directory", len(built.files),
                           built.total_bytes, stats.bytes_put, stats.blocks_put,
                           stats.blocks_skipped, seconds, removed=removed,
                           kms_key=kms_key_arn)
    rt.done(Stage.PUBLISH, f"{snap} published: dataset {label}, {image.size_gib} GiB, "
            f"{result.mb_per_s:,.1f} MB/s, encrypted with {kms_key_arn or 'the default EBS key'}")
    return result


def _upload(rt: Runtime, region: str, label: str, image: ext4image.Image, digest: str,
            threads: int, kms_key_arn: str | None = None,
            ) -> tuple[str, ebs_direct.UploadStats, float]:
    """StartSnapshot (encrypted), the blocks, CompleteSnapshot: (snapshot id, stats,
    upload seconds). Any failure (Ctrl-C too) leaves the snapshot unfinished and says so."""
    snap = ebs_direct.start_snapshot(
        rt.session, region, image.size_gib, {UPLOAD_TAG: label},
        f"clusterkit dataset {label} (manifest sha256 {digest})", str(uuid.uuid4()),
        kms_key_arn=kms_key_arn)
    t0 = time.perf_counter()
    try:
        stats = ebs_direct.upload_image(rt.session, region, snap, str(image.path),
                                        threads=threads, progress=_progress(rt))
        ebs_direct.complete_snapshot(rt.session, region, snap, stats.blocks_put)
    except BaseException:
        rt.warn(f"upload of {snap} stopped: the snapshot is not usable (no "
                f"{PUBLISHED_TAG} tag); running the command again deletes it",
                stage=Stage.PUBLISH)
        raise
    return snap, stats, time.perf_counter() - t0


def _progress(rt: Runtime) -> ebs_direct.Progress:
    """Upload progress as PUBLISH events in MiB read (a bar with MiB/s), at most one
    every PROGRESS_EVERY seconds."""
    state = {"opened": False, "last": 0.0}

    def report(p: ebs_direct.UploadProgress) -> None:
        total = p.blocks_total * ebs_direct.BLOCK_SIZE // MIB
        if not state["opened"]:
            state["opened"] = True
            rt.emit(Kind.STAGE_STARTED, "uploading", stage=Stage.PUBLISH, total=total)
        now = rt.clock()
        if now - state["last"] >= PROGRESS_EVERY or p.blocks_done == p.blocks_total:
            state["last"] = now
            rt.emit(Kind.PROGRESS, "uploading", stage=Stage.PUBLISH, total=total,
                    done=p.blocks_done * ebs_direct.BLOCK_SIZE // MIB)

    return report


PATH_RE = re.compile(r"^/[A-Za-z0-9._/+@:-]*$")
EBS_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
# Run on the node: the mount's MAJ:MIN (and its disk's, for a partition), every EBS by-id
# entry's MAJ:MIN (hex, `stat -L` follows a udev link or reads the sandbox's device
# node), and the manifest's sha256 when the filesystem root holds one.
PROBE = """p={path}
mm=$(findmnt -n -o MAJ:MIN --mountpoint "$p") || {{ echo none; exit 0; }}
echo "mount $mm $(cat /sys/dev/block/$mm/../dev 2>/dev/null || true)"
for f in /dev/disk/by-id/{prefix}*; do
  [ -e "$f" ] && echo "ebs $(stat -L -c %t:%T "$f") ${{f##*/}}"
done
m="$p/{manifest}"
if [ -f "$m" ]; then echo "manifest $(sha256sum < "$m" | cut -d' ' -f1)"; fi
"""


@dataclass(frozen=True)
class VolumeProbe:
    volume_id: str | None  # the EBS volume mounted at the path, None: none
    mounted: bool
    manifest_sha256: str | None


def _volume_id(link_name: str) -> str:
    """``nvme-Amazon_Elastic_Block_Store_vol0abc`` -> ``vol-0abc``."""
    raw = link_name[len(EBS_PREFIX):]
    return "vol-" + raw[3:] if raw.startswith("vol") and not raw.startswith("vol-") else raw


def parse_probe(stdout: str) -> VolumeProbe:
    """Pure: PROBE's output -> the volume mounted there (matched by device number, the
    mount's own or, for a partition, its disk's), and the manifest digest."""
    mounts: list[str] = []
    ebs: dict[str, str] = {}
    digest = None
    for line in stdout.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "mount":
            mounts = rest.split()
        elif word == "ebs" and len(rest.split()) == 2:
            hexnum, name = rest.split()
            major, _, minor = hexnum.partition(":")
            if name.startswith(EBS_PREFIX) and not re.search(r"-part\d+$|-ns-\d+$", name):
                ebs[f"{int(major, 16)}:{int(minor, 16)}"] = _volume_id(name)
        elif word == "manifest" and re.fullmatch(r"[0-9a-f]{64}", rest):
            digest = rest
    found = next((ebs[m] for m in mounts if m in ebs), None)
    return VolumeProbe(found, bool(mounts), digest)


def check_path(path: str) -> str:
    clean = os.path.normpath(path)
    if not PATH_RE.fullmatch(clean) or clean == "/":
        raise UsageError(f"--path {path!r} is not an absolute mount point clusterkit can use",
                         "give the absolute path where the dataset volume is mounted "
                         "(letters, digits and ._-+@: only), e.g. /data")
    return clean


def probe_volume(rt: Runtime, target: str, node: str | None, path: str,
                 region: str | None) -> tuple[str, str, VolumeProbe]:
    """(region, node label, what is mounted at ``path`` on that node)."""
    import shlex

    from clusterkit.cluster.access import hostkeys
    from clusterkit.cluster.access.remote_ops import cluster_nodes, login_for, require_running
    from clusterkit.remote import fanout, selection
    from clusterkit.remote.address import targets

    login, regions = login_for(target, region)
    found = cluster_nodes(rt, login.cluster, regions)
    chosen = selection.select_one(found, node)
    require_running(found, [chosen])
    hostkeys.prepare(rt, login.cluster, [n for n in found if n.state == chosen.state], (),
                     port=login.port)
    (dial,) = targets(found, [chosen])
    script = PROBE.format(path=shlex.quote(path), prefix=EBS_PREFIX,
                          manifest=manifest.MANIFEST_NAME)
    group = fanout.run_all(login, [dial], f"bash -c {shlex.quote(script)}")
    return chosen.region, dial.hop.label, parse_probe(group[dial.hop.label].stdout)


def spec_kms_key(target: str) -> str | None:
    """storage.kms_key of the spec file ``target`` (None for a cluster NAME)."""
    from clusterkit.cluster.access.target import check_target
    from clusterkit.spec import load

    return load(os.path.expanduser(target)).storage.kms_key if check_target(target) else None


def ensure_encrypted(rt: Runtime, region: str, snapshot_id: str, label: str,
                     kms_key: str | None) -> str:
    """The snapshot itself when it is encrypted (with ``kms_key``'s ARN when a key is
    asked for); else an encrypted copy, completed, and the snapshot deleted."""
    arn = kms.key_arn(rt.session, region, kms_key) if kms_key else None
    encrypted, key = snapshots.encryption(rt.session, region, snapshot_id)
    if encrypted and arn in (None, key):
        return snapshot_id
    why = f"encrypted with {key}" if encrypted else "not encrypted"
    rt.info(f"{snapshot_id} is {why}: copying it encrypted with {arn or 'the default EBS key'}",
            level=1, stage=Stage.PUBLISH)
    copy = snapshots.copy_encrypted(rt.session, region, snapshot_id,
                                    f"clusterkit dataset {label} (encrypted copy of "
                                    f"{snapshot_id})", {UPLOAD_TAG: label}, arn)
    wait_completed(rt, region, copy)
    snapshots.delete_snapshot(rt.session, region, snapshot_id)
    return copy


def do_snapshot_volume(target: str, *, node: str | None, path: str, label: str | None = None,
                       region: str | None = None, profile: str | None = None,
                       rt: Runtime | None = None, kms_key: str | None = None) -> PublishResult:
    """Snapshot the EBS volume mounted at ``path`` on one node of a running cluster,
    encrypted (``kms_key``, else the spec file's storage.kms_key, else the volume's own
    key or the default EBS key)."""
    path = check_path(path)
    kms_key = check_kms_key(kms_key) or spec_kms_key(target)
    label = check_label(label or os.path.basename(path))
    rt = rt or Runtime.make(region=region, profile=profile)
    if region:
        check_regions([region], "--region")
    t0 = rt.clock()
    rt.started(Stage.PUBLISH, f"snapshotting {path} on {target} {node or 'master'}")
    where, label_node, probe = probe_volume(rt, target, node, path, region)
    if probe.volume_id is None:
        what = "no EBS volume is" if probe.mounted else "nothing is"
        raise UsageError(f"{what} mounted at {path} on node {label_node} of {target}",
                         "give the --path where the dataset's EBS volume is mounted "
                         "(`clusterkit exec NAME -- findmnt` lists the mounts)")
    removed = remove_abandoned(rt, where, label)
    snap = snapshots.snapshot_volume(rt.session, where, probe.volume_id,
                                     f"clusterkit dataset {label} from {probe.volume_id}",
                                     {UPLOAD_TAG: label})
    rt.info(f"{snap}: snapshot of {probe.volume_id} started, waiting for it to complete",
            level=1, stage=Stage.PUBLISH)
    wait_completed(rt, where, snap)
    snap = ensure_encrypted(rt, where, snap, label, kms_key)
    mark_published(rt, where, snap, label, probe.manifest_sha256)
    size = describe_snapshot(rt.session, where, snap)
    result = PublishResult(snap, label, where, size.size_gib if size else 0,
                           probe.manifest_sha256, rt.clock() - t0, "volume",
                           volume_id=probe.volume_id, removed=removed,
                           kms_key=snapshots.encryption(rt.session, where, snap)[1])
    rt.done(Stage.PUBLISH, f"{snap} published: dataset {label} from {probe.volume_id}")
    return result
