"""Fill gaps in the emulator's EC2 API that clusterkit's real-AWS code paths touch.

moto implements no placement-group API, and its CloudFormation skips
AWS::EC2::PlacementGroup, so the emulator never holds a placement group. Here
DescribePlacementGroups answers truthfully (an empty list, in AWS's response shape)
instead of moto's "not yet implemented" page, so product code needs no sandbox branch.

moto also launches whatever network interfaces it is given (keeping one per device
index). RunInstances here first checks them as EC2 does, so a launch request that EC2
would refuse fails here too: security groups on the launch template or the request
beside network interfaces, a public IP asked for with several interfaces, two
interfaces on one card and device index, a card the type does not have, EFA on a type
without it or more EFA interfaces than the type supports (the type's NetworkInfo, from
the DescribeInstanceTypes data moto ships).

moto's CloudFormation skips AWS::EC2::SecurityGroupEgress (a warning, no rule); the
stack's egress rule to its own group (EFA's "all traffic out to itself") is made here.

moto deletes a security group that an EFS mount target (its network interface) still
uses; EC2 refuses it (DependencyViolation) until the target is deleted or the group taken
off it, so a `down` that left a mount target in the cluster's group fails here as there.

moto's ReplaceIamInstanceProfileAssociation changes the association only: the instance
still shows the profile it had in DescribeInstances (``IamInstanceProfile``), where EC2
shows the new one (`down` reads it to find a master that runs a recovery controller).
"""

from __future__ import annotations

from typing import Any


def _describe_placement_groups(self: Any) -> Any:
    from moto.core.responses import ActionResult

    return ActionResult({"PlacementGroups": []})


def _template_groups(self: Any) -> list[str]:
    """The security groups the request's launch template gives (its version asked)."""
    spec = self._get_param("LaunchTemplate", {}) or {}
    ident = spec.get("LaunchTemplateId")
    if not ident:
        return []
    try:
        template = self.ec2_backend.get_launch_template(ident)
    except Exception:  # noqa: BLE001 (moto answers an unknown template itself)
        return []
    data = template.latest_version().data
    return list(data.get("SecurityGroupIds") or []) + list(data.get("SecurityGroups") or [])


