"""aws.instances against the emulator over HTTP: one gang RunInstances from a launch
template, find by tag, tag, stop/start, terminate, spot requests and fleets, and the
errors AWS answers translated."""

from __future__ import annotations

import boto3
import pytest

from clusterkit.aws import instances, lookup
from clusterkit.aws.session import make_session
from clusterkit.errors import AwsError
from clusterkit.kinds import InstanceState, Market, Role
from clusterkit.plan.launch import LaunchRequest
from clusterkit.plan.nodes import launch_tags, wanted_tags
from tests import support
from tests.integration.conftest import AMI, REGION


@pytest.fixture
def template(moto_env) -> tuple[str, str, str]:
    """(cluster name, launch template id, subnet of us-east-1a)."""
    cluster = support.unique_name("inst")
    lt = boto3.client("ec2", REGION).create_launch_template(
        LaunchTemplateName=f"lt-{cluster}",
        LaunchTemplateData={"ImageId": AMI})["LaunchTemplate"]["LaunchTemplateId"]
    s = make_session(REGION)
    subnet = lookup.default_subnet(s, REGION, lookup.default_vpc(s, REGION), f"{REGION}a")
    return cluster, lt, subnet


def _launch(template, market: Market = Market.ON_DEMAND, slots=(0, 1)) -> list:
    cluster, lt, subnet = template
    tags = launch_tags(cluster, list(slots))
    request = LaunchRequest(support.offer("c5.large", market, None, az=f"{REGION}a"),
                            tuple(slots), None, support.unique_name("tok"), tags, tags)
    return instances.run_instances(make_session(REGION), REGION, request,
                                   launch_template_id=lt, subnet_id=subnet)


def test_gang_launch_gives_nodes(template):
    cluster = template[0]
    nodes = _launch(template)
    assert len(nodes) == 2
    assert {n.instance_type for n in nodes} == {"c5.large"}
    assert {n.az for n in nodes} == {f"{REGION}a"}
    assert {n.market for n in nodes} == {Market.ON_DEMAND}
    assert {n.region for n in nodes} == {REGION}
    found = instances.cluster_instances(make_session(REGION), REGION, cluster)
    assert sorted(n.instance_id for n in found) == sorted(n.instance_id for n in nodes)
    assert sorted(n.index for n in found) == [0, 1]  # from the slots tag + launch index
    assert {n.tags["clusterkit:cluster"] for n in found} == {cluster}


def test_spot_launch_is_marked_spot(template):
    nodes = _launch(template, Market.SPOT, slots=(0,))
    assert [n.market for n in nodes] == [Market.SPOT]
    back = instances.describe_nodes(make_session(REGION), REGION, [nodes[0].instance_id])
    assert [n.market for n in back] == ["spot"]  # the enum is its text


def test_tags_written_and_read_back_as_text(template):
    s = make_session(REGION)
    node = _launch(template, slots=(0,))[0]
    instances.create_tags(s, REGION, [node.instance_id], wanted_tags(template[0], 0))
    raw = boto3.client("ec2", REGION).describe_tags(Filters=[
        {"Name": "resource-id", "Values": [node.instance_id]},
        {"Name": "key", "Values": ["clusterkit:role"]}])["Tags"]
    assert [t["Value"] for t in raw] == ["master"]
    assert instances.describe_nodes(s, REGION, [node.instance_id])[0].role is Role.MASTER


def test_tagged_instances_and_states(template):
    s, cluster = make_session(REGION), template[0]
    node = _launch(template, slots=(0,))[0]
    tagged = instances.tagged_instances(s, REGION, "clusterkit:cluster")
    assert node.instance_id in {n.instance_id for n in tagged}
    boto3.client("ec2", REGION).stop_instances(InstanceIds=[node.instance_id])
    stopped = instances.cluster_instances(s, REGION, cluster)
    assert [n.state for n in stopped] == [InstanceState.STOPPED]
    instances.start_instances(s, REGION, [node.instance_id])
    assert [n.state for n in instances.cluster_instances(s, REGION, cluster)] == ["running"]
    instances.terminate_instances(s, REGION, [node.instance_id])
    assert instances.cluster_instances(s, REGION, cluster) == []  # terminated is not live
    gone = instances.cluster_instances(s, REGION, cluster, states=[InstanceState.TERMINATED])
    assert [n.instance_id for n in gone] == [node.instance_id]


