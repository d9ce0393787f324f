"""plan.stack: stack parameters from the spec, and create/update/none decisions."""

from __future__ import annotations

from clusterkit.plan.stack import (
    Facts,
    changed_parameters,
    key_pair_name,
    stack_action,
    stack_name,
    stack_parameters,
)
from clusterkit.spec import loads

FACTS = Facts(vpc_id="vpc-1", image_id="ami-1", root_device="/dev/sda1", key_name="k",
              ssh_cidr="203.0.113.7/32")
SPEC = """
name: train
region: us-east-1
nodes: {count: 2, instance_types: [p4d.24xlarge], root_volume: {size_gb: 300, type: gp3}}
"""


def test_parameters_follow_the_spec():
    params = stack_parameters(loads(SPEC), FACTS)
    assert params["ClusterName"] == "train" and params["SshCidr"] == "203.0.113.7/32"
    assert params["RootVolumeSize"] == "300" and params["UsePlacementGroup"] == "true"
    assert params["CreateEfs"] == "false"
    assert all(isinstance(v, str) for v in params.values())


def test_efs_parameters():
    spec = loads(SPEC + "storage:\n  efs: {deletion_policy: delete}\n")
    params = stack_parameters(spec, FACTS)
    assert params["CreateEfs"] == "true" and params["EfsDeletionPolicy"] == "delete"
    existing = loads(SPEC + "storage:\n  efs: {file_system_id: fs-12345678}\n")
    assert stack_parameters(existing, FACTS)["CreateEfs"] == "false"


def test_stack_action():
    want = {"A": "1"}
    assert stack_action(None, None, want) == "create"
    assert stack_action("ROLLBACK_COMPLETE", want, want) == "recreate"
    assert stack_action("CREATE_COMPLETE", {"A": "2"}, want) == "update"
    assert stack_action("UPDATE_COMPLETE", {"A": "1"}, want) == "none"
    assert changed_parameters({"A": "2"}, want) == ["A: '2' -> '1'"]


def test_names():
    assert stack_name("x") == "clusterkit-x" and key_pair_name("x") == "clusterkit-x"


def test_hop_limit_is_one_unless_the_nodes_run_containers():
    assert stack_parameters(loads(SPEC), FACTS)["MetadataHopLimit"] == "1"
    spec = loads(SPEC.replace("count: 2,", "count: 2, containers: true,"))
    assert stack_parameters(spec, FACTS)["MetadataHopLimit"] == "2"


def test_kms_key_reaches_the_stack():
    assert stack_parameters(loads(SPEC), FACTS)["KmsKeyId"] == ""
    spec = loads(SPEC + "storage:\n  kms_key: alias/clusterkit\n  efs: {}\n")
    assert stack_parameters(spec, FACTS)["KmsKeyId"] == "alias/clusterkit"


def test_every_parameter_is_one_the_template_declares():
    import yaml

    from clusterkit.aws.stack import template_body

    class Loader(yaml.SafeLoader):  # CloudFormation's short forms (!Ref, !If) as None
        pass
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    declared = yaml.load(template_body(), Loader=Loader)["Parameters"]
    params = stack_parameters(loads(SPEC + "storage:\n  efs: {}\n"), FACTS)
    assert set(params) <= set(declared)
    hop = declared["MetadataHopLimit"]
    assert hop["Default"] == 1 and hop["AllowedValues"] == [1, 2]


def test_a_stack_from_another_template_is_updated_to_this_one():
    """An older clusterkit's stack (its launch template gave the security group, it had
    no egress rule to itself) has no TemplateDigest, or another: `up` updates it, and
    the plan says why in words, not as a digest."""
    from dataclasses import replace

    from clusterkit.aws.stack import template_digest
    from clusterkit.plan.stack import TEMPLATE_CHANGED

    facts = replace(FACTS, template_digest=template_digest())
    wanted = stack_parameters(loads(SPEC), facts)
    assert len(wanted["TemplateDigest"]) == 16
    older = {k: v for k, v in wanted.items() if k != "TemplateDigest"}
    assert stack_action("CREATE_COMPLETE", older, wanted) == "update"
    assert changed_parameters(older, wanted) == [TEMPLATE_CHANGED]
    assert stack_action("UPDATE_COMPLETE", dict(wanted), wanted) == "none"


def test_the_controllers_launch_limits_reach_the_stack():
    """The recovery controller's role may launch the spec's instance types only, into
    the spec's reservation only (a resource group's: `*`, any of the account's), and
    into none when the spec names none (ControllerPolicy's LaunchInstances, LaunchWith)."""
    params = stack_parameters(loads(SPEC), FACTS)
    assert params["InstanceTypes"] == "p4d.24xlarge" and params["CapacityReservations"] == ""
    two = loads(SPEC.replace("[p4d.24xlarge]", "[p4d.24xlarge, p5.48xlarge], "
                             "capacity_reservation: cr-0123456789abcdef0"))
    params = stack_parameters(two, FACTS)
    assert params["InstanceTypes"] == "p4d.24xlarge,p5.48xlarge"
    assert params["CapacityReservations"] == "cr-0123456789abcdef0"
    group = "arn:aws:resource-groups:us-east-1:123456789012:group/ck-odcrs"
    grouped = loads(SPEC.replace("[p4d.24xlarge]", f"[p4d.24xlarge], capacity_reservation: "
                                 f"'{group}'"))
    assert stack_parameters(grouped, FACTS)["CapacityReservations"] == "*"
