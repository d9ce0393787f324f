"""The CloudFormation parameters of a cluster's stack, and whether the stack needs a
create, an update or nothing. PURE."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clusterkit.kinds import StackAction
from clusterkit.spec.model import Spec

STACK_PREFIX = "clusterkit-"
# Stack states from which an update may start; anything *_IN_PROGRESS is waited on.
STABLE_OK = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE",
                       "IMPORT_COMPLETE", "IMPORT_ROLLBACK_COMPLETE"})
# States that can only be deleted: a failed first create.
DEAD = frozenset({"ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "CREATE_FAILED", "DELETE_FAILED"})


TEMPLATE_CHANGED = "the template (this clusterkit's differs from the stack's)"


def stack_name(cluster: str) -> str:
    return f"{STACK_PREFIX}{cluster}"


def key_pair_name(cluster: str) -> str:
    """The key pair clusterkit imports when the spec names none."""
    return f"clusterkit-{cluster}"


BOUNDARY_PARAM = "NodeRoleBoundary"  # follows the service role, not the spec


@dataclass(frozen=True)
class StackRole:
    """The role CloudFormation runs the cluster's stack as: ``arn`` (None: the caller's
    own permissions) and the permissions boundary it makes the nodes' role carry ("" for
    none), passed on every create and update as the stack parameter ``NodeRoleBoundary``
    (not compared: it follows the account's role, not the spec)."""

    arn: str | None = None
    boundary: str = ""
    warning: str = ""  # why there is no role, and how to make one

    def params(self) -> dict[str, str]:
        return {BOUNDARY_PARAM: self.boundary}

    def describe(self) -> str:
        if self.arn is None:
            return "with your own permissions (no CloudFormation service role)"
        return f"as the service role {self.arn} (nodes' role boundary {self.boundary})"


@dataclass(frozen=True)
class Facts:
    """What the stack parameters depend on besides the spec, looked up from AWS."""

    vpc_id: str
    image_id: str
    root_device: str
    key_name: str
    ssh_cidr: str
    efs_id: str = ""  # a kept file system to mount instead of creating one
    # the digest of the template `up` applies (aws.stack.template_digest): a stack made
    # from another template (an older clusterkit's) is updated to this one
    template_digest: str = ""
    # which AMI and why, when the spec's packages could come from a built image (`plan`
    # shows it; plan.images.choose_built)
    image_note: str = ""


def stack_contents(spec: Spec) -> tuple[str, ...]:
    """What the cluster's stack holds for ``spec``, as `plan` and `up` name it."""
    efs = spec.storage.efs
    return ("security group", *(("placement group",) if spec.nodes.placement_group else ()),
            "launch template", "node and controller roles",
            *(("EFS file system",) if efs is not None and efs.file_system_id is None else ()))


def stack_parameters(spec: Spec, facts: Facts) -> dict[str, str]:
    efs = spec.storage.efs
    create_efs = efs is not None and efs.create
    # a kept file system instead of a new one, or yours: the nodes' role may mount it
    # (through its mount targets) and the stack outputs it as the one the nodes mount
    reuse = facts.efs_id if create_efs else (efs.file_system_id or "" if efs else "")
    return {
        "ClusterName": spec.name,
        "VpcId": facts.vpc_id,
        "ImageId": facts.image_id,
        "KeyName": facts.key_name,
        "RootDeviceName": facts.root_device,
        "RootVolumeSize": str(spec.nodes.root_volume.size_gb),
        "RootVolumeType": spec.nodes.root_volume.type,
        "UsePlacementGroup": "true" if spec.nodes.placement_group else "false",
        "SshCidr": facts.ssh_cidr,
        "SshPort": str(spec.ssh.port),
        "CreateEfs": "true" if create_efs and not reuse else "false",
        "EfsDeletionPolicy": efs.deletion_policy if efs is not None else "retain",
        "ExistingFileSystemId": reuse,
        "MetadataHopLimit": str(metadata_hop_limit(spec)),
        "KmsKeyId": spec.storage.kms_key or "",
        "TemplateDigest": facts.template_digest,
        **controller_limits(spec),
    }


def metadata_hop_limit(spec: Spec) -> int:
    """IMDSv2's hop limit: one hop more only where containers need it (their bridge is a
    hop)."""
    return 2 if spec.nodes.containers else 1


def controller_limits(spec: Spec) -> dict[str, str]:
    """What the recovery controller's role may launch (ControllerPolicy): the spec's
    instance types, and its capacity reservation (a resource group's: ``*``, any of the
    account's, as IAM names no group's members), none when the spec names none."""
    cr = spec.nodes.capacity_reservation or ""
    return {"InstanceTypes": ",".join(spec.nodes.instance_types),
            "CapacityReservations": cr if not cr or cr.startswith("cr-") else "*"}


def stack_action(status: str | None, current: Mapping[str, str] | None,
                 wanted: Mapping[str, str]) -> StackAction:
    """What the stack needs: created, recreated (a dead one), updated, or nothing."""
    if status is None or status == "DELETE_COMPLETE":
        return StackAction.CREATE
    if status in DEAD:
        return StackAction.RECREATE
    if dict(current or {}) != dict(wanted):
        return StackAction.UPDATE
    return StackAction.NONE


def changed_parameters(current: Mapping[str, str] | None,
                       wanted: Mapping[str, str]) -> list[str]:
    current = current or {}
    return [TEMPLATE_CHANGED if k == "TemplateDigest" else
            f"{k}: {current.get(k, '')!r} -> {v!r}" for k, v in wanted.items()
            if current.get(k) != v]
