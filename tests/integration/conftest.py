"""Provisioning fixtures: a moto server (real HTTP on 127.0.0.1, random free port),
an AWS call recorder, a fault injector, and a leftover counter.

``moto_env`` points every AWS client at the server with throwaway credentials and
``CLUSTERKIT_SANDBOX=1`` (net guard on; the SSH rule defaults to 127.0.0.1/32). The
emulator is shared by the tests of a session: each uses its own cluster name.
``Calls`` hooks botocore's ``before-call`` event on the session clusterkit uses: it records every operation and can raise at the
k-th mutating call. That raise is a test double for the *failure* only (a server error,
throttling after retries, no capacity, or Ctrl-C): every other call is real HTTP.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from rich.console import Console

from clusterkit.aws.instances import to_node
from clusterkit.cli.events import ConsoleReporter
from clusterkit.cluster.runtime import Runtime
from clusterkit_sandbox import capacity, ec2_gaps
from tests import support

REGION = "us-east-1"
AMI = "ami-12c6146b"  # one of moto's built-in images
CLUSTER_TAG = "clusterkit:cluster"
READ_PREFIXES = ("Describe", "List", "Get", "Head")


def is_mutating(operation: str) -> bool:
    return not operation.startswith(READ_PREFIXES)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    ec2_gaps.install()  # the same emulator gap-fills the sandbox server makes
    capacity.install()
    with support.moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def moto_env(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    # No reset between tests: reloading moto's EC2 backend costs about a second per
    # test. Every test uses its own cluster name, and leftovers are counted per name.
    for name in ("SSH_AUTH_SOCK", "CLUSTERKIT_ADDRESS_MAP"):
        monkeypatch.delenv(name, raising=False)
    support.aws_env(monkeypatch, moto_server, REGION, CLUSTERKIT_SANDBOX="1",
                    HOME=str(tmp_path), CLUSTERKIT_CALLER_CIDR="127.0.0.1/32")
    support.user_ssh_key(tmp_path)
    return moto_server


@dataclass
class Calls:
    """Records (service, operation) of every AWS call made through one session; can
    fail the k-th mutating call (1-based) with ``fault``."""

    log: list[tuple[str, str]] = field(default_factory=list)
    fail_at: int | None = None
    fault: str = "InternalError"  # an AWS error code, or "SIGINT"
    only: str | None = None  # count only this operation (e.g. "RunInstances")
    mutating_seen: int = 0

    def hook(self, model: Any, **kwargs: Any) -> None:
        service = model.service_model.service_name
        self.log.append((service, model.name))
        if not is_mutating(model.name) or (self.only and model.name != self.only):
            return
        self.mutating_seen += 1
        if self.fail_at is not None and self.mutating_seen == self.fail_at:
            if self.fault == "SIGINT":
                raise KeyboardInterrupt(f"injected at {model.name}")
            raise ClientError({"Error": {"Code": self.fault,
                                         "Message": f"injected fault at {model.name}"},
                               "ResponseMetadata": {"HTTPStatusCode": 500}}, model.name)

    def mutating(self) -> Counter[str]:
        return Counter(op for _, op in self.log if is_mutating(op))

    def by_operation(self) -> Counter[str]:
        return Counter(op for _, op in self.log)

    def reset(self) -> None:
        self.log.clear()
        self.mutating_seen = 0


def runtime(calls: Calls | None = None) -> Runtime:
    session = boto3.Session(region_name=REGION)
    if calls is not None:
        session.events.register("before-call", calls.hook)
    return Runtime(session=session, report=ConsoleReporter(Console(stderr=True, width=120)),
                   poll=0.05)


@pytest.fixture
def calls(moto_env: str) -> Calls:
    return Calls()


@functools.lru_cache(maxsize=64)
def _client(service: str, region: str | None, endpoint: str | None,
            _signer: tuple[str | None, str | None, int]) -> Any:
    return boto3.Session().client(service, region, endpoint_url=endpoint)


def _signer() -> tuple[str | None, str | None, int]:
    """What the clients made now sign with: a key in the environment, or a credentials
    file (its path and its last write: a sandbox writes a new key at each start, and
    refuses any other)."""
    path = os.environ.get("AWS_SHARED_CREDENTIALS_FILE")
    try:
        stamp = os.stat(path).st_mtime_ns if path else 0
    except OSError:
        stamp = 0
    return os.environ.get("AWS_ACCESS_KEY_ID"), path, stamp


def checker(service: str, region: str | None = REGION) -> Any:
    """The tests' own client of ``service`` (one per endpoint and credentials: the checks
    below run after every `up` and `down`, and a new client costs more than the calls it
    makes; each made in a session of its own, which reads the credentials in force)."""
    return _client(service, region, os.environ.get("AWS_ENDPOINT_URL"), _signer())


def live_instances(cluster: str) -> list[dict]:
    """The cluster's pending and running instances, as EC2 describes them."""
    ec2 = checker("ec2")
    res = ec2.describe_instances(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return [i for r in res["Reservations"] for i in r["Instances"]]


def node_index(inst: dict) -> int:
    """The node's index as every reader of clusterkit sees it (``aws.instances.to_node``:
    its own index tag, else its launch's slots at its AmiLaunchIndex)."""
    index = to_node(inst, REGION).index
    assert index is not None, inst
    return index


def leftovers(cluster: str, region: str = REGION) -> dict[str, list[str]]:
    """Every resource type clusterkit creates that still carries (or, for IAM instance
    profiles, is named or pathed after) the cluster. Independent of clusterkit's own sweep."""
    ec2 = checker("ec2", region)
    flt = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}]
    out: dict[str, list[str]] = {}
    out["instances"] = [i["InstanceId"] for r in ec2.describe_instances(Filters=flt + [
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping",
                                                   "stopped", "shutting-down"]}])[
        "Reservations"] for i in r["Instances"]]
    out["volumes"] = [v["VolumeId"] for v in ec2.describe_volumes(Filters=flt)["Volumes"]]
    out["security_groups"] = [g["GroupId"] for g in
                              ec2.describe_security_groups(Filters=flt)["SecurityGroups"]]
    out["launch_templates"] = [t["LaunchTemplateId"] for t in
                               ec2.describe_launch_templates(Filters=flt)["LaunchTemplates"]]
    out["key_pairs"] = [k["KeyName"] for k in ec2.describe_key_pairs(Filters=flt)["KeyPairs"]]
    out["spot_requests"] = [s["SpotInstanceRequestId"] for s in
                            ec2.describe_spot_instance_requests(Filters=flt + [
                                {"Name": "state", "Values": ["open", "active"]}])[
                                "SpotInstanceRequests"]]
    out["fleets"] = [f["FleetId"] for f in ec2.describe_fleets()["Fleets"]
                     if not f["FleetState"].startswith("deleted")
                     and {t["Key"]: t["Value"] for t in f.get("Tags", [])}.get(CLUSTER_TAG)
                     == cluster]
    # placement groups: moto has no placement-group API and its CloudFormation skips the
    # resource, so none can exist in the emulator (see docs/howto/provision.md).
    cf = checker("cloudformation", region)
    out["stacks"] = [s["StackName"] for s in cf.describe_stacks()["Stacks"]
                     if s["StackName"] == f"clusterkit-{cluster}"
                     and s["StackStatus"] != "DELETE_COMPLETE"]
    efs = checker("efs", region)
    fss = [f for f in efs.describe_file_systems()["FileSystems"]
           if {t["Key"]: t["Value"] for t in f.get("Tags", [])}.get(CLUSTER_TAG) == cluster]
    out["file_systems"] = [f["FileSystemId"] for f in fss]
    out["mount_targets"] = [m["MountTargetId"] for f in fss for m in
                            efs.describe_mount_targets(FileSystemId=f["FileSystemId"])[
                                "MountTargets"]]
    iam = checker("iam", None)
    out["iam_roles"] = [r["RoleName"] for r in iam.list_roles()["Roles"]
                        if f"clusterkit-{cluster}-" in r["RoleName"]
                        or r["Path"] == f"/clusterkit/{cluster}/"]
    out["instance_profiles"] = [p["InstanceProfileName"] for p in
                                iam.list_instance_profiles()["InstanceProfiles"]
                                if f"clusterkit-{cluster}-" in p["InstanceProfileName"]
                                or p["Path"] == f"/clusterkit/{cluster}/"]
    return {k: v for k, v in out.items() if v}


