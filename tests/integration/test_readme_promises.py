"""What the provisioning guide (docs/howto/provision.md) promises about `up`, checked
against moto in server mode (real HTTP): the AMI found by name and owner, `ssh.key_name` (used, never imported or deleted, and
refused when missing), `ssh.allowed_cidr` as the security group's only SSH source, the
spec's `tags` on every resource, `--profile` choosing the credentials, and the launch's
`ClientToken` (the same for a retried launch, another for other indexes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import AwsError, ClusterkitError
from tests import support
from tests.integration.conftest import AMI, CLUSTER_TAG, REGION, Calls, leftovers, runtime

SPEC = """\
name: {name}
region: us-east-1
nodes:
  count: {count}
  instance_types: [c5.large]
  market: on-demand
  image: {image}
  root_volume: {{size_gb: 8, type: gp3}}
ssh:
  user: ubuntu
{extra}"""


def _spec(tmp_path: Path, name: str, *, count: int = 1, image: str = f"{{id: {AMI}}}",
          extra: str = "") -> str:
    path = tmp_path / f"{name}-{count}.yaml"
    path.write_text(SPEC.format(name=name, count=count, image=image, extra=extra))
    return str(path)


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def _instances(cluster: str) -> list[dict[str, Any]]:
    res = boto3.client("ec2", REGION).describe_instances(Filters=[
        {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return [i for r in res["Reservations"] for i in r["Instances"]]


def _own_image(name: str) -> str:
    """An AMI owned by this account ("self"), made from a throwaway instance."""
    ec2 = boto3.client("ec2", REGION)
    iid = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    try:
        return ec2.create_image(InstanceId=iid, Name=name)["ImageId"]
    finally:
        ec2.terminate_instances(InstanceIds=[iid])


def test_image_found_by_name_and_owner(moto_env, tmp_path):
    """`nodes.image.name` (wildcards) with `nodes.image.owner`: the nodes run the AMI of
    that owner with that name; the same name under another owner matches nothing."""
    label = support.unique_name("ck-ami")
    image = _own_image(f"{label}-ubuntu")
    name = support.unique_name("ami")
    spec = _spec(tmp_path, name, image=f"{{name: '{label}-*', owner: self}}")
    do_up(spec, yes=True, rt=runtime(), wait_ssh=False)
    assert [i["ImageId"] for i in _instances(name)] == [image]
    do_down(spec, yes=True, rt=runtime())

    other = _spec(tmp_path, support.unique_name("ami"),
                  image=f"{{name: '{label}-*', owner: amazon}}")
    calls = Calls()
    with pytest.raises(ClusterkitError) as caught:
        do_up(other, yes=True, rt=runtime(calls), wait_ssh=False)
    assert caught.value.exit_code == 2
    assert f"no AMI '{label}-*' in {REGION}" in caught.value.message
    assert "nodes.image.owner" in caught.value.hint
    assert "RunInstances" not in calls.mutating()


def test_key_name_is_used_not_imported_and_kept_by_down(moto_env, tmp_path):
    key = support.unique_name("my-key")
    ec2 = boto3.client("ec2", REGION)
    ec2.create_key_pair(KeyName=key)
    name = support.unique_name("key")
    spec = _spec(tmp_path, name, count=2, extra=f"  key_name: {key}\n")
    calls = Calls()
    do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    assert "ImportKeyPair" not in calls.mutating()
    assert {i["KeyName"] for i in _instances(name)} == {key}
    do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}
    assert ec2.describe_key_pairs(KeyNames=[key])["KeyPairs"]  # the user's: never deleted


def test_missing_key_name_is_refused_before_any_change(moto_env, tmp_path):
    key = support.unique_name("no-such-key")
    name = support.unique_name("nokey")
    spec = _spec(tmp_path, name, extra=f"  key_name: {key}\n")
    calls = Calls()
    with pytest.raises(ClusterkitError) as caught:
        do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    said = f"{caught.value.message}\n{caught.value.hint}"
    assert caught.value.exit_code == 2 and key in said, said
    assert "does not exist" in said or "missing in" in said, said
    assert calls.mutating() == {}
    assert leftovers(name) == {}


def test_allowed_cidr_is_the_only_ssh_source(moto_env, tmp_path):
    """CLUSTERKIT_CALLER_CIDR (127.0.0.1/32 here) is what `up` uses without the key; the
    spec's allowed_cidr replaces it."""
    name = support.unique_name("cidr")
    spec = _spec(tmp_path, name, extra="  allowed_cidr: 10.20.0.0/16\n")
    do_up(spec, yes=True, rt=runtime(), wait_ssh=False)
    ec2 = boto3.client("ec2", REGION)
    (group,) = ec2.describe_security_groups(Filters=[
        {"Name": f"tag:{CLUSTER_TAG}", "Values": [name]}])["SecurityGroups"]
    ssh = [p for p in group["IpPermissions"] if p.get("FromPort") == 22]
    assert [r["CidrIp"] for p in ssh for r in p["IpRanges"]] == ["10.20.0.0/16"]
    all_ranges = [r["CidrIp"] for p in group["IpPermissions"] for r in p["IpRanges"]]
    assert "127.0.0.1/32" not in all_ranges and "0.0.0.0/0" not in all_ranges
    do_down(spec, yes=True, rt=runtime())


