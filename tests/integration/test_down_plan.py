"""`down` applies the plan it showed: a node launched or terminated by another hand while
the user read the question stops it with nothing deleted; with --yes nothing is read
between the plan and the apply. Against moto in server mode (conftest)."""

from __future__ import annotations

import json
from collections import Counter

import boto3
import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.spec import load
from tests.integration.conftest import (
    AMI,
    CLUSTER_TAG,
    REGION,
    Calls,
    leftovers,
    runtime,
    write_spec,
)


def _launch_by_another_hand(cluster: str) -> str:
    """A node of ``cluster`` launched outside this `down` (another `up`, another machine)."""
    ec2 = boto3.client("ec2", REGION)
    (inst,) = ec2.run_instances(ImageId=AMI, InstanceType="c5.large", MinCount=1, MaxCount=1,
                                TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                    {"Key": CLUSTER_TAG, "Value": cluster}]}])["Instances"]
    return inst["InstanceId"]


def _stopped_with_nothing_deleted(calls: Calls, cluster: str, change) -> tuple[str, dict]:
    """`down` asked, ``change()`` (the other hand) ran while it waited for the answer;
    the error's text, and the cluster's resources as they were before the `down`."""
    before = leftovers(cluster)
    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        change()
        return True

    calls.reset()
    with pytest.raises(ClusterkitError) as stopped:
        do_down(cluster, yes=False, rt=runtime(calls), confirm=confirm)
    assert asked and stopped.value.exit_code == 1
    assert calls.mutating() == {}, calls.mutating()
    assert f"clusterkit down {cluster}` again" in (stopped.value.hint or "")
    return stopped.value.message, before


def test_a_node_launched_after_the_plan_was_shown_stops_down(calls: Calls, tmp_path):
    spec = write_spec(tmp_path, name="dpnew", count=2)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    new: list[str] = []
    message, before = _stopped_with_nothing_deleted(
        calls, "dpnew", lambda: new.append(_launch_by_another_hand("dpnew")))
    assert "changed since the plan was shown, so nothing was deleted" in message
    assert f"instance {new[0]} in {REGION} appeared" in message
    after = leftovers("dpnew")
    assert sorted(after.pop("instances")) == sorted(before.pop("instances") + new)
    assert after == before  # every other resource untouched
    do_down("dpnew", yes=True, rt=runtime())  # shown again, the new node with it
    assert leftovers("dpnew") == {}


def test_a_node_gone_after_the_plan_was_shown_stops_down(calls: Calls, tmp_path):
    spec = write_spec(tmp_path, name="dpgone", count=2)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    victim = sorted(leftovers("dpgone")["instances"])[0]
    message, before = _stopped_with_nothing_deleted(
        calls, "dpgone",
        lambda: boto3.client("ec2", REGION).terminate_instances(InstanceIds=[victim]))
    assert f"instance {victim} in {REGION} is gone" in message
    after = leftovers("dpgone")
    assert set(after.pop("instances")) == set(before.pop("instances")) - {victim}
    assert after.keys() == before.keys()
    do_down("dpgone", yes=True, rt=runtime())
    assert leftovers("dpgone") == {}


def _down_reads(tmp_path, name: str, **options) -> Counter[str]:
    do_up(str(write_spec(tmp_path, name=name, count=2)), yes=True, rt=runtime(),
          wait_ssh=False)
    counted = Calls()
    do_down(name, rt=runtime(counted), **options)
    assert leftovers(name) == {}
    return counted.by_operation()


def test_with_yes_nothing_is_read_between_the_plan_and_the_apply(moto_env, tmp_path):
    """The asked `down` reads the instances once more than the --yes one (after the
    answer); every other call is the same."""
    with_yes = _down_reads(tmp_path, "dpyes", yes=True)
    asked = _down_reads(tmp_path, "dpask", yes=False, confirm=lambda q: True)
    assert asked - with_yes == Counter({"DescribeInstances": 1}), (asked, with_yes)
    assert with_yes - asked == Counter()


def test_iam_is_cleaned_in_the_clusters_region_when_no_region_is_set(calls: Calls, tmp_path,
                                                                      monkeypatch):
    """Only AWS_ENDPOINT_URL set (no AWS_REGION, no AWS_DEFAULT_REGION, no --region): the
    session has no region, so the IAM calls are signed for the cluster's, from its record."""
    spec = write_spec(tmp_path, count=1)
    name = spec.name.rsplit("-", 1)[0]
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    session = boto3.Session()
    assert session.region_name is None
    signed: list[str] = []
    session.events.register("before-call.iam", lambda request_signer=None, **_: signed.append(
        request_signer._region_name))
    do_down(name, yes=True, rt=Runtime(session=session, report=lambda _: None, poll=0.05))
    assert signed and set(signed) == {REGION}
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)  # for the test's own IAM listing
    assert leftovers(name) == {}


def test_a_saved_down_plan_deletes_exactly_it_and_refuses_a_changed_cluster(calls: Calls,
                                                                             tmp_path):
    """`down NAME --out` saves the plan and deletes nothing; `down --plan` refuses a
    cluster grown since (exit 1, the new node named, nothing deleted) and a plan of
    another clusterkit version (exit 2, before any call); a fresh plan applies as saved,
    without asking."""
    spec = write_spec(tmp_path, count=1)
    do_up(str(spec), yes=True, rt=runtime(None), wait_ssh=False)
    cluster = load(str(spec)).name
    out = str(tmp_path / "down.json")
    calls.reset()
    do_down(cluster, yes=False, rt=runtime(calls), out=out)
    assert calls.mutating() == {} and leftovers(cluster)
    intruder = _launch_by_another_hand(cluster)
    with pytest.raises(ClusterkitError) as grown:
        do_down(None, yes=False, rt=runtime(calls), plan_file=out)
    assert grown.value.exit_code == 1 and f"{intruder} is new" in grown.value.message
    assert calls.mutating() == {}
    saved = json.loads((tmp_path / "down.json").read_text())
    (tmp_path / "old.json").write_text(json.dumps({**saved, "clusterkit": "0.0.1"}))
    calls.reset()
    with pytest.raises(ClusterkitError, match="written by clusterkit 0.0.1") as old:
        do_down(None, yes=False, rt=runtime(calls), plan_file=str(tmp_path / "old.json"))
    assert old.value.exit_code == 2 and calls.log == []
    do_down(cluster, yes=False, rt=runtime(None), out=out)  # the plan made again
    result = do_down(None, yes=False, rt=runtime(None), plan_file=out)  # no question
    assert intruder in str(result.deleted) and leftovers(cluster) == {}
