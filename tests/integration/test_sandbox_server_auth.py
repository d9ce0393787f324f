"""The sandbox's endpoint takes only requests signed with its credentials of this start
(sandbox/clusterkit_sandbox/guard.py, sigv4.py, credentials.py), over real HTTP: unsigned
requests to every service it serves are refused with AWS's error in that service's
protocol and change nothing; wrong keys, wrong secrets, a tampered body and a stale date
are refused; the per-start key and the instances' role credentials from IMDS work; the
credentials file is 0600 in a 0700 directory and its secret is in no process's command
line or environment and not in the log; a restarted sandbox refuses the keys of before."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from clusterkit import sandboxmode
from clusterkit_sandbox import credentials
from clusterkit_sandbox.control import do_start, do_stop
from clusterkit_sandbox.state import LOG_FILE
from tests.conftest import AMI, CLUSTER_TAG, SandboxCluster, SandboxHandle

pytestmark = [pytest.mark.sandbox]
FORM = "application/x-www-form-urlencoded; charset=utf-8"
JSON11 = "application/x-amz-json-1.1"
ONE_TRY = Config(retries={"max_attempts": 1, "mode": "standard"})


def _http(endpoint: str, method: str, path: str, body: bytes = b"",
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(endpoint + path, data=body or None, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, dict(reply.headers), reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def _signed(endpoint: str, method: str, path: str, body: bytes, headers: dict[str, str],
            key: Credentials, service: str, *, when: datetime | None = None,
            sent_body: bytes | None = None) -> tuple[int, dict[str, str], str]:
    """Sign with botocore's SigV4 (at ``when``), then send (``sent_body`` instead of
    the body signed: a tampered request)."""
    request = AWSRequest(method=method, url=endpoint + path, data=body, headers=headers)
    clock = when or datetime.now(timezone.utc)
    with mock.patch.object(botocore.auth, "get_current_datetime", lambda: clock):
        botocore.auth.SigV4Auth(key, service, "us-east-1").add_auth(request)
    return _http(endpoint, method, path, body if sent_body is None else sent_body,
                 dict(request.headers.items()))


def _key(sandbox: SandboxHandle) -> Credentials:
    return Credentials(*credentials.read(sandbox.dir))


def _code(reply: tuple[int, dict[str, str], str]) -> str:
    """The error code of an AWS error answer, in whichever protocol it came."""
    _status, headers, body = reply
    if body.startswith("{"):
        return json.loads(body)["__type"]
    return body.split("<Code>", 1)[1].split("</Code>", 1)[0]


RUN = (f"Action=RunInstances&Version=2016-11-15&ImageId={AMI}&MinCount=1&MaxCount=1"
       "&KeyName=intruder&TagSpecification.1.ResourceType=instance"
       "&TagSpecification.1.Tag.1.Key=clusterkit%3Acluster"
       "&TagSpecification.1.Tag.1.Value=intruders").encode()
# one request of every service the sandbox serves, unsigned, and the code AWS refuses with
UNSIGNED = {
    "ec2 RunInstances": ("POST", "/", RUN, {"Content-Type": FORM},
                         "MissingAuthenticationToken"),
    "ec2 DescribeInstances": ("POST", "/", b"Action=DescribeInstances&Version=2016-11-15",
                              {"Content-Type": FORM}, "MissingAuthenticationToken"),
    "ec2 ImportKeyPair": ("POST", "/", b"Action=ImportKeyPair&Version=2016-11-15&KeyName=x"
                          b"&PublicKeyMaterial=c3NoLWVkMjU1MTkgQUFBQQ%3D%3D",
                          {"Content-Type": FORM}, "MissingAuthenticationToken"),
    "cloudformation": ("POST", "/", b"Action=ListStacks&Version=2010-05-15",
                       {"Content-Type": FORM}, "MissingAuthenticationToken"),
    "sts": ("POST", "/", b"Action=GetCallerIdentity&Version=2011-06-15",
            {"Content-Type": FORM}, "MissingAuthenticationToken"),
    "iam": ("POST", "/", b"Action=ListRoles&Version=2010-05-08", {"Content-Type": FORM},
            "MissingAuthenticationToken"),
    "efs": ("GET", "/2015-02-01/file-systems", b"", {},
            "MissingAuthenticationTokenException"),
    "ebs direct": ("POST", "/snapshots", b'{"VolumeSize": 1}',
                   {"Content-Type": "application/json"}, "MissingAuthenticationTokenException"),
    "pricing": ("POST", "/", b"{}", {"Content-Type": JSON11,
                                      "X-Amz-Target": "AWSPriceListService.GetProducts"},
                "MissingAuthenticationTokenException"),
    "kms": ("POST", "/", b"{}", {"Content-Type": JSON11, "X-Amz-Target": "TrentService.ListKeys"},
            "MissingAuthenticationTokenException"),
    "moto-api reset": ("POST", "/moto-api/reset", b"", {}, "MissingAuthenticationTokenException"),
    "moto-api data": ("GET", "/moto-api/data.json", b"", {},
                      "MissingAuthenticationTokenException"),
}


@pytest.mark.parametrize("case", sorted(UNSIGNED))
def test_an_unsigned_request_is_refused(sandbox: SandboxHandle, case: str) -> None:
    method, path, body, headers, code = UNSIGNED[case]
    reply = _http(sandbox.endpoint, method, path, body, headers)
    assert reply[0] == 403, reply
    assert _code(reply) == code
    if code.endswith("Exception") and not path.startswith("/moto-api"):
        assert reply[1]["x-amzn-ErrorType"] == code  # REST-JSON's and JSON's header too


def test_what_an_unsigned_request_asked_for_never_happens(sandbox: SandboxHandle) -> None:
    """The instances and keys of unsigned requests do not exist, so no node ever boots
    with an intruder's key: the node agent (agent.py) reads instances and key pairs only
    from moto's in-process models (moto_models.py), and only requests through the guard,
    signed, reach them; the emulator's reset is refused the same way."""
    for case in ("ec2 ImportKeyPair", "ec2 RunInstances", "moto-api reset"):
        method, path, body, headers, _code_ = UNSIGNED[case]
        assert _http(sandbox.endpoint, method, path, body, headers)[0] == 403
    ec2 = sandbox.client("ec2")
    tagged = ec2.describe_instances(Filters=[{"Name": f"tag:{CLUSTER_TAG}",
                                              "Values": ["intruders"]}])
    assert tagged["Reservations"] == []
    assert "x" not in {k["KeyName"] for k in ec2.describe_key_pairs()["KeyPairs"]}


