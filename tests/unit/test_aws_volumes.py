"""aws.volumes' reading of AWS answers the emulator cannot give: DescribeVolumeStatus's
InitializationStatusDetails (moto has none; its DescribeVolumeStatus even fails), and
DescribeVolumes split into batches. AWS is replaced by botocore's Stubber on a real EC2
client, which checks every request and answer against the service model."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from clusterkit.aws import volumes
from clusterkit.cluster.dataset.checks import hydration
from clusterkit.cluster.runtime import Runtime


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    client = boto3.client("ec2", "us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    monkeypatch.setattr(volumes, "_ec2", lambda session, region: client)
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def _status(vol: str, detail: dict | None) -> dict:
    out = {"VolumeId": vol, "AvailabilityZone": "us-east-1a",
           "VolumeStatus": {"Status": "ok"}}
    return {**out, "InitializationStatusDetails": detail} if detail is not None else out


def test_initialization_reads_progress_and_time_left(ec2: Stubber) -> None:
    ids = ["vol-0a", "vol-0b", "vol-0c"]
    ec2.add_response("describe_volume_status", {"VolumeStatuses": [
        _status("vol-0a", {"InitializationType": "provisioned-rate", "Progress": 42,
                           "EstimatedTimeToCompleteInSeconds": 600}),
        _status("vol-0b", {"InitializationType": "default", "Progress": 100}),
        _status("vol-0c", None)]}, {"VolumeIds": ids})
    assert volumes.initialization(None, "us-east-1", ids) == {
        "vol-0a": {"progress": 42, "type": "provisioned-rate", "eta_s": 600},
        "vol-0b": {"progress": 100, "type": "default", "eta_s": None}}


def test_status_hydration_per_volume(ec2: Stubber) -> None:
    ids = ["vol-0a", "vol-0b", "vol-0c"]
    ec2.add_response("describe_volume_status", {"VolumeStatuses": [
        _status("vol-0a", {"Progress": 42, "EstimatedTimeToCompleteInSeconds": 600}),
        _status("vol-0b", {"Progress": 100}), _status("vol-0c", None)]}, {"VolumeIds": ids})
    assert hydration(Runtime(session=None), "us-east-1", ids) == {
        "vol-0a": "42% (~10 min left)", "vol-0b": "done", "vol-0c": "unknown"}


def test_status_hydration_is_unknown_when_the_call_fails(ec2: Stubber) -> None:
    ec2.add_client_error("describe_volume_status", "InternalError", http_status_code=500)
    assert hydration(Runtime(session=None), "us-east-1", ["vol-0a"]) == {"vol-0a": "unknown"}


def _volume(vol: str) -> dict:
    return {"VolumeId": vol, "Size": 1, "State": "available", "AvailabilityZone": "us-east-1a",
            "SnapshotId": "snap-0123456789abcdef0", "Attachments": [], "Tags": []}


def test_describe_clones_asks_in_batches(ec2: Stubber, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(volumes, "DESCRIBE_BATCH", 2)
    ids = ["vol-01", "vol-02", "vol-03"]
    ec2.add_response("describe_volumes", {"Volumes": [_volume(v) for v in ids[:2]]},
                     {"VolumeIds": ids[:2]})
    ec2.add_response("describe_volumes", {"Volumes": [_volume(ids[2])]},
                     {"VolumeIds": ids[2:]})
    assert [c.volume_id for c in volumes.describe_clones(None, "us-east-1", ids)] == ids


def test_describe_clones_leaves_out_a_batch_with_a_volume_not_found_yet(
        ec2: Stubber, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(volumes, "DESCRIBE_BATCH", 1)
    ec2.add_client_error("describe_volumes", "InvalidVolume.NotFound",
                         expected_params={"VolumeIds": ["vol-01"]})
    ec2.add_response("describe_volumes", {"Volumes": [_volume("vol-02")]},
                     {"VolumeIds": ["vol-02"]})
    assert [c.volume_id for c in volumes.describe_clones(None, "us-east-1",
                                                         ["vol-01", "vol-02"])] == ["vol-02"]
    assert volumes.describe_clones(None, "us-east-1", []) == []


def test_a_clone_carries_its_attachments_delete_on_termination(ec2: Stubber) -> None:
    vol = {**_volume("vol-01"), "State": "in-use", "Attachments": [
        {"VolumeId": "vol-01", "InstanceId": "i-01", "Device": "/dev/sdf",
         "State": "attached", "DeleteOnTermination": False}]}
    ec2.add_response("describe_volumes", {"Volumes": [vol, _volume("vol-02")]},
                     {"VolumeIds": ["vol-01", "vol-02"]})
    attached, loose = volumes.describe_clones(None, "us-east-1", ["vol-01", "vol-02"])
    assert (attached.instance_id, attached.device, attached.delete_on_termination) == \
        ("i-01", "/dev/sdf", False)
    assert (loose.instance_id, loose.delete_on_termination) == (None, None)
