"""EBS direct APIs: write an image file into a new snapshot without any instance.

StartSnapshot -> PutSnapshotBlock (512 KiB blocks, SHA-256 computed here, several at
once, all-zero blocks never sent) -> CompleteSnapshot with the count of blocks put.
Sparse holes are never read: SEEK_DATA / SEEK_HOLE give the data extents, and only the
blocks that touch one are read (and skipped too when they hold only zeros).
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client
from clusterkit.aws.errors import THROTTLE_CODES, aws_call
from clusterkit.aws.session import client as make_client
from clusterkit.aws.tags import to_list
from clusterkit.errors import AwsError

if TYPE_CHECKING:
    import boto3

BLOCK_SIZE = 512 * 1024
ZERO_BLOCK = bytes(BLOCK_SIZE)
UPLOAD_THREADS = 16
BLOCK_ATTEMPTS = 4  # per block, on top of botocore's own retries
RETRYABLE = THROTTLE_CODES | {"InternalServerException", "ServiceUnavailableException",
                              "RequestThrottledException", "InternalError"}
START_TIMEOUT_MIN = 60  # AWS errors a snapshot not completed this many minutes after start


@dataclass(frozen=True)
class UploadProgress:
    bytes_done: int  # put so far
    blocks_done: int  # read so far (put, or skipped as all-zero)
    blocks_total: int  # blocks that will be read: those touching data (all without skipping)


@dataclass(frozen=True)
class UploadStats:
    blocks_put: int
    blocks_skipped: int
    bytes_put: int


Progress = Callable[[UploadProgress], None]


def ebs_client(session: boto3.Session, region: str, threads: int) -> Any:
    """One client shared by the upload threads (botocore clients are thread-safe) with a
    connection pool as large as the thread count."""
    from botocore.config import Config  # lazily, as in aws.session

    return make_client(session, "ebs", region,
                       config=Config(max_pool_connections=max(10, threads)))


def start_snapshot(session: boto3.Session, region: str, size_gib: int,
                   tags: Mapping[str, str], description: str, client_token: str,
                   timeout_min: int = START_TIMEOUT_MIN, kms_key_arn: str | None = None) -> str:
    """A new snapshot, always encrypted: with ``kms_key_arn`` (a key ARN: StartSnapshot
    takes no alias), else with the account's default EBS key."""
    extra = {"KmsKeyArn": kms_key_arn} if kms_key_arn else {}
    with aws_call("StartSnapshot", region):
        out = cached_client(session, "ebs", region).start_snapshot(
            VolumeSize=size_gib, Tags=to_list(tags), Description=description,
            ClientToken=client_token, Timeout=timeout_min, Encrypted=True, **extra)
    return str(out["SnapshotId"])


def complete_snapshot(session: boto3.Session, region: str, snapshot_id: str,
                      changed_blocks: int) -> str:
    with aws_call("CompleteSnapshot", snapshot_id):
        out = cached_client(session, "ebs", region).complete_snapshot(
            SnapshotId=snapshot_id, ChangedBlocksCount=changed_blocks)
    return str(out["Status"])


