"""EC2 key pairs: clusterkit imports the user's *public* key when the spec names no
key pair; the private key never leaves the user's machine or agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import aws_call
from clusterkit.aws.tags import cluster_filter, tag_specs

if TYPE_CHECKING:
    import boto3


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def key_pair_exists(session: boto3.Session, region: str, name: str) -> bool:
    with aws_call("DescribeKeyPairs", name, expected={"InvalidKeyPair.NotFound"}) as call:
        _ec2(session, region).describe_key_pairs(KeyNames=[name])
    return call.expected_error is None


def import_key_pair(session: boto3.Session, region: str, name: str, public_key: str,
                    tags: Mapping[str, str]) -> str:
    with aws_call("ImportKeyPair", name, expected={"InvalidKeyPair.Duplicate"}):
        return _ec2(session, region).import_key_pair(
            KeyName=name, PublicKeyMaterial=public_key.encode(),
            TagSpecifications=tag_specs(["key-pair"], tags))["KeyPairId"]
    return name


def cluster_key_pairs(session: boto3.Session, region: str, cluster: str) -> list[str]:
    with aws_call("DescribeKeyPairs", cluster):
        pairs = _ec2(session, region).describe_key_pairs(
            Filters=cluster_filter(cluster))["KeyPairs"]
    return sorted(p["KeyName"] for p in pairs)


def delete_key_pair(session: boto3.Session, region: str, name: str) -> None:
    with aws_call("DeleteKeyPair", name):
        _ec2(session, region).delete_key_pair(KeyName=name)