@pytest.fixture
def cli_env(sandbox_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The CLI in sandbox mode (CLUSTERKIT_SANDBOX=1 wants a running sandbox), with a
    fresh HOME holding the user's SSH key and no agent."""
    support.require_root("the sandbox's SSH nodes")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    support.user_ssh_key(tmp_path)
    return sandbox_env


SPEC = """\
name: {name}
region: us-east-1
nodes:
  count: {count}
  instance_types: [c5.large]
  market: {market}
  image: {{id: {ami}}}
  placement_group: {placement_group}
  root_volume: {{size_gb: 8, type: gp3}}
ssh:
  user: ubuntu
{extra}"""


def write_spec(tmp_path: Path, name: str | None = None, count: int = 2,
               market: str = "on-demand", extra: str = "", *, ami: str = AMI,
               placement_group: bool = True) -> Path:
    """A small c5.large cluster spec (named uniquely unless ``name`` is given); ``extra``
    lines are appended inside ``ssh:`` (indent them) or, unindented, as new top-level
    sections."""
    name = name or support.unique_name("pv")
    path = tmp_path / f"{name}-{count}.yaml"
    path.write_text(SPEC.format(name=name, count=count, market=market, ami=ami, extra=extra,
                                placement_group=str(placement_group).lower()))
    return path


def dump(data: Any) -> str:
    return json.dumps(data, indent=1, default=str)


def stack_params(ec2: Any, name: str) -> dict[str, str]:
    """Parameters of the cluster template for a stack made directly (a key pair made for
    it, the default VPC, EFS deleted with the stack, no placement group)."""
    ec2.create_key_pair(KeyName=name)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    return {"ClusterName": name, "VpcId": vpc["VpcId"], "ImageId": AMI, "KeyName": name,
            "SshCidr": "127.0.0.1/32", "CreateEfs": "true", "EfsDeletionPolicy": "delete",
            "UsePlacementGroup": "false"}
