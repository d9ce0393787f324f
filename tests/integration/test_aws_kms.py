"""aws.kms against moto (real HTTP on 127.0.0.1): every form of key name becomes the
key's ARN; an unknown or disabled key is an error naming it."""

from __future__ import annotations

import boto3
import pytest

from clusterkit.aws import kms
from clusterkit.errors import ClusterkitError
from tests import support
from tests.integration.conftest import REGION


def test_every_form_of_a_key_name_gives_its_arn(moto_env: str) -> None:
    client = boto3.client("kms", REGION)
    meta = client.create_key()["KeyMetadata"]
    alias = "alias/" + support.unique_name("ck")
    client.create_alias(AliasName=alias, TargetKeyId=meta["KeyId"])
    session = boto3.Session(region_name=REGION)
    for name in (meta["KeyId"], alias, meta["Arn"]):
        assert kms.key_arn(session, REGION, name) == meta["Arn"], name
    alias_arn = meta["Arn"].split(":key/")[0] + ":" + alias
    assert kms.key_arn(session, REGION, alias_arn) == meta["Arn"]


def test_an_unknown_or_disabled_key_is_refused(moto_env: str) -> None:
    session = boto3.Session(region_name=REGION)
    with pytest.raises(ClusterkitError, match="alias/no-such-key"):
        kms.key_arn(session, REGION, "alias/no-such-key")
    client = boto3.client("kms", REGION)
    key = client.create_key()["KeyMetadata"]["KeyId"]
    client.disable_key(KeyId=key)
    with pytest.raises(ClusterkitError, match="Disabled"):
        kms.key_arn(session, REGION, key)
