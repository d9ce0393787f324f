"""EC2 key pairs: clusterkit imports the user's *public* key when the spec names no
key pair; the private key never leaves the user's machine or agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3

from clusterkit.aws.clients import cached_client as client
from clusterkit.aws.errors import AWS_EXCEPTIONS, error_code, translate
from clusterkit.aws.tags import cluster_filter, tag_specs


def _ec2(session: boto3.Session, region: str) -> Any:
    return client(session, "ec2", region)


def key_pair_exists(session: boto3.Session, region: str, name: str) -> bool:
    try:
        _ec2(session, region).describe_key_pairs(KeyNames=[name])
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "InvalidKeyPair.NotFound":
            return False
        raise translate(exc, "DescribeKeyPairs", name) from exc
    return True


def import_key_pair(session: boto3.Session, region: str, name: str, public_key: str,
                    tags: Mapping[str, str]) -> str:
    try:
        return _ec2(session, region).import_key_pair(
            KeyName=name, PublicKeyMaterial=public_key.encode(),
            TagSpecifications=tag_specs(["key-pair"], tags))["KeyPairId"]
    except AWS_EXCEPTIONS as exc:
        if error_code(exc) == "InvalidKeyPair.Duplicate":
            return name
        raise translate(exc, "ImportKeyPair", name) from exc


def cluster_key_pairs(session: boto3.Session, region: str, cluster: str) -> list[str]:
    try:
        pairs = _ec2(session, region).describe_key_pairs(
            Filters=cluster_filter(cluster))["KeyPairs"]
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DescribeKeyPairs", cluster) from exc
    return sorted(p["KeyName"] for p in pairs)


def delete_key_pair(session: boto3.Session, region: str, name: str) -> None:
    try:
        _ec2(session, region).delete_key_pair(KeyName=name)
    except AWS_EXCEPTIONS as exc:
        raise translate(exc, "DeleteKeyPair", name) from exc