def _client(sandbox: SandboxHandle, service: str, key_id: str, secret: str,
            token: str | None = None) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=sandbox.endpoint, region_name=sandbox.region,
                        aws_access_key_id=key_id, aws_secret_access_key=secret,
                        aws_session_token=token, config=ONE_TRY)


def _refused(call: Any, *args: Any) -> str:
    with pytest.raises(ClientError) as info:
        call(*args)
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    return info.value.response["Error"]["Code"]


def test_wrong_credentials_are_refused_by_every_protocol(sandbox: SandboxHandle) -> None:
    key_id, secret = credentials.read(sandbox.dir)
    stranger = ("AKIA" + "Q" * 16, secret)  # a key no one made, with the right secret
    guessed = (key_id, "x" * 40)  # the right key, a wrong secret
    calls = {"ec2": lambda c: c.describe_instances(), "sts": lambda c: c.get_caller_identity(),
             "iam": lambda c: c.list_roles(), "efs": lambda c: c.describe_file_systems(),
             "cloudformation": lambda c: c.list_stacks(), "kms": lambda c: c.list_keys()}
    unknown = {"ec2": "AuthFailure", "efs": "UnrecognizedClientException",
               "kms": "UnrecognizedClientException"}
    bad = {"efs": "InvalidSignatureException", "kms": "InvalidSignatureException"}
    for service, call in calls.items():
        assert _refused(call, _client(sandbox, service, *stranger)) == \
            unknown.get(service, "InvalidClientTokenId"), service
        assert _refused(call, _client(sandbox, service, *guessed)) == \
            bad.get(service, "SignatureDoesNotMatch"), service