def test_unknown_instance_id_reads_as_nothing_yet(moto_env):
    """InvalidInstanceID.NotFound right after a launch is eventual consistency."""
    s = make_session(REGION)
    assert instances.describe_nodes(s, REGION, ["i-0123456789abcdef0"]) == []
    assert instances.describe_nodes(s, REGION, []) == []


def test_spot_requests_and_fleets(template):
    s, cluster = make_session(REGION), template[0]
    assert instances.cluster_fleets(s, REGION, cluster) == []
    ec2 = boto3.client("ec2", REGION)
    request = ec2.request_spot_instances(
        InstanceCount=1, LaunchSpecification={"ImageId": AMI, "InstanceType": "c5.large"},
        TagSpecifications=[{"ResourceType": "spot-instances-request", "Tags": [
            {"Key": "clusterkit:cluster", "Value": cluster}]}],
    )["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
    assert instances.cluster_spot_requests(s, REGION, cluster) == [request]
    instances.cancel_spot_requests(s, REGION, [request])
    assert instances.cluster_spot_requests(s, REGION, cluster) == []


def test_launch_error_names_the_offer(template):
    cluster, _, subnet = template
    with pytest.raises(AwsError) as caught:
        tags = {"clusterkit:cluster": cluster}
        request = LaunchRequest(support.offer("c5.large", Market.ON_DEMAND, None,
                                              az=f"{REGION}a"), (0, 1), None,
                                support.unique_name("tok"), tags, tags)
        instances.run_instances(  # a subnet that does not exist: refused
            make_session(REGION), REGION, request, launch_template_id=template[1],
            subnet_id="subnet-0123456789abcdef0")
    err = caught.value
    assert err.resource == f"2 x c5.large on-demand in {REGION}a"
    assert err.message.startswith(f"RunInstances on 2 x c5.large on-demand in {REGION}a "
                                  "failed: ")
    assert err.code == "InvalidSubnetID.NotFound"
    assert instances.cluster_instances(make_session(REGION), REGION, cluster) == []


def test_console_output_is_decoded_text(template):
    """GetConsoleOutput's base64 ``Output`` comes back as text (the emulator's own sample
    boot log, since this is no sandbox node); an unknown instance is an AwsError."""
    (node,) = _launch(template, slots=(0,))
    text = instances.console_output(make_session(REGION), REGION, node.instance_id)
    assert text.startswith("Linux version") and "\n" in text
    with pytest.raises(AwsError) as caught:
        instances.console_output(make_session(REGION), REGION, "i-0123456789abcdef0")
    assert "GetConsoleOutput" in caught.value.message


def _security_group(cluster: str) -> str:
    ec2 = boto3.client("ec2", REGION)
    vpc = lookup.default_vpc(make_session(REGION), REGION)
    return ec2.create_security_group(GroupName=f"sg-{cluster}", Description="efa test",
                                     VpcId=vpc)["GroupId"]


def test_an_efa_launch_gives_each_node_every_efa_interface_and_the_master_an_elastic_ip(
        template):
    """p4d.24xlarge: 4 EFA interfaces, one per network card, in the cluster's subnet
    and security group (the emulator records them); the request passes botocore's own
    model (boto3 validates every parameter before it sends); the master, launched with
    several interfaces (no public IP from EC2), gets the cluster's Elastic IP on its
    primary interface, reused by the next `up` and released by `down`. No EFA runs
    here: only the request and what EC2 keeps of it are checked."""
    from clusterkit.aws import addresses
    from clusterkit.catalog.instances import efa_layout
    from clusterkit.catalog.instances import lookup as catalog

    cluster, lt, subnet = template
    group = _security_group(cluster)
    tags = launch_tags(cluster, [0, 1])
    request = LaunchRequest(support.offer("p4d.24xlarge", Market.ON_DEMAND, None,
                                          az=f"{REGION}a"), (0, 1), None,
                            support.unique_name("tok"), tags, tags,
                            efa=efa_layout(catalog("p4d.24xlarge")))
    assert request.public_address
    s = make_session(REGION)
    nodes = instances.run_instances(s, REGION, request, launch_template_id=lt,
                                    subnet_id=subnet, security_group=group)
    raw = boto3.client("ec2", REGION).describe_instances(
        InstanceIds=[n.instance_id for n in nodes])["Reservations"][0]["Instances"]
    for instance in raw:  # the emulator keeps one interface per device index, EC2 all 4
        enis = instance["NetworkInterfaces"]
        assert {e["Attachment"]["DeviceIndex"] for e in enis} == {0, 1}, enis
        assert {e["SubnetId"] for e in enis} == {subnet}
        assert {g["GroupId"] for e in enis for g in e["Groups"]} == {group}
    master = next(n for n in nodes if n.index == 0)
    assert master.primary_interface and master.primary_interface.startswith("eni-")
    given = addresses.attach_public_address(s, REGION, cluster, master.primary_interface,
                                            {"clusterkit:cluster": cluster})
    again = addresses.attach_public_address(s, REGION, cluster, master.primary_interface,
                                            {"clusterkit:cluster": cluster})
    assert again.allocation_id == given.allocation_id  # one per cluster, reused
    [listed] = addresses.cluster_addresses(s, REGION, cluster)
    assert listed.interface == master.primary_interface and listed.public_ip
    back = instances.describe_nodes(s, REGION, [master.instance_id])
    assert back[0].public_ip == listed.public_ip
    addresses.release_address(s, REGION, given.allocation_id)  # associated: undone first
    assert addresses.cluster_addresses(s, REGION, cluster) == []
    instances.terminate_instances(s, REGION, [n.instance_id for n in nodes])


@pytest.mark.parametrize("change, code", [
    ({"public": True}, "InvalidParameterCombination"),  # a public IP with 4 interfaces
    ({"count": 5}, "InvalidParameterValue"),  # p4d has 4 EFA interfaces
    ({"same_card": True}, "InvalidParameterValue"),  # two on card 0, device 0
    ({"template_group": True}, "InvalidParameterCombination"),  # the old template
])
def test_the_emulator_refuses_an_efa_launch_ec2_would_refuse(template, change, code):
    """The sandbox checks network interfaces as EC2 does (sandbox.ec2_gaps), so a
    launch request EC2 would refuse fails here too."""
    cluster, lt, subnet = template
    group = _security_group(cluster)
    ec2 = boto3.client("ec2", REGION)
    if change.get("template_group"):  # clusterkit's template gave its group until EFA
        lt = ec2.create_launch_template(
            LaunchTemplateName=f"lt-sg-{cluster}",
            LaunchTemplateData={"ImageId": AMI, "SecurityGroupIds": [group]},
        )["LaunchTemplate"]["LaunchTemplateId"]
    nics = [{"NetworkCardIndex": 0 if change.get("same_card") else i, "DeviceIndex": min(i, 1),
             "InterfaceType": "efa", "SubnetId": subnet, "Groups": [group]}
            for i in range(change.get("count", 4))]
    if change.get("public"):
        nics[0]["AssociatePublicIpAddress"] = True
    with pytest.raises(ec2.exceptions.ClientError) as refused:
        ec2.run_instances(MinCount=1, MaxCount=1, InstanceType="p4d.24xlarge",
                          LaunchTemplate={"LaunchTemplateId": lt, "Version": "$Latest"},
                          NetworkInterfaces=nics)
    assert refused.value.response["Error"]["Code"] == code
