"""Encryption at rest and in transit, end to end in the sandbox: a 2-node cluster whose
spec names a KMS key and says its nodes run containers. The stack's EFS is encrypted
with that key and the launch template answers IMDS two hops; every node has
amazon-efs-utils (the sandbox's `mount.efs`, which refuses a mount without TLS, as the
file system policy does, and one with `iam` on a node without an instance profile), so
the `efs` step mounts with `-o tls,iam` and warns of nothing; the EFS root is root's,
sticky, 1775; a second `up` runs no EFS step."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from clusterkit.bootstrap.run import Outcome
from clusterkit.bootstrap.steps import EFS_TLS_OPTIONS
from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.provision.up import UpResult, do_up
from clusterkit.errors import GroupError
from clusterkit_sandbox.node import EFS_MOUNTS
from tests import support
from tests.e2e.clusters import running, sandbox_spec, user_session
from tests.integration.conftest import leftovers, runtime

EXTRA = """\
storage:
  kms_key: {alias}
  efs: {{mount: /efs, deletion_policy: delete}}
"""


@pytest.fixture(scope="module")
def tls_cluster(sandbox, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[str, Path, tuple[str, str], UpResult]]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("efs-tls")
    name = support.unique_name("et")
    with user_session(sandbox, where):
        kms = boto3.client("kms", "us-east-1")
        key = kms.create_key()["KeyMetadata"]
        alias = "alias/" + name
        kms.create_alias(AliasName=alias, TargetKeyId=key["KeyId"])
        spec = where / f"{name}.yaml"
        text = sandbox_spec(name, count=2, instance_type="c5.large",
                            extra=EXTRA.format(alias=alias))
        spec.write_text(text.replace("  placement_group: false\n",
                                     "  placement_group: false\n  containers: true\n"))
        with running(spec, name) as first:
            yield name, spec, (key["Arn"], alias), first


def _on_all(name: str, command: str) -> list[str]:
    return [r.stdout for r in do_exec(name, [command], rt=runtime()).values()]


def test_efs_is_mounted_with_tls_and_nothing_is_warned(tls_cluster) -> None:
    name, _spec, _key, first = tls_cluster
    assert first.bootstrap is not None and first.bootstrap.ok
    for node in first.bootstrap.nodes:
        [efs] = [s for s in node.steps if s.step == "efs"]
        assert efs.outcome is Outcome.RAN and efs.warning == "", efs
    for fstab in _on_all(name, "grep ' /efs ' /etc/fstab"):
        assert fstab.split()[2:4] == ["efs", EFS_TLS_OPTIONS], fstab
    for log in _on_all(name, f"cat {EFS_MOUNTS}"):  # one line a mount (a test probes one)
        [(spec_, mount, options)] = [line.split() for line in log.splitlines()
                                     if line.split()[1] == "/efs"]
        assert {"tls", "iam"} <= set(options.split(",")), log
    assert _on_all(name, "stat -c '%u %a' /efs") == ["0 1775\n"] * 2
    token = uuid.uuid4().hex
    (res,) = do_exec(name, [f"echo {token} > /efs/{token}"], nodes=["worker-1"],
                     rt=runtime()).values()
    (res,) = do_exec(name, [f"cat /efs/{token}"], nodes=["master"], rt=runtime()).values()
    assert res.stdout.strip() == token


def test_the_stack_encrypts_efs_with_the_spec_key_and_imds_answers_two_hops(
        tls_cluster) -> None:
    name, _spec, key, _first = tls_cluster
    (fs_id,) = leftovers(name)["file_systems"]
    fs = boto3.client("efs", "us-east-1").describe_file_systems(FileSystemId=fs_id)[
        "FileSystems"][0]
    assert fs["Encrypted"] is True and fs["KmsKeyId"] in key  # AWS: the ARN; moto: as given
    ec2 = boto3.client("ec2", "us-east-1")
    [template] = ec2.describe_launch_templates(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [name]}])["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(
        LaunchTemplateId=template["LaunchTemplateId"])["LaunchTemplateVersions"][0][
        "LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    # the template names no instance profile (the launch does not wait ~2 min for one):
    # `up` gave each node the stack's profile once the stack was complete
    assert "IamInstanceProfile" not in data
    ids = [n.instance_id for n in _first.nodes]
    given = ec2.describe_iam_instance_profile_associations(Filters=[
        {"Name": "instance-id", "Values": ids}])["IamInstanceProfileAssociations"]
    stack = boto3.client("cloudformation", "us-east-1").describe_stacks(
        StackName=f"clusterkit-{name}")["Stacks"][0]
    [profile] = [o["OutputValue"] for o in stack["Outputs"]
                 if o["OutputKey"] == "InstanceProfileArn"]
    assert sorted((a["InstanceId"], a["IamInstanceProfile"]["Arn"]) for a in given) == \
        sorted((iid, profile) for iid in ids)


def test_a_second_up_leaves_the_tls_mount_alone(tls_cluster) -> None:
    _name, spec, _key, _first = tls_cluster
    again = do_up(str(spec), yes=True, rt=runtime(), timeout=180).bootstrap
    assert again is not None
    assert {s.outcome for n in again.nodes for s in n.steps if s.step == "efs"} == \
        {Outcome.DONE}


def _has_role(sandbox, instance_id: str) -> bool:
    from clusterkit_sandbox.node import ROLE_FILE
    from clusterkit_sandbox.state import RUN_DIR

    return (sandbox.dir / RUN_DIR / "nodes" / instance_id / "conf" / ROLE_FILE).exists()


def test_without_its_instance_profile_a_node_cannot_mount_with_iam(sandbox,
                                                                   tls_cluster) -> None:
    """The sandbox's mount.efs, as amazon-efs-utils on AWS, needs the role's credentials
    for `-o iam`: a node whose profile is taken away is refused, and mounts again once
    it is given back (what `up` does before the efs step)."""
    name, _spec, _key, first = tls_cluster
    worker = next(n for n in first.nodes if n.index == 1)
    ec2 = boto3.client("ec2", "us-east-1")
    [given] = ec2.describe_iam_instance_profile_associations(Filters=[
        {"Name": "instance-id", "Values": [worker.instance_id]}])["IamInstanceProfileAssociations"]
    ec2.disassociate_iam_instance_profile(AssociationId=given["AssociationId"])
    mount = ("sudo -n mkdir -p /mnt/probe && sudo -n mount -t efs -o tls,iam "
             "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com:/ /mnt/probe")
    try:
        support.wait_for(lambda: not _has_role(sandbox, worker.instance_id), "role gone")
        with pytest.raises(GroupError) as refused:
            do_exec(name, [mount], nodes=["worker-1"], rt=runtime())
        (res,) = refused.value.group.values()
        assert "no IAM role" in res.stderr, res
    finally:
        ec2.associate_iam_instance_profile(IamInstanceProfile={
            "Arn": given["IamInstanceProfile"]["Arn"]}, InstanceId=worker.instance_id)
    support.wait_for(lambda: _has_role(sandbox, worker.instance_id), "role back")
    (res,) = do_exec(name, [mount + " && sudo -n umount /mnt/probe"], nodes=["worker-1"],
                     rt=runtime()).values()
    assert res.ok, res