def test_the_per_start_credentials_work_for_every_service(sandbox: SandboxHandle) -> None:
    assert sandbox.client("sts").get_caller_identity()["Account"]
    assert "Reservations" in sandbox.client("ec2").describe_instances()
    assert "FileSystems" in sandbox.client("efs").describe_file_systems()
    assert "StackSummaries" in sandbox.client("cloudformation").list_stacks()
    assert "Roles" in sandbox.client("iam").list_roles()
    assert "Keys" in sandbox.client("kms").list_keys()
    # and from the environment sandbox mode gives every process clusterkit starts
    import boto3

    with mock.patch.dict(os.environ, {**sandbox.env}, clear=False):
        for name in sandboxmode.DROPPED:
            os.environ.pop(name, None)
        session = boto3.Session(region_name=sandbox.region)
        assert session.client("sts").get_caller_identity()["Account"]


def test_a_tampered_body_or_a_stale_date_is_refused(sandbox: SandboxHandle) -> None:
    key = _key(sandbox)
    body = b"Action=DescribeInstances&Version=2016-11-15"
    headers = {"Content-Type": FORM}
    ok = _signed(sandbox.endpoint, "POST", "/", body, headers, key, "ec2")
    assert ok[0] == 200, ok
    tampered = _signed(sandbox.endpoint, "POST", "/", body, headers, key, "ec2",
                       sent_body=RUN)  # same length or not: the body is signed
    assert (tampered[0], _code(tampered)) == (403, "SignatureDoesNotMatch")
    stale = _signed(sandbox.endpoint, "POST", "/", body, headers, key, "ec2",
                    when=datetime.now(timezone.utc) - timedelta(minutes=20))
    assert (stale[0], _code(stale)) == (403, "RequestExpired")


def test_a_body_is_its_declared_hash_or_declared_unsigned(sandbox: SandboxHandle) -> None:
    """EBS's PutSnapshotBlock is signed with UNSIGNED-PAYLOAD, as AWS takes it (its
    checksum header is signed); a body that is not the hash it declares is refused."""
    import base64
    import hashlib

    ebs = sandbox.client("ebs")
    snap = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    data = b"\1" * 524288
    ebs.put_snapshot_block(SnapshotId=snap, BlockIndex=0, BlockData=data, DataLength=len(data),
                           Checksum=base64.b64encode(hashlib.sha256(data).digest()).decode(),
                           ChecksumAlgorithm="SHA256")
    body = b"Action=DescribeInstances&Version=2016-11-15"
    headers = {"Content-Type": FORM, "X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()}
    key = _key(sandbox)
    assert _signed(sandbox.endpoint, "POST", "/", body, headers, key, "ec2")[0] == 200
    swapped = _signed(sandbox.endpoint, "POST", "/", body, headers, key, "ec2", sent_body=RUN)
    assert (swapped[0], _code(swapped)) == (400, "XAmzContentSHA256Mismatch")


def test_moto_api_takes_only_the_sandbox_key(sandbox: SandboxHandle) -> None:
    # its dashboard: data.json dumps every backend of every region, which took over 30 s
    # in a CI process whose sandbox had served many tests
    reply = _signed(sandbox.endpoint, "GET", "/moto-api/", b"", {}, _key(sandbox), "s3")
    assert reply[0] == 200, reply


def _imds_credentials(sandbox: SandboxHandle, iid: str) -> dict[str, Any]:
    from botocore.utils import InstanceMetadataFetcher

    base = sandboxmode.metadata_url(iid, sandbox.env)
    fetcher = InstanceMetadataFetcher(timeout=5, num_attempts=1, base_url=base, env={})
    return fetcher.retrieve_iam_role_credentials()


def test_the_role_credentials_imds_hands_out_are_accepted_with_their_token(
        sandbox: SandboxHandle) -> None:
    """A node's AWS calls (the recovery controller on the master) sign with its role's
    credentials from IMDS: keys of this start, each naming the instance, that work only
    with their session token, and never for moto's own API."""
    name = "auth-role"
    iam, ec2 = sandbox.client("iam"), sandbox.client("ec2")
    iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")
    iam.create_instance_profile(InstanceProfileName=name)
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    [inst] = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1,  # untagged: no node
                               IamInstanceProfile={"Name": name})["Instances"]
    try:
        got = _imds_credentials(sandbox, inst["InstanceId"])
        again = _imds_credentials(sandbox, inst["InstanceId"])
        assert got["access_key"].startswith("ASIA") and got["access_key"] != again["access_key"]
        role = _client(sandbox, "ec2", got["access_key"], got["secret_key"], got["token"])
        assert "Reservations" in role.describe_instances()
        without = _client(sandbox, "sts", got["access_key"], got["secret_key"])
        assert _refused(without.get_caller_identity) == "InvalidClientTokenId"
        key = Credentials(got["access_key"], got["secret_key"], got["token"])
        moto_api = _signed(sandbox.endpoint, "POST", "/moto-api/reset", b"", {}, key, "s3")
        assert moto_api[0] == 403
    finally:
        ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])