def _interface_problem(nics: list[dict[str, Any]], instance_type: str) -> str | None:
    """What EC2 refuses in a launch's network interfaces (EFA's rules), else None."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    if len(nics) > 1 and any(str(n.get("AssociatePublicIpAddress")).lower() == "true"
                             for n in nics):
        return ("The associatePublicIPAddress parameter cannot be specified when launching "
                "with multiple network interfaces.")
    places = [(int(n.get("NetworkCardIndex") or 0), int(n.get("DeviceIndex") or 0))
              for n in nics]
    if len(set(places)) != len(places):
        return "Each network interface requires a unique network card and device index."
    net = (INSTANCE_TYPES.get(instance_type) or {}).get("NetworkInfo") or {}
    cards = int(net.get("MaximumNetworkCards") or 1)
    if any(card >= cards for card, _ in places):
        return f"{instance_type} has {cards} network card(s)."
    efa = [n for n in nics if n.get("InterfaceType") in ("efa", "efa-only")]
    most = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
    if len(efa) > most:
        return f"{instance_type} supports {most} EFA interface(s), not {len(efa)}."
    return None


def _checked_run_instances(original: Any) -> Any:
    def run_instances(self: Any) -> Any:
        from moto.ec2.exceptions import InvalidParameterCombination, InvalidParameterValue

        nics = self._get_param("NetworkInterfaces", []) or []
        if nics and (self._get_param("SecurityGroupIds", []) or _template_groups(self)):
            raise InvalidParameterCombination("Network interfaces and an instance-level "
                                              "security groups may not be specified on "
                                              "the same request")
        problem = _interface_problem(nics, self._get_param("InstanceType", "m1.small"))
        if problem is not None:
            raise (InvalidParameterCombination if "associatePublic" in problem
                   else InvalidParameterValue)(problem)
        return original(self)

    run_instances.checks_interfaces = True  # type: ignore[attr-defined]
    return run_instances


def _egress_model() -> Any:
    """A CloudFormation model of AWS::EC2::SecurityGroupEgress for moto's stacks: its
    rule authorized on the group (a destination group, or a CIDR)."""
    from moto.core.common_models import CloudFormationModel

    class SecurityGroupEgress(CloudFormationModel):
        def __init__(self, group_id: str) -> None:
            self.group_id = group_id

        @staticmethod
        def cloudformation_name_type() -> str:
            return ""

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::EC2::SecurityGroupEgress"

        @classmethod
        def create_from_cloudformation_json(cls, resource_name: str, cloudformation_json: Any,
                                            account_id: str, region_name: str,
                                            **kwargs: Any) -> Any:
            from moto.ec2.models import ec2_backends

            props = cloudformation_json["Properties"]
            destination = props.get("DestinationSecurityGroupId")
            ec2_backends[account_id][region_name].authorize_security_group_egress(
                group_name_or_id=props["GroupId"], ip_protocol=str(props["IpProtocol"]),
                from_port=props.get("FromPort"), to_port=props.get("ToPort"),
                ip_ranges=[{"CidrIp": props["CidrIp"]}] if props.get("CidrIp") else [],
                source_groups=[{"GroupId": destination}] if destination else [])
            return cls(props["GroupId"])

    return SecurityGroupEgress


def _replacing(original: Any) -> Any:
    def replace_iam_instance_profile_association(self: Any, association_id: str,
                                                 *args: Any, **kwargs: Any) -> Any:
        association = original(self, association_id, *args, **kwargs)
        self.modify_instance_attribute(association.instance_id, "iam_instance_profile", {
            "Arn": association.iam_instance_profile.arn, "Id": association_id})
        return association

    replace_iam_instance_profile_association.shows_on_instance = True  # type: ignore[attr-defined]
    return replace_iam_instance_profile_association


def _group_in_use(original: Any) -> Any:
    def delete_security_group(self: Any, name: str | None = None,
                              group_id: str | None = None) -> None:
        from moto.ec2.exceptions import DependencyViolationError
        from moto.efs.models import efs_backends

        efs = efs_backends[self.account_id][self.region_name]
        group = group_id or getattr(self.get_security_group_by_name_or_id(name), "id", None)
        users = [mt.mount_target_id for mt in efs.mount_targets_by_id.values()
                 if group and group in (mt.security_groups or ())]
        if users:
            raise DependencyViolationError(
                f"resource {group} has a dependent object (EFS mount target {users[0]})")
        return original(self, name=name, group_id=group_id)

    delete_security_group.refuses_in_use = True  # type: ignore[attr-defined]
    return delete_security_group


def _install_egress() -> None:
    from moto.cloudformation import parsing

    if "AWS::EC2::SecurityGroupEgress" not in parsing.get_model_map():
        _egress_model()
        parsing.get_model_list.cache_clear()
        parsing.get_model_map.cache_clear()
        parsing.get_name_type_map.cache_clear()


def install() -> None:
    """Idempotent: patch moto's EC2 responses in this process."""
    from moto.ec2.models.iam_instance_profile import IamInstanceProfileAssociationBackend as B
    from moto.ec2.models.security_groups import SecurityGroupBackend
    from moto.ec2.responses import EC2Response

    if not getattr(B.replace_iam_instance_profile_association, "shows_on_instance", False):
        B.replace_iam_instance_profile_association = _replacing(
            B.replace_iam_instance_profile_association)
    if not hasattr(EC2Response, "describe_placement_groups"):
        EC2Response.describe_placement_groups = _describe_placement_groups
    if not getattr(EC2Response.run_instances, "checks_interfaces", False):
        EC2Response.run_instances = _checked_run_instances(EC2Response.run_instances)
    if not getattr(SecurityGroupBackend.delete_security_group, "refuses_in_use", False):
        SecurityGroupBackend.delete_security_group = _group_in_use(
            SecurityGroupBackend.delete_security_group)
    _install_egress()