def _tagged(name: str) -> dict[str, list[dict[str, str]]]:
    """The tags of every taggable resource of the cluster, by kind."""
    ec2 = boto3.client("ec2", REGION)
    flt = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [name]}]
    stack = boto3.client("cloudformation", REGION).describe_stacks(
        StackName=f"clusterkit-{name}")["Stacks"][0]
    efs = boto3.client("efs", REGION)
    file_systems = [f for f in efs.describe_file_systems()["FileSystems"]
                    if _tags(f).get(CLUSTER_TAG) == name]
    return {
        "instances": [_tags(i) for i in _instances(name)],
        "volumes": [_tags(v) for v in ec2.describe_volumes(Filters=flt)["Volumes"]],
        "security_groups": [_tags(g) for g in
                            ec2.describe_security_groups(Filters=flt)["SecurityGroups"]],
        "launch_templates": [_tags(t) for t in
                             ec2.describe_launch_templates(Filters=flt)["LaunchTemplates"]],
        "key_pairs": [_tags(k) for k in ec2.describe_key_pairs(Filters=flt)["KeyPairs"]],
        "stacks": [_tags(stack)],
        "file_systems": [_tags(f) for f in file_systems],
    }


# Resources the stack makes get the spec's tags as stack-level tags, which CloudFormation
# propagates to them; moto propagates them to the security group only, so for these two
# the stack's own tags are what can be checked here.
NOT_PROPAGATED_BY_MOTO = ("launch_templates", "file_systems")


def test_spec_tags_on_every_resource(moto_env, tmp_path):
    name = support.unique_name("tags")
    spec = _spec(tmp_path, name, count=2, extra="storage:\n  efs: {mount: /efs}\n"
                 "tags: {team: vision, cost-center: '42'}\n")
    do_up(spec, yes=True, rt=runtime(), wait_ssh=False)
    found = _tagged(name)
    assert all(found.values()), found  # every kind exists, so every kind is checked
    for kind, resources in found.items():
        if kind in NOT_PROPAGATED_BY_MOTO:
            continue
        for tags in resources:
            assert tags.get("team") == "vision" and tags.get("cost-center") == "42", \
                (kind, tags)
    do_down(spec, yes=True, rt=runtime(), delete_efs=True)
    assert leftovers(name) == {}


def test_profile_chooses_the_credentials(moto_env, tmp_path, monkeypatch):
    """No credentials in the environment: `plan` fails (exit 1, "no AWS credentials");
    with `--profile` naming a profile of the AWS config files, it works."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "CLUSTERKIT_SANDBOX"):
        monkeypatch.delenv(var)
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    credentials.write_text("[ck-other]\naws_access_key_id = testing\n"
                           "aws_secret_access_key = testing\n")
    config.write_text("[profile ck-other]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    spec = _spec(tmp_path, support.unique_name("prof"))
    without = CliRunner().invoke(cli, ["--json", "plan", spec])
    assert without.exit_code == 1, without.output
    assert "no AWS credentials" in _json(without.stdout)["error"]
    with_profile = CliRunner().invoke(cli, ["--json", "plan", spec, "--profile", "ck-other"])
    assert with_profile.exit_code == 0, with_profile.output
    assert _json(with_profile.stdout)["choice"]["region"] == REGION


def _json(out: str) -> Any:
    """The JSON document on stdout (the in-process moto server prints its complaints
    about the Pricing API, which it lacks, to the same stdout first)."""
    return json.loads(out[out.index("{\n"):])


class Tokens:
    """ClientToken of every RunInstances call made through one session."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        self.seen.append(params["ClientToken"])

    def runtime(self, calls: Calls | None = None):
        rt = runtime(calls)
        rt.session.events.register_first("before-parameter-build.ec2.RunInstances",
                                         self.hook)
        return rt


def test_client_token_makes_a_retried_launch_the_same_launch(moto_env, tmp_path):
    """RunInstances fails (a server error before EC2 answered): the next `up` launches
    the same indexes with the same offer on the same stack, so it sends the same token,
    and EC2 would return the first launch's instances instead of starting more. Other
    indexes (a scale-up) get another token. moto does not honour the token itself."""
    name = support.unique_name("tok")
    tokens, failing = Tokens(), Calls(fail_at=1, only="RunInstances")
    with pytest.raises(AwsError):
        do_up(_spec(tmp_path, name, count=2), yes=True, rt=tokens.runtime(failing),
              wait_ssh=False)
    do_up(_spec(tmp_path, name, count=2), yes=True, rt=tokens.runtime(), wait_ssh=False)
    do_up(_spec(tmp_path, name, count=3), yes=True, rt=tokens.runtime(), wait_ssh=False)
    first, retried, scaled = tokens.seen
    assert retried == first and scaled != first
    assert all(0 < len(t) <= 64 and t.isascii() for t in tokens.seen)  # EC2's limit
    assert len(_instances(name)) == 3
    do_down(name, yes=True, region=REGION, rt=runtime())
    assert leftovers(name) == {}