def _daemon_and_children(daemon: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(entry)] = int(fields[1])
    family = {daemon}
    while grown := {pid for pid, ppid in parents.items() if ppid in family} - family:
        family |= grown
    return family


@pytest.mark.root
def test_the_credentials_are_private_and_in_no_process_or_log(
        sandbox_cluster: SandboxCluster) -> None:
    sandbox = sandbox_cluster.sandbox
    sandbox_cluster.launch(1)  # a node: its sshd is one of the daemon's children
    where = credentials.auth_dir(sandbox.dir)
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    for name in (credentials.CREDENTIALS_FILE, credentials.CONFIG_FILE):
        assert stat.S_IMODE((where / name).stat().st_mode) == 0o600
    key_id, secret = credentials.read(sandbox.dir)
    assert key_id.startswith("AKIA") and len(key_id) == 20 and len(secret) == 40
    daemon = json.loads((sandbox.dir / "state.json").read_text())["pid"]
    family = _daemon_and_children(daemon)
    assert len(family) > 1  # the node's processes
    everyone = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for pid in everyone:  # the daemon's family first of all, and every other process
        for part in ("cmdline", "environ"):
            try:
                raw = Path(f"/proc/{pid}/{part}").read_bytes()
            except OSError:
                assert pid not in family or not Path(f"/proc/{pid}").exists()
                continue
            assert secret.encode() not in raw, (pid, part)
    assert secret not in (sandbox.dir / LOG_FILE).read_text(errors="replace")
    assert secret not in sandbox.env.values()  # what clusterkit sets: the file's name only


def test_a_restarted_sandbox_refuses_the_keys_of_before(tmp_path: Path) -> None:
    where = tmp_path / "state"
    first = do_start(where)["endpoint"]
    try:
        old = credentials.read(where)
    finally:
        do_stop(where)
    assert not (credentials.auth_dir(where) / credentials.CREDENTIALS_FILE).exists()
    second = do_start(where)["endpoint"]
    try:
        new = credentials.read(where)
        assert new != old and first
        handle = SandboxHandle(where, second, {})
        assert _refused(lambda: _client(handle, "ec2", *old).describe_instances()) == \
            "AuthFailure"
        assert "Reservations" in _client(handle, "ec2", *new).describe_instances()
    finally:
        do_stop(where)


def _token_status(url: str, run: Any) -> str:
    """The HTTP status of IMDSv2's token PUT at ``url``, asked with curl by ``run``."""
    command = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "-H",
               "X-aws-ec2-metadata-token-ttl-seconds: 60", f"{url}/latest/api/token"]
    return run(command).stdout.strip()


@pytest.mark.root
def test_the_metadata_gives_tokens_only_to_the_instance_and_the_sandbox_user(
        sandbox_cluster: SandboxCluster) -> None:
    """The metadata (unsigned, as EC2's) would hand any local user an instance's role
    credentials; EC2's answers only the instance: here its node's processes and the
    sandbox's own user get a token, another user 403 (sandbox/clusterkit_sandbox/peers.py)."""
    import shlex
    import subprocess

    [node] = sandbox_cluster.launch(1)
    url = sandboxmode.metadata_url(node.instance_id, sandbox_cluster.sandbox.env)

    def here(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, **kwargs)

    assert _token_status(url, here) == "200"  # the sandbox's user (this test's)
    assert _token_status(url, lambda argv: here(argv, user=65534)) == "403"  # nobody
    on_node = _token_status(url, lambda argv: sandbox_cluster.run(node, shlex.join(argv)))
    assert on_node == "200"
