"""Where the resources a spec pins exist: one read call per resource and region
(DescribeImages, DescribeKeyPairs, DescribeFileSystems, DescribeSnapshots)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.errors import AwsError
from clusterkit.plan.mounts import LEND_HINT, LEND_TAG
from clusterkit.plan.pinning import FOUND, MISSING, PinKind, Pinned

if TYPE_CHECKING:
    import boto3

# kind -> (service, operation, the error codes meaning "no such resource here")
_CALLS: dict[PinKind, tuple[str, str, tuple[str, ...]]] = {
    PinKind.IMAGE: ("ec2", "DescribeImages", ("InvalidAMIID.NotFound", "InvalidAMIID.Unavailable")),
    PinKind.KEY_PAIR: ("ec2", "DescribeKeyPairs", ("InvalidKeyPair.NotFound",)),
    PinKind.FILE_SYSTEM: ("efs", "DescribeFileSystems", ("FileSystemNotFound",)),
    PinKind.SNAPSHOT: ("ec2", "DescribeSnapshots", ("InvalidSnapshot.NotFound",)),
}


def _state(found: list[dict[str, Any]], key: str, good: str) -> str:
    if not found:
        return MISSING
    state = str(found[0].get(key, good))
    return FOUND if state == good else f"{state}, not {good}"


def _verdict(made: Any, pin: Pinned) -> str:
    """FOUND, MISSING or why the resource is there but unusable."""
    if pin.kind is PinKind.IMAGE:
        return _state(made.describe_images(ImageIds=[pin.id])["Images"], "State", "available")
    if pin.kind is PinKind.KEY_PAIR:
        return FOUND if made.describe_key_pairs(KeyNames=[pin.id])["KeyPairs"] else MISSING
    if pin.kind is PinKind.FILE_SYSTEM:
        found = made.describe_file_systems(FileSystemId=pin.id)["FileSystems"]
        state = _state(found, "LifeCycleState", "available")
        tags = {t["Key"]: t["Value"] for t in found[0].get("Tags", [])} if found else {}
        if state == FOUND and tags.get(LEND_TAG) != "true":
            return f"not tagged {LEND_TAG}=true ({LEND_HINT.replace('FS', pin.id)})"
        return state
    return _state(made.describe_snapshots(SnapshotIds=[pin.id])["Snapshots"], "State",
                  "completed")


def probe(session: boto3.Session, region: str, pin: Pinned) -> str:
    """One read call: FOUND, MISSING, or why it is unusable (a state, or the failed API)."""
    service, operation, not_found = _CALLS[pin.kind]
    made = client(session, service, region)
    try:
        with aws_call(operation, pin.id, expected=not_found):
            return _verdict(made, pin)
    except AwsError as err:
        return f"not checked ({err.message})"
    return MISSING  # the block ended on a not-found code


def locate(session: boto3.Session, pins: Sequence[Pinned],
           regions: Sequence[str]) -> dict[Pinned, dict[str, str]]:
    """resource -> {region: verdict} for every pinned resource in every region."""
    return {pin: {region: probe(session, region, pin) for region in regions} for pin in pins}
