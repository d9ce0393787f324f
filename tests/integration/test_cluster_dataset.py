"""deploy-dataset's AWS side against moto in server mode (real HTTP; the nodes have no
sshd here, so nothing reaches the bootstrap): a failure halfway says what it created and
what that costs, exit 1, and `down` removes every clone. The failure itself is injected at
botocore's entry point (a server error on one AttachVolume); every other call is real."""

from __future__ import annotations

import boto3
import pytest

from clusterkit.cluster.dataset.deploy import do_deploy_dataset
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import AwsError, ClusterkitError
from clusterkit.events import Collect, Kind
from clusterkit.plan import dataset as pd
from tests.integration.conftest import REGION, Calls, leftovers, runtime, write_spec


def _published_snapshot() -> str:
    ec2 = boto3.client("ec2", REGION)
    vol = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    snap = ec2.create_snapshot(VolumeId=vol, TagSpecifications=[{
        "ResourceType": "snapshot", "Tags": [
            {"Key": pd.DATASET_TAG, "Value": "t"}, {"Key": pd.PUBLISHED_TAG, "Value": "complete"},
            {"Key": pd.MANIFEST_TAG, "Value": "ab" * 32}]}])["SnapshotId"]
    ec2.delete_volume(VolumeId=vol)
    return snap


def test_a_failure_halfway_names_every_volume_it_made_and_down_removes_them(moto_env,
                                                                             tmp_path):
    spec = write_spec(tmp_path, count=3, placement_group=False)
    name = spec.name.rsplit("-", 1)[0]
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False, timeout=120)
    snap = _published_snapshot()
    calls = Calls(fail_at=2, only="AttachVolume")
    rt = runtime(calls)
    rt.report = seen = Collect()
    with pytest.raises(AwsError) as err:
        do_deploy_dataset(str(spec), snapshot=snap, rt=rt, timeout=60)
    assert err.value.exit_code == 1 and "AttachVolume" in err.value.message
    assert calls.mutating()["CreateVolume"] == 3  # every node got as far as it could
    errors = "\n".join(seen.texts(Kind.ERROR))
    assert "it created 3 volume(s)" in errors
    ec2 = boto3.client("ec2", REGION)
    made = [v for v in ec2.describe_volumes(Filters=[
        {"Name": f"tag:{pd.CLONE_OF_TAG}", "Values": [snap]}])["Volumes"]]
    assert len(made) == 3
    for vol in made:
        assert vol["VolumeId"] in errors and vol["Encrypted"] is True
        assert "costs storage until deleted" in errors
    assert f"`clusterkit down {name}`" in "\n".join(seen.texts(Kind.INFO))
    do_down(str(spec), yes=True, rt=runtime())
    assert leftovers(name) == {}


def test_a_stopped_or_missing_cluster_is_refused_before_any_call_that_changes(moto_env,
                                                                                tmp_path):
    spec = write_spec(tmp_path, count=1, placement_group=False)
    calls = Calls()
    with pytest.raises(ClusterkitError) as err:
        do_deploy_dataset(str(spec), snapshot="snap-0123456789abcdef0", rt=runtime(calls))
    assert err.value.exit_code == 1 and "no cluster" in err.value.message
    assert calls.mutating() == {}


def test_the_aws_side_makes_per_node_only_the_per_volume_calls(moto_env, tmp_path,
                                                               monkeypatch):
    """Every phase runs for all nodes at once and each wait is one DescribeVolumes for
    every volume: 6 nodes take as many DescribeVolumes as 1 would. The bootstrap is
    stubbed (moto's instances have no sshd here); the tests in tests/e2e run it."""
    from clusterkit.bootstrap.run import BootstrapResult
    from clusterkit.cluster.dataset import deploy as dataset

    monkeypatch.setattr(dataset, "bootstrap_nodes", lambda *a, **kw: BootstrapResult(()))
    spec = write_spec(tmp_path, count=6, placement_group=False)
    name = spec.name.rsplit("-", 1)[0]
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False, timeout=120)
    snap = _published_snapshot()
    calls = Calls()
    rt = runtime(calls)
    rt.report = seen = Collect()
    result = do_deploy_dataset(str(spec), snapshot=snap, rt=rt, timeout=60)
    assert [n.action for n in result.nodes] == ["created"] * 6
    assert len({n.volume_id for n in result.nodes}) == 6
    assert calls.mutating() == {"CreateVolume": 6, "AttachVolume": 6,
                                "ModifyInstanceAttribute": 6}
    described = [op for _, op in calls.log if op == "DescribeVolumes"]
    assert len(described) == 3  # the cluster's clones, then one per wait (available, in-use)
    progress = [e.done for e in seen.events if e.kind is Kind.PROGRESS and e.total == 6]
    assert sorted(progress) == [1, 2, 3, 4, 5, 6]
    do_down(str(spec), yes=True, rt=runtime())
    assert leftovers(name) == {}


def test_clones_are_encrypted_with_the_spec_kms_key(moto_env, tmp_path, monkeypatch):
    from clusterkit.bootstrap.run import BootstrapResult
    from clusterkit.cluster.dataset import deploy as dataset

    monkeypatch.setattr(dataset, "bootstrap_nodes", lambda *a, **kw: BootstrapResult(()))
    key = boto3.client("kms", REGION).create_key()["KeyMetadata"]["Arn"]
    spec = write_spec(tmp_path, count=2, placement_group=False,
                      extra=f"storage:\n  kms_key: {key}\n")
    name = spec.name.rsplit("-", 1)[0]
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False, timeout=120)
    snap = _published_snapshot()
    result = do_deploy_dataset(str(spec), snapshot=snap, rt=runtime(), timeout=60)
    vols = boto3.client("ec2", REGION).describe_volumes(
        VolumeIds=[n.volume_id for n in result.nodes])["Volumes"]
    assert [(v["Encrypted"], v["KmsKeyId"]) for v in vols] == [(True, key)] * 2
    do_down(str(spec), yes=True, rt=runtime())
    assert leftovers(name) == {}
