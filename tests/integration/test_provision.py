"""`up` / `down` against moto in server mode (real HTTP): gang launch, tags, the stack's
security rules, idempotency (zero mutating calls), scaling, resume, and the sweep.
SSH waiting is off here (moto's nodes have no sshd); tests/e2e does real SSH."""

from __future__ import annotations

import ast

import boto3
import pytest
from rich.console import Console

from clusterkit.aws import instances
from clusterkit.cli.provision import render_up
from clusterkit.cli.status_view import node_name as status_name
from clusterkit.cluster.ops.status import do_status
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterkitError, QuotaError, UsageError
from clusterkit.events import Event, Kind, Stage
from clusterkit.remote.selection import select
from tests import support
from tests.integration.conftest import (
    REGION,
    Calls,
    leftovers,
    live_instances,
    node_index,
    runtime,
    write_spec,
)


def _tags(resource: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def test_up_gang_launches_tags_and_is_idempotent(calls: Calls, tmp_path, capsys):
    spec = write_spec(tmp_path, name="gang", count=3)
    out = do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.by_operation()["RunInstances"] == 1  # one launch call for 3 nodes
    nodes = live_instances("gang")
    assert len(nodes) == 3 and len({n["Placement"]["AvailabilityZone"] for n in nodes}) == 1
    by_index = {node_index(n): n for n in nodes}  # the launch's slots + each launch index
    assert sorted(by_index) == [0, 1, 2]
    assert _tags(by_index[0])["clusterkit:role"] == "master"
    assert _tags(by_index[0])["Name"] == "gang-master-0"
    assert {_tags(by_index[i])["clusterkit:role"] for i in (1, 2)} == {"worker"}
    assert [n.role for n in out.nodes] == ["master", "worker", "worker"]
    vols = boto3.client("ec2", REGION).describe_volumes(
        Filters=[{"Name": "tag:clusterkit:cluster", "Values": ["gang"]}])["Volumes"]
    assert len(vols) == 3 and all(v["Encrypted"] for v in vols)
    for vol in vols:  # each root volume carries its node's identity tags
        (owner,) = [n for n in nodes if n["InstanceId"] == vol["Attachments"][0]["InstanceId"]]
        for key in ("clusterkit:cluster", "clusterkit:role", "clusterkit:slots", "Name"):
            assert _tags(vol)[key] == _tags(owner)[key], key
    render_up(Console(stderr=True, width=120), out)  # as `clusterkit up` shows it
    assert "reach it: ssh -A ubuntu@" in capsys.readouterr().err.replace("\n", " ")

    calls.reset()
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating() == {}, calls.mutating()
    assert len(live_instances("gang")) == 3
    reads = calls.by_operation()  # what the plan read is not read again to apply it
    assert {op: reads[op] for op in ("DescribeStacks", "DescribeVpcs", "DescribeImages",
                                     "DescribeKeyPairs", "DescribeInstances")} == {
        "DescribeStacks": 1, "DescribeVpcs": 1, "DescribeImages": 1, "DescribeKeyPairs": 1,
        "DescribeInstances": 1}  # the nodes found running at the start are not re-read


def test_stack_security_group_and_launch_template(calls: Calls, tmp_path):
    spec = write_spec(tmp_path, name="sec", count=1)
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    ec2 = boto3.client("ec2", REGION)
    flt = [{"Name": "tag:clusterkit:cluster", "Values": ["sec"]}]
    (group,) = ec2.describe_security_groups(Filters=flt)["SecurityGroups"]
    ssh = [p for p in group["IpPermissions"] if p.get("FromPort") == 22]
    assert [r["CidrIp"] for p in ssh for r in p["IpRanges"]] == ["127.0.0.1/32"]
    all_ranges = [r["CidrIp"] for p in group["IpPermissions"] for r in p["IpRanges"]]
    assert "0.0.0.0/0" not in all_ranges
    self_rule = [p for p in group["IpPermissions"] if p["IpProtocol"] == "-1"]
    assert self_rule[0]["UserIdGroupPairs"][0]["GroupId"] == group["GroupId"]
    (lt,) = ec2.describe_launch_templates(Filters=flt)["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(
        LaunchTemplateId=lt["LaunchTemplateId"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    (root,) = data["BlockDeviceMappings"]
    assert root["Ebs"]["Encrypted"] is True and root["Ebs"]["VolumeType"] == "gp3"
    assert data["KeyName"] == "clusterkit-sec" and "UserData" not in data
    keys = ec2.describe_key_pairs(KeyNames=["clusterkit-sec"])["KeyPairs"]
    assert _tags(keys[0]).get("clusterkit:cluster") == "sec"


def test_scale_up_then_down_keeps_az_and_type(calls: Calls, tmp_path):
    do_up(str(write_spec(tmp_path, name="sc", count=2)), yes=True, rt=runtime(calls), wait_ssh=False)
    az = {n["Placement"]["AvailabilityZone"] for n in live_instances("sc")}
    calls.reset()
    do_up(str(write_spec(tmp_path, name="sc", count=4)), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating()["RunInstances"] == 1
    nodes = live_instances("sc")
    assert sorted(node_index(n) for n in nodes) == [0, 1, 2, 3]
    assert {n["Placement"]["AvailabilityZone"] for n in nodes} == az
    assert {n["InstanceType"] for n in nodes} == {"c5.large"}
    calls.reset()
    do_up(str(write_spec(tmp_path, name="sc", count=1)), yes=True, rt=runtime(calls), wait_ssh=False)
    assert "RunInstances" not in calls.mutating()
    (left,) = live_instances("sc")
    assert node_index(left) == 0


def test_mutating_calls_of_a_first_up_do_not_grow_with_the_node_count(moto_env, tmp_path):
    """16 nodes make the same mutating calls as 2 (one RunInstances, one CreateTags per
    role), and every reader still sees each node's index, role and name."""
    made = {}
    for count in (2, 16):
        name = support.unique_name(f"n{count}")
        spec = write_spec(tmp_path, name=name, count=count)
        counted = Calls()
        do_up(str(spec), yes=True, rt=runtime(counted), wait_ssh=False)
        made[count] = counted.mutating()
        rows = do_status(name, region=REGION, rt=runtime()).nodes
        assert [(r.index, r.role) for r in rows] == \
            [(i, "master" if i == 0 else "worker") for i in range(count)]
        assert [status_name(r) for r in rows[:2]] == ["master", "worker-1"]
        nodes = instances.cluster_instances(boto3.Session(region_name=REGION), REGION, name)
        assert sorted(n.name for n in nodes) == sorted(
            f"{name}-{'master' if i == 0 else 'worker'}-{i}" for i in range(count))
        (picked,) = select(nodes, [f"{name}-worker-{count - 1}"])
        assert picked.index == count - 1
        again = Calls()
        do_up(str(spec), yes=True, rt=runtime(again), wait_ssh=False)
        assert again.mutating() == {}, again.mutating()
        do_down(str(spec), yes=True, rt=runtime())
    assert made[16] == made[2], made
    assert made[16]["RunInstances"] == 1 and made[16]["CreateTags"] == 2, made


def test_interrupted_between_launch_and_tagging_resumes_without_duplicates(calls, tmp_path):
    spec = write_spec(tmp_path, name="rs", count=3)
    calls.only, calls.fault, calls.fail_at = "CreateTags", "SIGINT", 1
    with pytest.raises(KeyboardInterrupt):
        do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert len(live_instances("rs")) == 3
    vols = boto3.client("ec2", REGION).describe_volumes(
        Filters=[{"Name": "tag:clusterkit:cluster", "Values": ["rs"]}])["Volumes"]
    # the creation tags alone (no per-node tags yet): instances and volumes alike
    for res in live_instances("rs") + vols:
        tags = _tags(res)
        assert tags["clusterkit:slots"] == "0-2" and tags["Name"] == "rs-node", tags
        assert tags["clusterkit:role"] == "pending" and "clusterkit:index" not in tags
    resumed = Calls()
    do_up(str(spec), yes=True, rt=runtime(resumed), wait_ssh=False)
    assert "RunInstances" not in resumed.mutating()
    nodes = live_instances("rs")
    assert sorted(node_index(n) for n in nodes) == [0, 1, 2]
    assert sorted(_tags(n)["clusterkit:role"] for n in nodes) == ["master", "worker", "worker"]
    assert resumed.mutating()["CreateTags"] == 2  # one per role, not one per node


def test_capacity_error_moves_to_next_candidate(calls: Calls, tmp_path, capsys):
    extra = ""
    spec = write_spec(tmp_path, name="cap", count=2, extra=extra)
    spec.write_text(spec.read_text().replace("[c5.large]", "[c5.large, m5.large]"))
    calls.only, calls.fault, calls.fail_at = "RunInstances", "InsufficientInstanceCapacity", 1
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    err = capsys.readouterr().err
    assert "launch attempt 1/" in err and "InsufficientInstanceCapacity" in err
    assert "launch attempt 2/" in err
    assert calls.by_operation()["RunInstances"] == 2
    assert len(live_instances("cap")) == 2


def test_quota_error_stops_at_once(calls: Calls, tmp_path):
    spec = write_spec(tmp_path, name="quota", count=2)
    spec.write_text(spec.read_text().replace("[c5.large]", "[c5.large, m5.large]"))
    calls.only, calls.fault, calls.fail_at = "RunInstances", "VcpuLimitExceeded", 1
    with pytest.raises(QuotaError) as err:
        do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert "quota" in (err.value.hint or "")
    assert calls.by_operation()["RunInstances"] == 1
    assert not live_instances("quota")


def test_throttled_run_instances_is_retried(calls: Calls, tmp_path):
    """The first RunInstances HTTP response is replaced by a throttling error (test
    double for AWS throttling); botocore's retry policy must send it again."""
    from botocore.awsrequest import AWSResponse

    sent: list[str] = []

    def throttle(request, **_):
        sent.append("RunInstances")
        if len(sent) > 1:
            return None
        body = (b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>"
                b"Request limit exceeded.</Message></Error></Errors></Response>")
        raw = type("Raw", (), {"stream": lambda self, **k: iter([body])})()
        return AWSResponse(request.url, 503, {}, raw)

    rt = runtime(calls)
    rt.session.events.register("before-send.ec2.RunInstances", throttle)
    do_up(str(write_spec(tmp_path, name="thr", count=2)), yes=True, rt=rt, wait_ssh=False)
    assert sent == ["RunInstances", "RunInstances"]
    assert calls.by_operation()["RunInstances"] == 1
    assert len(live_instances("thr")) == 2


def test_efs_delete_policy_mount_target_and_down(calls: Calls, tmp_path):
    extra = "storage:\n  efs: {mount: /efs, deletion_policy: delete}\n"
    spec = write_spec(tmp_path, name="fs", count=2, extra=extra)
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    left = leftovers("fs")
    assert len(left["file_systems"]) == 1 and len(left["mount_targets"]) == 1
    efs = boto3.client("efs", REGION)
    (mt,) = efs.describe_mount_targets(FileSystemId=left["file_systems"][0])["MountTargets"]
    assert mt["AvailabilityZone"if "AvailabilityZoneName" not in mt else
              "AvailabilityZoneName"] == live_instances("fs")[0]["Placement"]["AvailabilityZone"]
    # NFS from the group: the mount target sits in the nodes' own security group, whose
    # only non-SSH rule lets members of the group reach each other on every port
    node_groups = {g["GroupId"] for g in live_instances("fs")[0]["SecurityGroups"]}
    mt_groups = efs.describe_mount_target_security_groups(
        MountTargetId=mt["MountTargetId"])["SecurityGroups"]
    assert set(mt_groups) == node_groups
    # least privilege: mount + write of this one file system, through a mount target (the
    # nodes' role has nothing else; the recovery controller's has its recovery policy too)
    iam = boto3.client("iam")
    policies = {role: sorted(iam.list_role_policies(RoleName=role)["PolicyNames"])
                for role in left["iam_roles"]}
    assert sorted(policies.values()) == [["efs-client"], ["efs-client", "recovery"]]
    for role in policies:
        doc = iam.get_role_policy(RoleName=role, PolicyName="efs-client")["PolicyDocument"]
        # moto's CloudFormation stores an inline policy as the Python repr of the document
        (stmt,) = (ast.literal_eval(doc) if isinstance(doc, str) else doc)["Statement"]
        assert sorted(stmt["Action"]) == ["elasticfilesystem:ClientMount",
                                          "elasticfilesystem:ClientWrite"]
        assert stmt["Resource"].endswith(f":file-system/{left['file_systems'][0]}")
        assert stmt["Condition"] == {
            "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    _assert_profiles_made_outside_the_stack(iam, "fs", policies)
    calls.reset()
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert calls.mutating() == {}
    do_down(str(spec), yes=True, rt=runtime())
    assert leftovers("fs") == {}


def _assert_profiles_made_outside_the_stack(iam, cluster: str, roles) -> None:
    """The instance profiles `up` made through IAM's API (plan.profiles): none in the
    stack; one per role, under the cluster's path, tagged for it and its region, each
    holding one of the stack's roles; every node wears the nodes' (efs-client only)."""
    cf = boto3.client("cloudformation", REGION)
    types = {r["ResourceType"] for r in cf.list_stack_resources(
        StackName=f"clusterkit-{cluster}")["StackResourceSummaries"]}
    assert "AWS::IAM::Role" in types and "AWS::IAM::InstanceProfile" not in types
    # (moto lists every profile whatever the prefix: the path is checked here, as `up` does)
    made = [p for p in iam.list_instance_profiles(PathPrefix=f"/clusterkit/{cluster}/")[
        "InstanceProfiles"] if p["Path"] == f"/clusterkit/{cluster}/"]
    assert sorted(p["InstanceProfileName"] for p in made) == [
        f"clusterkit-{cluster}-{REGION}-controller", f"clusterkit-{cluster}-{REGION}-node"]
    assert sorted(r["RoleName"] for p in made for r in p["Roles"]) == sorted(roles)
    for p in made:
        assert _tags(iam.get_instance_profile(InstanceProfileName=p["InstanceProfileName"])[
            "InstanceProfile"]) == {"clusterkit:cluster": cluster, "clusterkit:region": REGION}
    node = next(p for p in made if p["InstanceProfileName"].endswith("-node"))
    assert {i["IamInstanceProfile"]["Arn"] for i in live_instances(cluster)} == {node["Arn"]}
    assert roles[node["Roles"][0]["RoleName"]] == ["efs-client"]


def test_efs_retain_policy_keeps_file_system(calls: Calls, tmp_path, capsys):
    extra = "storage:\n  efs: {mount: /efs, deletion_policy: retain}\n"
    spec = write_spec(tmp_path, name="keep", count=1, extra=extra)
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    do_down(str(spec), yes=True, rt=runtime())
    left = leftovers("keep")
    assert list(left) == ["file_systems"]
    assert "kept" in capsys.readouterr().err
    boto3.client("efs", REGION).delete_file_system(FileSystemId=left["file_systems"][0])


def test_down_is_safe_twice_and_sweeps_tagged_leftovers(calls: Calls, tmp_path, capsys):
    """Resources a failed stack delete could leave behind are found by tag and deleted."""
    ec2 = boto3.client("ec2", REGION)
    tags = [{"Key": "clusterkit:cluster", "Value": "orph"}]
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    ec2.create_security_group(GroupName="orph", Description="x", VpcId=vpc,
                              TagSpecifications=[{"ResourceType": "security-group",
                                                  "Tags": tags}])
    ec2.create_launch_template(LaunchTemplateName="orph", LaunchTemplateData={},
                               TagSpecifications=[{"ResourceType": "launch-template",
                                                   "Tags": tags}])
    ec2.create_volume(AvailabilityZone="us-east-1a", Size=1,
                      TagSpecifications=[{"ResourceType": "volume", "Tags": tags}])
    assert set(leftovers("orph")) == {"security_groups", "launch_templates", "volumes"}
    do_down("orph", yes=True, region=REGION, rt=runtime(calls))
    assert leftovers("orph") == {}
    assert capsys.readouterr().err.count("deleted") >= 3
    calls.reset()
    with pytest.raises(ClusterkitError, match="no cluster named orph in us-east-1") as again:
        do_down("orph", yes=True, region=REGION, rt=runtime(calls))  # nothing left anywhere
    assert again.value.exit_code == 1 and calls.mutating() == {}


def test_down_without_confirmation_deletes_nothing(calls: Calls, tmp_path):
    spec = write_spec(tmp_path, name="ask", count=1)
    do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    with pytest.raises(ClusterkitError, match="nothing deleted") as declined:
        do_down(str(spec), yes=False, rt=runtime(), confirm=lambda q: False)
    assert declined.value.exit_code == 1
    assert len(live_instances("ask")) == 1
    do_down(str(spec), yes=False, rt=runtime(), confirm=lambda q: True)
    assert leftovers("ask") == {}


def _node(iid: str, *, public: str | None = None, private: str | None = None):
    from clusterkit.plan.nodes import Node

    return Node(iid, 0, "running", "c5.large", "us-east-1a", "on-demand", "us-east-1",
                public_ip=public, private_ip=private)


def test_ssh_probe_names_the_silent_node_at_the_deadline():
    """Nothing listens on the port: the probe gives up at the deadline with the node,
    and reports every round that leaves nodes waiting (ready, total) for the progress."""
    import socket
    import time

    from clusterkit.errors import RemoteError
    from clusterkit.remote.probe import wait_reachable

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connection refused
        rounds: list[tuple[int, int]] = []
        with pytest.raises(RemoteError) as err:
            wait_reachable([_node("i-quiet", private="127.0.0.1")],
                           port=port, deadline=time.monotonic() + 0.5, interval=0.05,
                           on_round=lambda ready, total: rounds.append((ready, total)))
    assert "i-quiet" in err.value.message
    assert rounds and set(rounds) == {(0, 1)}


def test_ssh_probe_refuses_non_loopback_in_sandbox_mode(moto_env):
    """A fake emulator address is never dialled: the net guard refuses it."""
    import time

    from clusterkit.errors import RemoteError
    from clusterkit.remote.probe import wait_reachable

    with pytest.raises(RemoteError) as err:
        wait_reachable([_node("i-far", public="203.0.113.3")], port=22,
                       deadline=time.monotonic() + 0.2, interval=0.05)
    assert "sandbox mode refused" in err.value.message


def test_node_lost_before_running_terminates_the_whole_launch(calls: Calls, tmp_path):
    """One node is terminated (a real TerminateInstances to moto, standing in for a spot
    reclaim) right after the launch: `up` must not leave the other nodes running."""
    from clusterkit.errors import CapacityError

    ec2 = boto3.client("ec2", REGION)

    def reclaim(http_response, parsed, model, **_):
        ec2.terminate_instances(InstanceIds=[parsed["Instances"][-1]["InstanceId"]])

    rt = runtime(calls)
    rt.session.events.register("after-call.ec2.RunInstances", reclaim)
    with pytest.raises(CapacityError):
        do_up(str(write_spec(tmp_path, name="lost", count=3)), yes=True, rt=rt, wait_ssh=False)
    assert live_instances("lost") == []
    assert calls.mutating()["TerminateInstances"] == 1
    do_down("lost", yes=True, region=REGION, rt=runtime())
    assert leftovers("lost") == {}


def test_caller_cidr_override_and_sandbox(monkeypatch):
    """No lookup happens in either case (no network outside 127.0.0.0/8 in tests): the
    override wins, and in sandbox mode without it the net guard refuses the lookup."""
    from clusterkit.aws.identity import caller_cidr
    from clusterkit.errors import NetworkSafetyError

    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    monkeypatch.delenv("CLUSTERKIT_CALLER_CIDR", raising=False)
    with pytest.raises(NetworkSafetyError):
        caller_cidr()
    monkeypatch.setenv("CLUSTERKIT_CALLER_CIDR", "203.0.113.7")
    assert caller_cidr() == "203.0.113.7/32"
    monkeypatch.setenv("CLUSTERKIT_CALLER_CIDR", "not-an-ip")
    with pytest.raises(UsageError):
        caller_cidr()


def test_node_terminated_while_waiting_for_ssh_aborts_at_once(calls: Calls, tmp_path):
    """A node terminated (a real TerminateInstances to moto, standing in for a spot
    reclaim) once `up` waits for SSH: `up` stops long before its deadline, names the node,
    and terminates the nodes it launched. moto's nodes never answer SSH (their fake
    addresses are refused by the sandbox net guard), so only the abort can end the wait:
    the deadline would raise RemoteError, not CapacityError."""
    from clusterkit.errors import CapacityError

    ec2 = boto3.client("ec2", REGION)
    rt = runtime(calls)
    report = rt.report

    def reclaim_when_waiting(event: Event) -> None:
        report(event)
        if event.kind is Kind.STAGE_STARTED and event.stage is Stage.SSH:
            ec2.terminate_instances(InstanceIds=[live_instances("reap")[-1]["InstanceId"]])

    rt.report = reclaim_when_waiting
    with pytest.raises(CapacityError) as err:
        do_up(str(write_spec(tmp_path, name="reap", count=2)), yes=True, rt=rt, timeout=60)
    assert "while waiting for SSH" in err.value.message
    assert live_instances("reap") == []
    do_down("reap", yes=True, region=REGION, rt=runtime())
    assert leftovers("reap") == {}


def test_plan_is_read_only(calls: Calls, tmp_path):
    """`plan` of a new cluster and of an existing one makes no mutating AWS call."""
    from clusterkit.cluster.provision.planning import do_plan

    spec = str(write_spec(tmp_path, name="ro", count=2))
    data = do_plan(spec, rt=runtime(calls)).to_json()
    assert data["stack"] == "create" and data["launch_indexes"] == [0, 1]
    assert calls.log and calls.mutating() == {}
    assert leftovers("ro") == {}
    do_up(spec, yes=True, rt=runtime(), wait_ssh=False)
    calls.reset()
    data = do_plan(str(write_spec(tmp_path, name="ro", count=3)), rt=runtime(calls)).to_json()
    assert data["launch_indexes"] == [2] and calls.mutating() == {}
    do_down(spec, yes=True, rt=runtime())


def test_status_searches_every_region_of_the_spec(calls: Calls, tmp_path):
    """The cluster is found from its tags alone, in whichever allowed region it is."""
    from clusterkit.cluster.ops.status import do_status

    spec = write_spec(tmp_path, name="where", count=1)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    spec.write_text(spec.read_text().replace("region: us-east-1",
                                             "region: us-west-2\nregions: [us-east-1]"))
    result = do_status(str(spec), rt=runtime(calls))
    assert result.regions == ["us-west-2", "us-east-1"]
    (row,) = result.nodes
    assert row.region == REGION and row.role == "master" and row.launch_time
    assert calls.mutating() == {}
    do_down("where", yes=True, region=REGION, rt=runtime())


def test_spot_cluster_down_cancels_spot_requests_and_fleets(calls: Calls, tmp_path, capsys):
    """A spot cluster, plus a tagged open spot request and a tagged EC2 fleet standing
    in for what a crashed run could leave: `down` cancels and deletes them all."""
    spec = str(write_spec(tmp_path, name="spt", count=2, market="spot"))
    do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    nodes = live_instances("spt")
    assert len(nodes) == 2 and {n.get("InstanceLifecycle") for n in nodes} == {"spot"}
    ec2 = boto3.client("ec2", REGION)
    tags = [{"Key": "clusterkit:cluster", "Value": "spt"}]
    ec2.request_spot_instances(
        InstanceCount=1, LaunchSpecification={"ImageId": "ami-12c6146b",
                                              "InstanceType": "c5.large"},
        TagSpecifications=[{"ResourceType": "spot-instances-request", "Tags": tags}])
    (lt,) = ec2.describe_launch_templates(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": ["spt"]}])["LaunchTemplates"]
    fleet = ec2.create_fleet(
        Type="request", TargetCapacitySpecification={
            "TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {
            "LaunchTemplateId": lt["LaunchTemplateId"], "Version": "$Latest"},
            "Overrides": [{"InstanceType": "c5.large"}]}],
        TagSpecifications=[{"ResourceType": "fleet", "Tags": tags}])["FleetId"]
    assert {"spot_requests", "fleets"} <= set(leftovers("spt"))
    do_down(spec, yes=True, rt=runtime())
    err = capsys.readouterr().err
    assert f"deleted fleet {fleet}" in err and "deleted spot request" in err
    assert leftovers("spt") == {}


def test_a_master_set_apart_runs_on_demand_and_a_failed_worker_launch_takes_it_back(
        calls: Calls, tmp_path):
    """`nodes.master.market: on-demand` on a spot cluster: the master is launched on
    its own, on-demand, first; when the workers' launch then finds no capacity, that
    master is terminated (never half a cluster) and the next candidate gets both."""
    name = support.unique_name("mst")
    path = write_spec(tmp_path, name=name, count=3, market="spot")
    path.write_text(path.read_text().replace(
        "  market: spot\n", "  market: spot\n  master: {market: on-demand}\n"))
    calls.only, calls.fail_at, calls.fault = "RunInstances", 2, "InsufficientInstanceCapacity"
    try:
        do_up(str(path), yes=True, rt=runtime(calls), wait_ssh=False)
        nodes = {node_index(i): i for i in live_instances(name)}
        assert sorted(nodes) == [0, 1, 2]
        assert nodes[0].get("InstanceLifecycle") is None  # on-demand
        assert {nodes[i].get("InstanceLifecycle") for i in (1, 2)} == {"spot"}
        assert calls.by_operation()["RunInstances"] == 4  # master, workers x 2 candidates
        every = boto3.client("ec2", REGION).describe_instances(Filters=[
            {"Name": "tag:clusterkit:cluster", "Values": [name]}])["Reservations"]
        gone = [i for r in every for i in r["Instances"] if i["InstanceId"] not in
                {n["InstanceId"] for n in nodes.values()}]
        assert [(node_index(i), i["State"]["Name"]) for i in gone] == [(0, "terminated")]
    finally:
        do_down(str(path), yes=True, rt=runtime())
    assert leftovers(name) == {}
