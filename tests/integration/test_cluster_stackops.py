"""cluster.stackops against the emulator over HTTP: the stack runs as the account's
CloudFormation service role (RoleARN on create, update and delete, the nodes' role given
the boundary), found once per session; without the role it runs with the caller's
permissions, said once as a warning with the command that creates the role;
CLUSTERKIT_CLOUDFORMATION_ROLE overrides the lookup."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from clusterkit.aws import keypairs, lookup
from clusterkit.aws.servicerole import BOUNDARY_NAME, ROLE_NAME, SERVICE_PATH, STACK_NAME
from clusterkit.cluster.provision import stackops
from clusterkit.cluster.provision.cfnrole import ENV
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterBusyError, UsageError
from clusterkit.events import Event, Kind
from tests import support
from tests.integration.conftest import AMI, REGION

TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "cloudformation.amazonaws.com"},
    "Action": "sts:AssumeRole"}]}


def _iam():
    return boto3.client("iam", REGION)


def _drop_role() -> None:
    try:
        _iam().delete_role(RoleName=ROLE_NAME)
    except _iam().exceptions.NoSuchEntityException:
        pass


@pytest.fixture
def service_role(moto_env) -> str:
    """The account's service role exists (the emulator is shared: made if missing)."""
    try:
        return str(_iam().get_role(RoleName=ROLE_NAME)["Role"]["Arn"])
    except _iam().exceptions.NoSuchEntityException:
        return str(_iam().create_role(RoleName=ROLE_NAME, Path=SERVICE_PATH,
                                      AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"])


@pytest.fixture
def no_service_role(moto_env) -> Iterator[None]:
    _drop_role()
    yield
    _drop_role()


def _runtime() -> tuple[Runtime, list[Event]]:
    events: list[Event] = []
    return Runtime(session=boto3.Session(region_name=REGION), report=events.append,
                   poll=0.05), events


def _params(cluster: str, tmp_path) -> dict[str, str]:
    s = boto3.Session(region_name=REGION)
    key = f"clusterkit-{cluster}"
    pub = support.public_key(support.ssh_keygen(tmp_path / f"k-{cluster}"))
    keypairs.import_key_pair(s, REGION, key, pub, {"clusterkit:cluster": cluster})
    return {"ClusterName": cluster, "VpcId": lookup.default_vpc(s, REGION), "ImageId": AMI,
            "KeyName": key, "RootVolumeSize": "8", "UsePlacementGroup": "false",
            "SshCidr": "127.0.0.1/32"}


def _raw(name: str) -> dict:
    return boto3.client("cloudformation", REGION).describe_stacks(StackName=name)["Stacks"][0]


def _warnings(events: list[Event]) -> list[str]:
    return [e.text for e in events if e.kind is Kind.WARNING]


def test_the_stack_runs_as_the_service_role(service_role, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    rt, events = _runtime()
    cluster = support.unique_name("role")
    name, params = f"clusterkit-{cluster}", _params(cluster, tmp_path)
    stack = stackops.deploy(rt, REGION, name, "create", params, {"clusterkit:cluster": cluster},
                            timeout=60)
    raw = _raw(name)
    assert raw["RoleARN"] == service_role == stack["role_arn"]
    boundary = service_role.split(":role/")[0] + f":policy{SERVICE_PATH}{BOUNDARY_NAME}"
    assert {p["ParameterKey"]: p["ParameterValue"] for p in raw["Parameters"]}[
        "NodeRoleBoundary"] == boundary
    assert "NodeRoleBoundary" not in stack["parameters"]  # the spec's parameters only
    changed = {**params, "SshCidr": "127.0.0.2/32"}
    stackops.deploy(rt, REGION, name, "update", changed, {"clusterkit:cluster": cluster},
                    timeout=60)
    assert _raw(name)["RoleARN"] == service_role
    assert stackops.delete(rt, REGION, name, timeout=60) == "DELETE_COMPLETE"
    assert _warnings(events) == []


def test_without_the_role_the_caller_runs_it_and_is_told_once(no_service_role, tmp_path,
                                                              monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    rt, events = _runtime()
    names = []
    for _ in range(2):
        cluster = support.unique_name("norole")
        names.append(f"clusterkit-{cluster}")
        stackops.deploy(rt, REGION, names[-1], "create", _params(cluster, tmp_path),
                        {"clusterkit:cluster": cluster}, timeout=60)
        assert "RoleARN" not in _raw(names[-1])
        assert {p["ParameterKey"]: p["ParameterValue"] for p in _raw(names[-1])[
            "Parameters"]}["NodeRoleBoundary"] == ""
    warned = _warnings(events)
    assert len(warned) == 1, warned
    assert ROLE_NAME in warned[0] and "does not exist" in warned[0]
    assert f"--stack-name {STACK_NAME}" in warned[0] and ENV in warned[0]
    for name in names:
        stackops.delete(rt, REGION, name, timeout=60)


def test_the_override_names_the_role_or_none(service_role, tmp_path, monkeypatch):
    other = service_role.replace(ROLE_NAME, "my-own-cfn-role")
    _iam().create_role(RoleName="my-own-cfn-role", Path=SERVICE_PATH,
                       AssumeRolePolicyDocument=json.dumps(TRUST))
    try:
        for value, expected in ((other, other), ("none", None)):
            monkeypatch.setenv(ENV, value)
            rt, events = _runtime()
            cluster = support.unique_name("ovr")
            name = f"clusterkit-{cluster}"
            stackops.deploy(rt, REGION, name, "create", _params(cluster, tmp_path),
                            {"clusterkit:cluster": cluster}, timeout=60)
            assert _raw(name).get("RoleARN") == expected
            assert _warnings(events) == []
            stackops.delete(rt, REGION, name, timeout=60)
    finally:
        _iam().delete_role(RoleName="my-own-cfn-role")


def test_a_malformed_override_is_a_usage_error(moto_env, monkeypatch):
    monkeypatch.setenv(ENV, "clusterkit-cloudformation")
    rt, _ = _runtime()
    with pytest.raises(UsageError, match=ENV) as caught:
        stackops.deploy(rt, REGION, "clusterkit-never", "create", {}, {}, timeout=5)
    assert caught.value.exit_code == 2 and "arn:aws:iam::" in (caught.value.hint or "")


def test_a_stack_created_meanwhile_is_another_up_not_a_failure_to_clean_up(
        service_role, tmp_path, monkeypatch):
    """Two `up`s of one cluster from two machines: the second's CreateStack meets the
    first's stack (AlreadyExistsException) and says another `up` is running."""
    monkeypatch.delenv(ENV, raising=False)
    rt, _ = _runtime()
    cluster = support.unique_name("twice")
    name, params = f"clusterkit-{cluster}", _params(cluster, tmp_path)
    stackops.deploy(rt, REGION, name, "create", params, {"clusterkit:cluster": cluster},
                    timeout=60)
    with pytest.raises(ClusterBusyError) as caught:  # read before the first created it
        stackops.deploy(rt, REGION, name, "create", params, {"clusterkit:cluster": cluster},
                        timeout=60, current=None)
    assert caught.value.exit_code == 1
    assert "another `up` of the cluster is running" in caught.value.message
    assert "down" not in caught.value.hint
    assert _raw(name)["StackStatus"] == "CREATE_COMPLETE"  # the first's stack is untouched
    stackops.delete(rt, REGION, name, timeout=60)
