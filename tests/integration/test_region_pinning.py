"""Region pinning against moto over HTTP: a snapshot and a key pair made in us-west-2
only; `plan` (and the launch candidates `up` walks) must go there, say where each pinned
resource was found, and fail naming the resource and the regions when none holds all."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest

from clusterkit.cluster.provision.planning import do_plan
from clusterkit.cluster.provision.up import up
from clusterkit.errors import UsageError
from clusterkit.plan.spend import plan_lines
from tests.integration.conftest import AMI, runtime

SPEC = """\
name: {name}
region: us-east-1
regions: [{regions}]
nodes:
  count: 2
  instance_types: [c5.large]
  market: on-demand
  image: {{id: {ami}}}
ssh:
  key_name: {key}
{storage}"""


def _snapshot(region: str) -> str:
    ec2 = boto3.client("ec2", region)
    volume = ec2.create_volume(AvailabilityZone=f"{region}a", Size=1)["VolumeId"]
    return ec2.create_snapshot(VolumeId=volume)["SnapshotId"]


def _key_pair(region: str, name: str) -> str:
    boto3.client("ec2", region).create_key_pair(KeyName=name)
    return name


def _spec(tmp_path: Path, *, regions: str, key: str, snapshot: str | None,
          ami: str = AMI) -> str:
    name = f"pin-{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.yaml"
    storage = f"storage:\n  dataset: {{snapshot: {snapshot}}}\n" if snapshot else ""
    path.write_text(SPEC.format(name=name, regions=regions, key=key, storage=storage, ami=ami))
    return str(path)


def test_plan_goes_where_the_snapshot_and_key_pair_are(moto_env: str, tmp_path: Path) -> None:
    """us-east-1 is first in the spec and as cheap; the pinned resources live in
    us-west-2 only, so plan and up's candidates choose us-west-2."""
    key = _key_pair("us-west-2", f"k-{uuid.uuid4().hex[:6]}")
    snap = _snapshot("us-west-2")
    spec = _spec(tmp_path, regions="us-east-1, us-west-2", key=key, snapshot=snap)
    plan = do_plan(spec, rt=runtime())
    lines, data = plan_lines(plan), plan.to_json()
    assert plan.region == "us-west-2" and data["choice"]["region"] == "us-west-2"
    assert f"note: pinned: snapshot {snap} (storage.dataset.snapshot): found in us-west-2; " \
        "missing in us-east-1" in lines
    assert f"note: pinned: key pair {key} (ssh.key_name): found in us-west-2; missing in " \
        "us-east-1" in lines
    assert f"note: pinned: AMI {AMI} (nodes.image.id): found in us-east-1, us-west-2" in lines
    assert plan.candidates and {o.region for o in plan.candidates} == {"us-west-2"}


def test_no_region_holds_everything_exits_2_naming_them(moto_env: str, tmp_path: Path) -> None:
    key = _key_pair("us-east-1", f"k-{uuid.uuid4().hex[:6]}")
    snap = _snapshot("us-west-2")
    spec = _spec(tmp_path, regions="us-east-1, us-west-2", key=key, snapshot=snap)
    with pytest.raises(UsageError) as info:
        do_plan(spec, rt=runtime())
    err = info.value
    assert err.exit_code == 2
    assert "looked in us-east-1, us-west-2" in err.message
    assert f"snapshot {snap} (storage.dataset.snapshot): found in us-west-2; missing in " \
        "us-east-1" in err.message
    assert f"key pair {key} (ssh.key_name): found in us-east-1; missing in us-west-2" \
        in err.message


def test_missing_snapshot_fails_plan_and_up_before_any_write(moto_env: str, calls,
                                                              tmp_path: Path) -> None:
    """A snapshot id that exists nowhere: today's `up` would launch and fail later."""
    from clusterkit import spec as spec_api

    key = _key_pair("us-east-1", f"k-{uuid.uuid4().hex[:6]}")
    spec = _spec(tmp_path, regions="us-east-1", key=key, snapshot="snap-0123456789abcdef0")
    with pytest.raises(UsageError) as info:
        do_plan(spec, rt=runtime())
    assert "snap-0123456789abcdef0 (storage.dataset.snapshot): missing in us-east-1" \
        in info.value.message
    with pytest.raises(UsageError):
        up(runtime(calls), spec_api.load(spec), yes=True, timeout=30)
    assert ("ec2", "DescribeSnapshots") in calls.log and not calls.mutating()


def test_region_option_restricts_or_is_refused(moto_env: str, calls, tmp_path: Path) -> None:
    """The key pair exists in both regions: without --region the first (equal price)
    wins; --region us-west-2 is honoured; --region eu-west-1 is refused before any call."""
    from clusterkit import spec as spec_api

    key = f"k-{uuid.uuid4().hex[:6]}"
    for region in ("us-east-1", "us-west-2"):
        _key_pair(region, key)
    spec = _spec(tmp_path, regions="us-east-1, us-west-2", key=key, snapshot=None)
    assert do_plan(spec, rt=runtime()).region == "us-east-1"
    plan = do_plan(spec, rt=runtime(), region="us-west-2")
    lines = plan_lines(plan)
    assert plan.region == "us-west-2" and plan.choice and plan.choice.region == "us-west-2"
    assert f"note: pinned: key pair {key} (ssh.key_name): found in us-west-2" in lines
    assert "note: --region us-west-2: only us-west-2 of the spec's regions" in lines
    assert plan.candidates and {o.region for o in plan.candidates} == {"us-west-2"}
    with pytest.raises(UsageError) as info:
        up(runtime(calls), spec_api.load(spec), yes=True, only_region="eu-west-1")
    assert "--region eu-west-1 is not among the regions" in info.value.message
    assert info.value.exit_code == 2 and calls.log == []  # refused before any call
