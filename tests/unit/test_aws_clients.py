"""aws.clients and aws.session: one client per (session, service, region), each with
clusterkit's retry policy and the net guard; session and client failures translated.
Making a client sends nothing, so no endpoint is needed here."""

from __future__ import annotations

import subprocess
import sys

import boto3
import pytest

from clusterkit.aws import session as aws_session
from clusterkit.aws.clients import cached_client
from clusterkit.aws.errors import aws_call
from clusterkit.errors import CredentialsError, UsageError


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))


def test_one_client_per_session_service_and_region(creds):
    session = boto3.Session(region_name="us-east-1")
    ec2 = cached_client(session, "ec2")
    assert cached_client(session, "ec2", "us-east-1") is ec2
    assert cached_client(session, "ec2", "us-west-2") is not ec2
    assert cached_client(session, "ec2", "us-west-2").meta.region_name == "us-west-2"
    assert cached_client(session, "efs") is not ec2
    assert cached_client(boto3.Session(region_name="us-east-1"), "ec2") is not ec2


def test_every_client_has_the_retry_policy(creds):
    """(The net guard every client carries is tested in test_netguard.py.)"""
    ec2 = aws_session.client(aws_session.make_session("us-east-1"), "ec2")
    assert ec2.meta.config.retries["mode"] == "adaptive"
    assert ec2.meta.config.retries["total_max_attempts"] == 11
    assert "clusterkit/" in ec2.meta.config.user_agent_extra


def test_making_clients_leaves_the_policy_unchanged(creds):
    """botocore rewrites the retries dict of the Config it is given; clusterkit gives
    it a copy, so RETRY_CONFIG reads the same after any number of clients."""
    before = dict(aws_session.RETRY_CONFIG.retries)
    for region in ("us-east-1", "eu-west-1"):
        aws_session.client(aws_session.make_session(region), "ec2")
    assert aws_session.RETRY_CONFIG.retries == before == {"mode": "adaptive",
                                                          "max_attempts": 10}


def test_unknown_profile_is_a_credentials_error(creds):
    with pytest.raises(CredentialsError) as caught:
        aws_session.make_session("us-east-1", "no-such-profile")
    assert "no-such-profile" in caught.value.message
    assert caught.value.hint == "check --profile / AWS_PROFILE against ~/.aws/config"
    assert caught.value.exit_code == 1


def test_malformed_endpoint_is_a_usage_error(creds, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not a url")
    with pytest.raises(UsageError) as caught:
        aws_session.client(aws_session.make_session("us-east-1"), "ec2")
    assert caught.value.message.startswith("cannot make an AWS ec2 client: ")
    assert caught.value.exit_code == 2


def test_no_credentials_at_call_time(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    ec2 = aws_session.client(aws_session.make_session("us-east-1"), "ec2")
    with pytest.raises(CredentialsError) as caught, aws_call("DescribeRegions"):
        ec2.describe_regions()
    assert caught.value.message == "no AWS credentials found"
    assert caught.value.code == "NoCredentials"


def test_commands_import_no_boto3_until_a_session_is_made():
    """boto3, botocore.config and botocore.parsers (~0.15 s of every command's start) are
    imported when a session or a client is made, not when the CLI and `train`'s module
    load: `train` on the nodes `up` kept, `top` and `logs` make no AWS call. Sandbox mode
    (clusterkit.sandboxmode) and the sandbox's side of it load none of the emulation's
    server either."""
    code = ("import sys, clusterkit.cli.main, clusterkit.cluster.jobs.train, "
            "clusterkit.cluster.jobs.top, clusterkit.sandboxmode, clusterkit_sandbox.client\n"
            "heavy = ('boto3', 'botocore.config', 'botocore.parsers', 'botocore.regions', "
            "'clusterkit_sandbox.server', 'moto')\n"
            "print(sorted(m for m in sys.modules if m in heavy))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]", loaded
    session = aws_session.make_session("us-east-1")  # and made when asked for
    assert type(session).__module__ == "boto3.session"
