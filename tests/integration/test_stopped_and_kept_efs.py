"""Stopped nodes (`up` starts them, `status` shows them, `exec` names them) and kept EFS
file systems (`up` mounts the one `down` kept, `status`/`down` list it with size and
$/month, `down --delete-efs` deletes it). Against moto in server mode (real HTTP): moto
stops and starts instances at once, and reports an EFS size of its own. SSH waiting is
off (moto's nodes have no sshd)."""

from __future__ import annotations

import ast

import boto3
import pytest

from clusterkit.aws.instances import to_node
from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.ops.status import do_status
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterkitError
from tests.integration.conftest import REGION, Calls, leftovers, runtime, write_spec

RETAIN = "storage:\n  efs: {mount: /efs, deletion_policy: retain}\n"


def _by_index(cluster: str) -> dict[int, dict]:
    ec2 = boto3.client("ec2", REGION)
    res = ec2.describe_instances(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]}])
    out = {}
    for inst in (i for r in res["Reservations"] for i in r["Instances"]):
        out[to_node(inst, REGION).index] = inst  # from the launch's slots + launch index
    return out


def test_stopped_node_is_shown_named_by_exec_and_started_by_up(calls: Calls, tmp_path, capsys):
    spec = write_spec(tmp_path, name="stp", count=3)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    worker = _by_index("stp")[2]["InstanceId"]
    boto3.client("ec2", REGION).stop_instances(InstanceIds=[worker])

    rows = {r.index: r for r in do_status("stp", rt=runtime()).nodes}
    assert rows[2].state == "stopped" and rows[1].state == "running"

    with pytest.raises(ClusterkitError) as err:
        do_exec("stp", ["true"], rt=runtime())
    assert "not running: stp-worker-2 (stopped)" in err.value.message
    assert "clusterkit up" in (err.value.hint or "")
    for selector in ("worker-2", "2"):
        with pytest.raises(ClusterkitError, match=r"stp-worker-2 \(stopped\)"):
            do_exec("stp", ["true"], nodes=[selector], rt=runtime())
    with pytest.raises(ClusterkitError) as other:  # only running nodes chosen: it dials
        do_exec("stp", ["true"], nodes=["worker-1"], rt=runtime())
    assert "not running" not in other.value.message

    calls.reset()
    capsys.readouterr()
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating()["StartInstances"] == 1 and "RunInstances" not in calls.mutating()
    assert "TerminateInstances" not in calls.mutating()
    err_text = capsys.readouterr().err
    assert f"starting 1 stopped node(s): {worker}" in err_text
    assert "terminated" not in err_text
    nodes = _by_index("stp")
    assert nodes[2]["InstanceId"] == worker and nodes[2]["State"]["Name"] == "running"
    do_down("stp", yes=True, rt=runtime())
    assert leftovers("stp") == {}


def _efs_policy_resource(role: str) -> str:
    iam = boto3.client("iam")
    doc = iam.get_role_policy(RoleName=role, PolicyName="efs-client")["PolicyDocument"]
    (stmt,) = (ast.literal_eval(doc) if isinstance(doc, str) else doc)["Statement"]
    return stmt["Resource"]


def test_kept_efs_is_listed_reused_by_up_and_deleted_on_request(calls: Calls, tmp_path, capsys):
    spec = write_spec(tmp_path, name="kefs", count=1, extra=RETAIN)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    (fs_id,) = leftovers("kefs")["file_systems"]
    result = do_down("kefs", yes=True, rt=runtime())
    (kept,) = result.kept_efs
    assert kept["id"] == fs_id and kept["region"] == REGION
    assert kept["size_gb"] >= 0 and kept["usd_per_month"] == round(kept["size_gb"] * 0.30, 2)
    assert "$0.30/GB-month" in capsys.readouterr().err
    assert set(leftovers("kefs")) == {"file_systems"}
    assert [f["id"] for f in do_status("kefs", rt=runtime()).kept_efs] == [fs_id]

    # the next `up` mounts the kept file system instead of making another
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    left = leftovers("kefs")
    assert left["file_systems"] == [fs_id] and len(left["mount_targets"]) == 1
    cf = boto3.client("cloudformation", REGION)
    (stack,) = cf.describe_stacks(StackName="clusterkit-kefs")["Stacks"]
    params = {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}
    assert params["ExistingFileSystemId"] == fs_id and params["CreateEfs"] == "false"
    assert len(left["iam_roles"]) == 2  # the nodes' and the recovery controller's
    for role in left["iam_roles"]:
        assert _efs_policy_resource(role).endswith(f":file-system/{fs_id}")
    calls.reset()
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating() == {}  # idempotent with the reused file system too

    # `down` keeps it again; `--delete-efs` asks, and a "no" deletes nothing
    do_down("kefs", yes=True, rt=runtime())
    assert leftovers("kefs")["file_systems"] == [fs_id]
    with pytest.raises(ClusterkitError, match="nothing deleted") as declined:
        do_down("kefs", yes=False, delete_efs=True, rt=runtime(), confirm=lambda q: False)
    assert declined.value.exit_code == 1
    asked: list[str] = []
    do_down("kefs", yes=False, delete_efs=True, rt=runtime(),
            confirm=lambda q: asked.append(q) or True)
    assert "kept EFS" in asked[0]
    assert leftovers("kefs") == {}
