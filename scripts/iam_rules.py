"""What scripts/iam_policy.py narrows each action to: one rule per statement (resource
ARNs and the condition AWS supports for those actions), for the user and for the
CloudFormation service role. A needed write action no rule names fails the script."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterkit.aws.servicerole import BOUNDARY_NAME, ROLE_NAME, SERVICE_PATH  # noqa: E402
from clusterkit.plan.blocks import BLOCK_TAG  # noqa: E402
from clusterkit.plan.dataset import DATASET_TAG, UPLOAD_TAG  # noqa: E402
from clusterkit.plan.images import DIGEST_TAG as IMAGE_TAG  # noqa: E402
from clusterkit.plan.mounts import LEND_TAG  # noqa: E402
from clusterkit.plan.nodes import CLUSTER_TAG as TAG  # noqa: E402
from clusterkit.plan.stack import STACK_PREFIX  # noqa: E402

READ_PREFIXES = ("Describe", "List", "Get")
# Reads of data, not of metadata: only on what clusterkit made.
DATA_READS = frozenset({"ebs:GetSnapshotBlock", "ebs:ListSnapshotBlocks",
                        "ebs:ListChangedBlocks", "ec2:GetConsoleOutput"})
# Actions a handler of the template's types lists that the service role must not have:
# removing a boundary would lift the ceiling on what the stack's roles can do; the
# template's AWS::IAM::Policy names roles only, never a user or a group; a role's trust
# policy is rewritten only when the template's AssumeRolePolicyDocument changes, and the
# template's are constant (a test holds them so), while with it any stack the service
# role runs could let another account assume any cluster's roles.
WITHHELD = frozenset({"iam:DeleteRolePermissionsBoundary", "iam:PutUserPolicy",
                      "iam:PutGroupPolicy", "iam:DeleteUserPolicy", "iam:DeleteGroupPolicy",
                      "iam:UpdateAssumeRolePolicy"})

BOUNDARY_ARN = f"arn:aws:iam::*:policy{SERVICE_PATH}{BOUNDARY_NAME}"
SERVICE_ROLE_ARN = f"arn:aws:iam::*:role{SERVICE_PATH}{ROLE_NAME}"
NODE_ROLES = "arn:aws:iam::*:role/clusterkit/*"
NODE_PROFILES = "arn:aws:iam::*:instance-profile/clusterkit/*"
STACKS = f"arn:aws:cloudformation:*:*:stack/{STACK_PREFIX}*/*"
FILE_SYSTEMS = "arn:aws:elasticfilesystem:*:*:file-system/*"
KEYS = "arn:aws:kms:*:*:key/*"
# The snapshot a request creates: IAM writes its id as a literal "*", which only the
# policy variable ${*} matches; a source snapshot has its own id (CopySnapshot is
# authorized on both, AWS's EBS guide: "Example: Copying snapshots").
NEW_SNAPSHOT = "arn:aws:ec2:*::snapshot/${*}"


def ec2(*kinds: str) -> list[str]:
    """EC2 resource ARN patterns (snapshots and images have no account field)."""
    return [f"arn:aws:ec2:*::{k}/*" if k in ("snapshot", "image") else f"arn:aws:ec2:*:*:{k}/*"
            for k in kinds]


def has(key: str, tag: str = TAG) -> dict:
    """The resource (``aws:ResourceTag``) or the request (``aws:RequestTag``) carries ``tag``."""
    return {"Null": {f"aws:{key}/{tag}": "false"}}


def equals(key: str, *values: str, op: str = "StringEquals") -> dict:
    return {op: {key: values[0] if len(values) == 1 else list(values)}}


OWN = has("ResourceTag")
NEW = has("RequestTag")
# (sid, actions, resources, condition): a statement, kept with the actions the policy needs.
Rule = tuple[str, tuple[str, ...], list[str], dict | None]

USER_RULES: tuple[Rule, ...] = (
    ("Stacks", ("cloudformation:CreateStack", "cloudformation:UpdateStack",
                "cloudformation:DeleteStack"), [STACKS], None),
    ("PassServiceRole", ("iam:PassRole",), [SERVICE_ROLE_ARN],
     equals("iam:PassedToService", "cloudformation.amazonaws.com")),
    ("PassNodeRole", ("iam:PassRole",), [NODE_ROLES],
     equals("iam:PassedToService", "ec2.amazonaws.com")),
    ("SpotServiceLinkedRole", ("iam:CreateServiceLinkedRole",),
     ["arn:aws:iam::*:role/aws-service-role/spot.amazonaws.com/*"],
     equals("iam:AWSServiceName", "spot.amazonaws.com")),
    # what clusterkit creates carries the cluster's tag from its creation on: a launch's
    # network interfaces and spot requests too (new ones: an existing interface has no
    # request tag), and the cluster's instance profiles (plan.profiles), under
    # clusterkit's IAM path only. (One statement: the policy's size limit.)
    ("NewTagged", ("ec2:RunInstances", "ec2:CreateVolume", "ec2:ImportKeyPair",
                   "ec2:AllocateAddress", "iam:CreateInstanceProfile",
                   "iam:TagInstanceProfile"),
     [*ec2("instance", "volume", "network-interface", "spot-instances-request", "key-pair",
           "elastic-ip"), NODE_PROFILES], NEW),
    # the rest of a launch; its security group, placement group and launch template are
    # the cluster's (ClusterResources)
    ("LaunchWith", ("ec2:RunInstances",),
     ec2("image", "snapshot", "subnet", "key-pair", "capacity-reservation"), None),
    # a Capacity Block bought (`capacity-blocks --buy`) is tagged at purchase as clusterkit's
    ("CapacityBlocks", ("ec2:PurchaseCapacityBlock",), ec2("capacity-reservation"),
     has("RequestTag", BLOCK_TAG)),
    ("TagOnCreate", ("ec2:CreateTags",), ["*"],
     equals("ec2:CreateAction", "RunInstances", "CreateVolume", "CreateSnapshot",
            "CopySnapshot", "ImportKeyPair", "AllocateAddress", "PurchaseCapacityBlock",
            "CreateImage")),
    # `image build`: the image and its snapshot tagged as clusterkit's at creation (of
    # the builder, a cluster's instance: ClusterResources); only those deleted
    ("NewImages", ("ec2:CreateImage",), [*ec2("image"), NEW_SNAPSHOT],
     has("RequestTag", IMAGE_TAG)),
    ("OwnImages", ("ec2:DeregisterImage", "ec2:DeleteSnapshot"), ec2("image", "snapshot"),
     has("ResourceTag", IMAGE_TAG)),

    # Whatever carries the cluster's tag, of any type: only clusterkit's calls put it on
    # anything (NewTagged, TagOnCreate, the stack), so naming the types would narrow
    # nothing (and the policy's size limit needs the room). RunInstances here: from the
    # cluster's own launch template, into its own security and placement groups.
    ("ClusterResources", ("ec2:RunInstances", "ec2:CreateTags", "ec2:AttachVolume",
                          "ec2:DetachVolume",
                          "ec2:DeleteVolume", "ec2:ModifyInstanceAttribute",
                          "ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances",
                          "ec2:CancelSpotInstanceRequests", "ec2:DeleteFleets",
                          "ec2:DeleteKeyPair", "ec2:DeleteLaunchTemplate",
                          "ec2:DeletePlacementGroup", "ec2:DeleteSecurityGroup",
                          "ec2:CreateSnapshot", "ec2:GetConsoleOutput", "ec2:CreateImage",
                          "ec2:AssociateIamInstanceProfile",
                          "ec2:ReplaceIamInstanceProfileAssociation",
                          # the master's Elastic IP, on its primary interface (EFA types)
                          "ec2:AssociateAddress", "ec2:DisassociateAddress",
                          "ec2:ReleaseAddress",
                          # the cluster's instance profiles: only clusterkit tags one
                          # (NewTagged: under its path). A profile grants nothing; the
                          # role put in it is one the user may pass (PassNodeRole).
                          "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
                          "iam:DeleteInstanceProfile"), ["*"], OWN),
    # A standby swapped in loses its standby tag, and no other tag.
    ("SwapStandby", ("ec2:DeleteTags",), ec2("instance", "volume"),
     {**OWN, "ForAllValues:StringEquals": {"aws:TagKeys": ["clusterkit:standby-for"]}}),
    ("SharedSnapshotVolumes", ("ec2:CreateVolume",), ec2("snapshot"),
     equals("ec2:Owner", "${aws:PrincipalAccount}", op="StringNotEquals")),
    # an upload started on no parent snapshot (whose blocks it would hold, readable)
    ("NewDatasetSnapshots", ("ec2:CreateSnapshot", "ebs:StartSnapshot"), ec2("snapshot"),
     {"Null": {f"aws:RequestTag/{UPLOAD_TAG}": "false", "ebs:ParentSnapshot": "true"}}),
    # the copy CopySnapshot makes; its source is an upload (DatasetUploads)
    ("DatasetCopies", ("ec2:CopySnapshot",), [NEW_SNAPSHOT], has("RequestTag", UPLOAD_TAG)),
    ("DatasetUploads", ("ebs:PutSnapshotBlock", "ebs:CompleteSnapshot", "ec2:CreateTags",
                        "ec2:DeleteSnapshot", "ec2:CopySnapshot", "ebs:GetSnapshotBlock",
                        "ebs:ListSnapshotBlocks"), ec2("snapshot"),
     has("ResourceTag", UPLOAD_TAG)),
    # read, or cloned into volumes (one statement: the policy's size limit)
    ("DatasetReads", ("ebs:GetSnapshotBlock", "ebs:ListSnapshotBlocks", "ec2:CreateVolume"),
     ec2("snapshot"), has("ResourceTag", DATASET_TAG)),
    ("ClusterFileSystems", ("elasticfilesystem:CreateMountTarget",
                            "elasticfilesystem:DeleteMountTarget",
                            "elasticfilesystem:DeleteFileSystem"), [FILE_SYSTEMS], OWN),
    # a file system of yours (storage.efs.file_system_id) that you tagged clusterkit:lend=
    # true: its mount target in the nodes' AZ lent to a cluster (the cluster's security
    # group added, taken off by `down`), or one made there and deleted by `down`
    ("LentFileSystems", ("elasticfilesystem:CreateMountTarget",
                         "elasticfilesystem:DeleteMountTarget",
                         "elasticfilesystem:ModifyMountTargetSecurityGroups"), [FILE_SYSTEMS],
     equals(f"aws:ResourceTag/{LEND_TAG}", "true")),
    # EFS makes, changes and deletes a mount target's network interface, checking the
    # caller's permission through a forward access session (aws:ViaAWSService); its
    # interfaces carry no tag. Never called directly: only through the mount target calls
    # ClusterFileSystems and LentFileSystems allow.
    ("MountTargetInterfaces", ("ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
                               "ec2:ModifyNetworkInterfaceAttribute"),
     ["*"], {"Bool": {"aws:ViaAWSService": "true"}}),
    ("EncryptedVolumes", ("kms:CreateGrant", "kms:Decrypt", "kms:ReEncryptFrom",
                          "kms:ReEncryptTo", "kms:GenerateDataKeyWithoutPlaintext"), [KEYS],
     equals("kms:ViaService", "ec2.*.amazonaws.com", "ebs.*.amazonaws.com", op="StringLike")),
)
# Needed without a call of its own: AssociateIamInstanceProfile passes the node role
# (iam:PassRole), CreateInstanceProfile with tags tags it (iam:TagInstanceProfile), the first spot launch of an account creates EC2's spot service-linked role,
# EFS checks the caller may create and delete mount target interfaces, EBS encryption with
# a customer-managed key uses it as the caller.
USER_EXTRA = frozenset({
    "iam:PassRole", "iam:CreateServiceLinkedRole", "iam:GetRole", "iam:TagInstanceProfile",
    "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
    "ec2:ModifyNetworkInterfaceAttribute", "ec2:DescribeNetworkInterfaces", "kms:DescribeKey", "kms:CreateGrant", "kms:Decrypt",
    "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKeyWithoutPlaintext"})

SERVICE_RULES: tuple[Rule, ...] = (
    ("NewSecurityGroups", ("ec2:CreateSecurityGroup",), ec2("security-group"), NEW),
    ("InVpcs", ("ec2:CreateSecurityGroup",), ec2("vpc"), None),
    ("NewRules", ("ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress"),
     ec2("security-group-rule"), None),
    ("NewPlacementAndTemplates", ("ec2:CreatePlacementGroup", "ec2:CreateLaunchTemplate"),
     ec2("placement-group", "launch-template"), NEW),
    ("TagOnCreate", ("ec2:CreateTags",), ["*"],
     equals("ec2:CreateAction", "CreateSecurityGroup", "CreatePlacementGroup",
            "CreateLaunchTemplate", "CreateLaunchTemplateVersion")),
    ("ClusterResources", ("ec2:AuthorizeSecurityGroupIngress",
                          "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress",
                          "ec2:RevokeSecurityGroupEgress",
                          "ec2:UpdateSecurityGroupRuleDescriptionsIngress",
                          "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
                          "ec2:DeleteSecurityGroup", "ec2:CreateTags", "ec2:DeleteTags",
                          "ec2:DeletePlacementGroup", "ec2:CreateLaunchTemplateVersion",
                          "ec2:ModifyLaunchTemplate", "ec2:DeleteLaunchTemplate"),
     ec2("security-group", "placement-group", "launch-template"), OWN),
    # A role it creates or gives a policy is capped by the boundary (the node policy).
    ("BoundedRoles", ("iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy",
                      "iam:PutRolePermissionsBoundary"), [NODE_ROLES],
     equals("iam:PermissionsBoundary", BOUNDARY_ARN, op="StringLike")),
    ("NodeRoles", ("iam:DeleteRole", "iam:UpdateRole", "iam:UpdateRoleDescription",
                   "iam:DeleteRolePolicy", "iam:DetachRolePolicy", "iam:TagRole",
                   "iam:UntagRole"), [NODE_ROLES], None),
    ("PassNodeRole", ("iam:PassRole",), [NODE_ROLES],
     equals("iam:PassedToService", "ec2.amazonaws.com")),
    ("NodeProfiles", ("iam:CreateInstanceProfile", "iam:DeleteInstanceProfile",
                      "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
                      "iam:TagInstanceProfile"), [NODE_PROFILES], None),
    ("EfsServiceLinkedRole", ("iam:CreateServiceLinkedRole",),
     ["arn:aws:iam::*:role/aws-service-role/elasticfilesystem.amazonaws.com/*"],
     equals("iam:AWSServiceName", "elasticfilesystem.amazonaws.com")),
    ("NewFileSystems", ("elasticfilesystem:CreateFileSystem", "elasticfilesystem:TagResource"),
     [FILE_SYSTEMS], NEW),
    ("ClusterFileSystems", ("elasticfilesystem:*",), [FILE_SYSTEMS], OWN),
    ("EfsKeys", ("kms:CreateGrant", "kms:GenerateDataKeyWithoutPlaintext", "kms:Decrypt"),
     [KEYS], equals("kms:ViaService", "elasticfilesystem.*.amazonaws.com", op="StringLike")),
)


def is_read(action: str) -> bool:
    return action.split(":")[1].startswith(READ_PREFIXES) and action not in DATA_READS


