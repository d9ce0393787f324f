"""aws.efs against the emulator over HTTP: one mount target per subnet, idempotent."""

from __future__ import annotations

import boto3
import pytest

from clusterkit.aws import efs, lookup
from clusterkit.aws.session import make_session
from clusterkit.errors import AwsError
from tests import support
from tests.integration.conftest import REGION


def test_mount_target_once(moto_env):
    s = make_session(REGION)
    vpc = lookup.default_vpc(s, REGION)
    subnet = lookup.default_subnet(s, REGION, vpc, f"{REGION}a")
    group = boto3.client("ec2", REGION).create_security_group(
        GroupName=support.unique_name("efs"), Description="t", VpcId=vpc)["GroupId"]
    fs_id = boto3.client("efs", REGION).create_file_system(
        CreationToken=support.unique_name("fs"))["FileSystemId"]
    assert efs.ensure_mount_target(s, REGION, fs_id, subnet, group) is True
    assert efs.ensure_mount_target(s, REGION, fs_id, subnet, group) is False
    assert efs.mount_target_ready(s, REGION, fs_id, subnet)
    other = lookup.default_subnet(s, REGION, vpc, f"{REGION}b")
    assert not efs.mount_target_ready(s, REGION, fs_id, other)


def test_missing_file_system_is_translated(moto_env):
    s = make_session(REGION)
    with pytest.raises(AwsError) as caught:
        efs.mount_target_ready(s, REGION, "fs-0123456789", "subnet-1")
    assert caught.value.code == "FileSystemNotFound"
    assert caught.value.message.startswith("DescribeMountTargets on fs-0123456789 failed: ")