def checksum(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def data_blocks(fd: int, size: int) -> Iterator[int]:
    """Indexes of the blocks that touch a data extent of the (sparse) file, ascending."""
    offset, last = 0, -1
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after offset
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        for index in range(max(start // BLOCK_SIZE, last + 1), -(-end // BLOCK_SIZE)):
            yield index
            last = index
        offset = end


def put_block(ebs: Any, snapshot_id: str, index: int, data: bytes) -> None:
    """One PutSnapshotBlock, retried on throttling and server errors."""
    for attempt in range(BLOCK_ATTEMPTS):
        try:
            with aws_call("PutSnapshotBlock", f"{snapshot_id} block {index}"):
                ebs.put_snapshot_block(
                    SnapshotId=snapshot_id, BlockIndex=index, BlockData=data,
                    DataLength=len(data), Checksum=checksum(data),
                    ChecksumAlgorithm="SHA256")
            return
        except AwsError as err:
            if err.code not in RETRYABLE or attempt == BLOCK_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * 2 ** attempt)


class _Uploader:
    """Reads and puts one block per task; counts what it did."""

    def __init__(self, ebs: Any, snapshot_id: str, fd: int, skip_zero: bool) -> None:
        self.ebs, self.snapshot_id, self.fd, self.skip_zero = ebs, snapshot_id, fd, skip_zero
        self.lock = threading.Lock()
        self.put = self.skipped = self.bytes = 0

    def __call__(self, index: int) -> None:
        data = os.pread(self.fd, BLOCK_SIZE, index * BLOCK_SIZE)
        if len(data) < BLOCK_SIZE:
            data += bytes(BLOCK_SIZE - len(data))
        if self.skip_zero and data == ZERO_BLOCK:
            with self.lock:
                self.skipped += 1
            return
        put_block(self.ebs, self.snapshot_id, index, data)
        with self.lock:
            self.put += 1
            self.bytes += BLOCK_SIZE


def upload_image(session: boto3.Session, region: str, snapshot_id: str, path: str, *,
                 threads: int = UPLOAD_THREADS, skip_zero: bool = True,
                 progress: Progress | None = None) -> UploadStats:
    """Put every non-zero block of the image at ``path`` into the snapshot. With
    ``skip_zero`` False every block is read and put, holes too (the plain sequential
    baseline the bench compares against). ``progress`` runs in this thread; an
    exception from it stops the upload (no new block is started) and propagates."""
    ebs = ebs_client(session, region, threads)
    with open(path, "rb") as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        blocks = -(-size // BLOCK_SIZE)
        indexes = list(data_blocks(fd, size)) if skip_zero else list(range(blocks))
        job = _Uploader(ebs, snapshot_id, fd, skip_zero)
        _run_window(job, iter(indexes), threads, len(indexes), progress)
    return UploadStats(job.put, blocks - job.put, job.bytes)


def _run_window(job: _Uploader, indexes: Iterator[int], threads: int, total: int,
                progress: Progress | None) -> None:
    """At most 2 x threads blocks in flight (memory stays bounded); the first failure
    cancels what has not started and is raised."""
    inflight: set[Future[None]] = set()
    with ThreadPoolExecutor(threads, thread_name_prefix="ebs-put") as pool:
        try:
            for index in indexes:
                inflight.add(pool.submit(job, index))
                if len(inflight) >= 2 * threads:
                    inflight = _drain(inflight, job, total, progress, FIRST_COMPLETED)
            _drain(inflight, job, total, progress, None)
        except BaseException:
            for future in inflight:
                future.cancel()
            raise


def _drain(inflight: set[Future[None]], job: _Uploader, total: int,
           progress: Progress | None, until: str | None) -> set[Future[None]]:
    done, rest = wait(inflight, return_when=until or "ALL_COMPLETED")
    for future in done:
        future.result()
    if progress is not None:
        with job.lock:
            report = UploadProgress(job.bytes, job.put + job.skipped, total)
        progress(report)
    return rest


def list_blocks(session: boto3.Session, region: str, snapshot_id: str) -> dict[int, str]:
    """Block index -> block token of every block the snapshot holds (tests read a
    sample back with ``get_block``)."""
    ebs = cached_client(session, "ebs", region)
    found: dict[int, str] = {}
    token: str | None = None
    with aws_call("ListSnapshotBlocks", snapshot_id):
        while True:
            out = ebs.list_snapshot_blocks(SnapshotId=snapshot_id,
                                           **({"NextToken": token} if token else {}))
            found.update({int(b["BlockIndex"]): str(b.get("BlockToken", ""))
                          for b in out.get("Blocks", [])})
            token = out.get("NextToken")
            if not token:
                return found


def get_block(session: boto3.Session, region: str, snapshot_id: str, index: int,
              token: str = "") -> bytes:
    ebs = cached_client(session, "ebs", region)
    with aws_call("GetSnapshotBlock", f"{snapshot_id} block {index}"):
        out = ebs.get_snapshot_block(SnapshotId=snapshot_id, BlockIndex=index,
                                     BlockToken=token or "none")
        return bytes(out["BlockData"].read())
