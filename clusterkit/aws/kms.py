"""KMS: turn the key a user names (id, alias/NAME, alias ARN, key ARN) into its key ARN,
the one form every encrypting call takes (the EBS direct StartSnapshot takes no other)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from clusterkit.aws.clients import cached_client
from clusterkit.aws.errors import aws_call
from clusterkit.errors import ClusterkitError

if TYPE_CHECKING:
    import boto3

KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$")


def key_arn(session: boto3.Session, region: str, key: str) -> str:
    """The ARN of the key ``key`` names in ``region``; a key ARN is returned as it is
    (no call). A key that does not exist, or is not enabled, is an error naming it."""
    if KEY_ARN.fullmatch(key):
        return key
    with aws_call("DescribeKey", key):
        meta = cached_client(session, "kms", region).describe_key(KeyId=key)["KeyMetadata"]
    if meta.get("KeyState", "Enabled") != "Enabled":
        raise ClusterkitError(f"KMS key {key} ({meta['Arn']}) is {meta['KeyState']}, "
                              "not Enabled", "enable the key, or name another one")
    return str(meta["Arn"])
