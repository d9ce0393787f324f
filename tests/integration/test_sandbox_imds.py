"""The sandbox's instance metadata for real: `clusterkit sandbox interrupt` (the CLI)
posts a notice that the node's metadata serves (read with the watcher's own IMDSv2
client, at the node's address on the sandbox endpoint); the node agent terminates the
instance when the notice's time comes, as EC2 does; a node that does not run, or a bad
duration, is refused with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit import sandboxmode
from clusterkit.node import interruption
from clusterkit.plan.nodes import INDEX_TAG
from tests import support
from tests.conftest import SandboxCluster

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
CLI = str(Path(sys.executable).with_name("clusterkit"))


def _cli(cluster: SandboxCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args, "--dir", str(cluster.sandbox.dir)], capture_output=True,
                          text=True, timeout=60, env={**cluster.sandbox.env})


def _state(cluster: SandboxCluster, iid: str) -> str:
    return cluster.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"][0]["State"]["Name"]


def test_interrupt_posts_the_notice_and_the_instance_goes_at_its_time(
        sandbox_cluster: SandboxCluster) -> None:
    [node] = sandbox_cluster.launch(1)
    iid = node.instance_id
    sandbox_cluster.ec2.create_tags(Resources=[iid], Tags=[
        {"Key": INDEX_TAG, "Value": "0"}])
    meta = interruption.Metadata(sandboxmode.metadata_url(iid, sandbox_cluster.sandbox.env))
    assert meta.notices() == []
    out = _cli(sandbox_cluster, "--json", "sandbox", "interrupt", sandbox_cluster.name,
               "master", "--notice", "3s")
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    assert said["instance_id"] == iid and said["action"] == "terminate"
    [notice] = meta.notices()
    assert notice.kind is interruption.NoticeKind.INTERRUPTION
    assert _state(sandbox_cluster, iid) == "running"  # not before its time
    support.wait_for(lambda: _state(sandbox_cluster, iid) == "terminated",
                     "terminated at the notice's time", timeout=30, interval=0.25)


def test_interrupt_of_a_node_that_does_not_run_exits_2(
        sandbox_cluster: SandboxCluster) -> None:
    out = _cli(sandbox_cluster, "sandbox", "interrupt", sandbox_cluster.name, "worker-7")
    assert out.returncode == 2 and "no running node worker-7" in out.stderr, out.stderr
    out = _cli(sandbox_cluster, "sandbox", "interrupt", sandbox_cluster.name, "master",
               "--notice", "soon")
    assert out.returncode == 2 and "not a duration" in out.stderr, out.stderr


def test_the_metadata_has_the_identity_and_the_profile_roles_credentials_boto_reads(
        sandbox_cluster: SandboxCluster) -> None:
    """A node's identity document, and once an instance profile is associated its role's
    temporary credentials, read the way boto3 on the node reads them (botocore's own
    metadata fetcher, IMDSv2), at the node's metadata on the sandbox endpoint."""
    from botocore.utils import InstanceMetadataFetcher

    [node] = sandbox_cluster.launch(1)
    iid = node.instance_id
    base = sandboxmode.metadata_url(iid, sandbox_cluster.sandbox.env)
    # this process has metadata disabled (no test may reach EC2's); a node's has not
    fetcher = InstanceMetadataFetcher(timeout=5, num_attempts=1, base_url=base, env={})
    assert fetcher.retrieve_iam_role_credentials() == {}  # no profile: 404, as EC2
    meta = interruption.Metadata(base)
    identity = json.loads(meta.get("/latest/dynamic/instance-identity/document") or "{}")
    described = sandbox_cluster.ec2.describe_instances(InstanceIds=[iid])[
        "Reservations"][0]["Instances"][0]
    assert (identity["instanceId"], identity["region"], identity["instanceType"],
            identity["availabilityZone"], identity["privateIp"]) == (
        iid, "us-east-1", "t3.micro", described["Placement"]["AvailabilityZone"],
        described["PrivateIpAddress"])
    iam = sandbox_cluster.sandbox.client("iam")
    role = sandbox_cluster.name + "-node"
    iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")
    iam.create_instance_profile(InstanceProfileName=role)
    iam.add_role_to_instance_profile(InstanceProfileName=role, RoleName=role)
    sandbox_cluster.ec2.associate_iam_instance_profile(
        IamInstanceProfile={"Name": role}, InstanceId=iid)
    got = fetcher.retrieve_iam_role_credentials()
    assert got["role_name"] == role and got["access_key"].startswith("ASIA")
    assert got["secret_key"] and got["token"] and got["expiry_time"] > identity["pendingTime"]
