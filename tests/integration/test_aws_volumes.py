"""aws.volumes against the emulator over HTTP: volumes found by the cluster tag,
deleted, and "already gone" not an error."""

from __future__ import annotations

import boto3

from clusterkit.aws import volumes
from clusterkit.aws.session import make_session
from tests import support
from tests.integration.conftest import REGION


def test_find_and_delete(moto_env):
    s, cluster = make_session(REGION), support.unique_name("vol")
    ec2 = boto3.client("ec2", REGION)
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1, TagSpecifications=[
        {"ResourceType": "volume",
         "Tags": [{"Key": "clusterkit:cluster", "Value": cluster}]}])["VolumeId"]
    ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)  # not the cluster's
    assert volumes.cluster_volumes(s, REGION, cluster) == [
        {"id": vol, "state": "available", "attached_to": []}]
    assert volumes.delete_volume(s, REGION, vol) is True
    assert volumes.delete_volume(s, REGION, vol) is False  # InvalidVolume.NotFound
    assert volumes.cluster_volumes(s, REGION, cluster) == []
